// Ops as the runtime sees them, shared by kiln's placement and outlining
// passes and by plan extraction: which ops are free (constants), an op's
// kernel key and attributes (constant operands folded in as the op table
// says), and which kernel, if any, takes it.
#pragma once

#include "lowering/graph/Partition.h"
#include "ops/Attrs.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace kiln::lowering {

/// Attributes kiln-place-ops puts on each placed op.
inline constexpr llvm::StringLiteral kPlacementAttr = "kiln.placement";  // "jit" | "kernel"
inline constexpr llvm::StringLiteral kKernelAttr = "kiln.kernel";        // the kernel's name
inline constexpr llvm::StringLiteral kReasonAttr = "kiln.reason";        // why a kernel
inline constexpr llvm::StringLiteral kNoteAttr = "kiln.note";            // kernel asked for, kept on JIT
/// On an `auto` op kept on JIT that this kernel also takes: to be measured.
inline constexpr llvm::StringLiteral kAlternativeAttr = "kiln.alternative";
/// On a window op whose padding kiln-split-conv-padding moved into a
/// tosa.pad: the padding it had.
inline constexpr llvm::StringLiteral kUnsplitPadAttr = "kiln.unsplit_pad";

/// Constants (tosa.const, tosa.const_shape, arith.constant): not placed;
/// cloned into the clusters that use them.
bool isFreeOp(mlir::Operation *op);
/// kiln's grouped conv (tosa.custom kiln.grouped_conv2d, Conventions.h).
bool isGroupedConv(mlir::Operation *op);
/// An op a kernel is built around (conv, matmul, pooling): at most
/// anchors-per-cluster of them share a JIT cluster, and placement by
/// measurement times these.
bool isAnchorOp(mlir::Operation *op);
/// "tosa.add", or "tosa.custom:domain.name".
std::string kernelKey(mlir::Operation *op);

/// An op as a kernel sees it: its key, attributes (properties plus folded
/// constant operands) and the tensor operands it reads.
struct KernelView {
  std::string key;
  ops::AttrMap attrs;
  llvm::SmallVector<mlir::Value> data;
  std::string whyNot;  // non-empty: no kernel can take this op
};
KernelView kernelView(mlir::Operation *op);

/// The kernel that takes this op as specialized ("" and the reason when
/// none); with `inputs`/`results`, also the types it was asked about.
std::string kernelFor(mlir::Operation *op, const KernelView &view, const KernelOracle &oracle, std::string &why,
                      std::vector<TensorType> *inputs = nullptr, std::vector<TensorType> *results = nullptr);

/// Every operand (also of nested ops) defined outside `op`.
llvm::SmallVector<mlir::Value> externalOperands(mlir::Operation *op);

}  // namespace kiln::lowering
