// kiln's own MLIR passes (declared in Passes.td, one per file).
#pragma once

#include "lowering/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::lowering {

#define GEN_PASS_DECL
#include "lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/Passes.h.inc"

/// Attribute on a hoisted weight argument that carries its value.
inline constexpr llvm::StringLiteral kWeightAttrName = "kiln.weight";

/// Specializes `function` in `module` to `argTypes` (see kiln-specialize-shapes).
mlir::LogicalResult specializeShapes(mlir::ModuleOp module, llvm::StringRef function,
                                     llvm::ArrayRef<mlir::Type> argTypes);
/// Hoists large constants of every public function (see kiln-hoist-constants).
mlir::LogicalResult hoistConstants(mlir::ModuleOp module, int64_t minElements);

}  // namespace kiln::lowering
