// TOSA ops as kiln's rewrites build them, shared by the rooms of lowering/
// that write TOSA: kiln-raise-linalg (graph/) and kiln-grouped-conv-to-linalg
// (pipelines/).
//
// Thread-safety: pure functions of the builder they are given.
#pragma once

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kiln::lowering {

/// tosa.pad of the static tensor `x` by `padding` (low, high per dimension)
/// with `value` (truncated for an integer element type).
inline mlir::Value tosaPad(mlir::ImplicitLocOpBuilder &b, mlir::Value x, llvm::ArrayRef<int64_t> padding,
                           double value) {
  auto t = mlir::cast<mlir::RankedTensorType>(x.getType());
  mlir::Type e = t.getElementType();
  llvm::SmallVector<int64_t> shape(t.getShape());
  for (int64_t d = 0; d < t.getRank(); ++d) shape[d] += padding[2 * d] + padding[2 * d + 1];
  auto ct = mlir::RankedTensorType::get({1}, e);
  mlir::Attribute v = mlir::isa<mlir::FloatType>(e) ? mlir::Attribute(b.getFloatAttr(e, value))
                                                    : mlir::Attribute(b.getIntegerAttr(e, int64_t(value)));
  mlir::Value padConst = mlir::tosa::ConstOp::create(b, ct, mlir::DenseElementsAttr::get(ct, v));
  return mlir::tosa::PadOp::create(b, mlir::RankedTensorType::get(shape, e), x,
                                   mlir::tosa::getTosaConstShape(b, padding), padConst);
}

}  // namespace kiln::lowering
