// kiln's GPU code-generation passes: parallel loops tiled into thread blocks.
// Declared in Passes.td beside this file, one pass per file.
#pragma once

#include "lowering/ir/Conventions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/gpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/gpu/Passes.h.inc"

}  // namespace kiln::lowering
