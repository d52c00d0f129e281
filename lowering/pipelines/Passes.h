// kiln's passes inside the pipeline stages every target runs: bounded elementwise fusion, strided copies, results computed in their out-params.
// Declared in Passes.td beside this file, one pass per file.
#pragma once

#include "lowering/ir/Conventions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/pipelines/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/pipelines/Passes.h.inc"

}  // namespace kiln::lowering
