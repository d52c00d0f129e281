// kiln's host-CPU code-generation passes: per-op schedules, Winograd convolutions, outlined parallel loops, scratch buffers, the kiln_entry ABI.
// Declared in Passes.td beside this file, one pass per file.
#pragma once

#include "lowering/ir/Conventions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/cpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/cpu/Passes.h.inc"

}  // namespace kiln::lowering
