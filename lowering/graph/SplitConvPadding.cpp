//===- SplitConvPadding.cpp - a window op's padding as an op of its own ----===//
//
// kiln-split-conv-padding: tosa.conv2d, tosa.depthwise_conv2d and
// tosa.max_pool2d with padding become tosa.pad of their input and the same
// op without padding. Lowered as one op, each copies its whole input into a
// padded buffer on every call: a memory-bound depthwise conv (MobileNet's
// 112x112x96 input is 4.8 MB) then moves twice the bytes it computes on. As
// an op of its own, the pad joins the cluster of the op that produces the
// input (it is not an anchor), and bufferization writes that op's result
// straight into the padded buffer's interior (empty-tensor elimination):
// only the border is written. Float ops only; convs pad with their input
// zero point, which must be 0, max pooling with -inf (padding never wins).
// Runs when a specialized function is partitioned, after kiln-place-ops
// (TOSA's canonicalizations, which specialization runs, would fold such a
// pad back into the op): only ops placed on JIT are split, their pad placed
// with them. A pad that ends up in its op's cluster is the same copy as
// before.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/OpView.h"
#include "lowering/graph/Passes.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSPLITCONVPADDING
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// The value of a constant single-element float tensor, if `v` is one.
std::optional<double> constantFloat(Value v) {
  DenseElementsAttr dense;
  if (auto c = v.getDefiningOp<tosa::ConstOp>()) dense = dyn_cast<DenseElementsAttr>(c.getValues());
  if (!dense || dense.getNumElements() != 1 || !isa<FloatType>(dense.getElementType())) return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

/// `input` padded by `pad` (top, bottom, left, right) with `value`, as a
/// tosa.pad; null when the input is not a static float NHWC tensor.
Value padInput(PatternRewriter &rewriter, Location loc, Value input, llvm::ArrayRef<int64_t> pad, Value value) {
  auto type = dyn_cast<RankedTensorType>(input.getType());
  if (!type || !type.hasStaticShape() || type.getRank() != 4 || !isa<FloatType>(type.getElementType())) return {};
  SmallVector<int64_t> shape(type.getShape());
  shape[1] += pad[0] + pad[1];
  shape[2] += pad[2] + pad[3];
  Value padding = tosa::getTosaConstShape(rewriter, loc, {0, 0, pad[0], pad[1], pad[2], pad[3], 0, 0});
  return tosa::PadOp::create(rewriter, loc, RankedTensorType::get(shape, type.getElementType()), input, padding,
                             value);
}

/// Splits only ops that run as generated code: unplaced (kiln-opt), or
/// placed on JIT by kiln-place-ops (a kernel pads by itself).
bool onJit(Operation *op) {
  auto placement = op->getAttrOfType<StringAttr>(kPlacementAttr);
  return !placement || placement.getValue() == "jit";
}

/// Makes `op` read `padded` without padding. A placed op's pad is placed
/// with it; the op keeps its padding in kUnsplitPadAttr, so that placement
/// by measurement still times (and names) the op as the graph has it.
template <typename Op> void usePadded(PatternRewriter &rewriter, Op op, Value padded) {
  if (Attribute placement = op->getAttr(kPlacementAttr)) padded.getDefiningOp()->setAttr(kPlacementAttr, placement);
  rewriter.modifyOpInPlace(op, [&] {
    op->setAttr(kUnsplitPadAttr, rewriter.getDenseI64ArrayAttr(op.getPad()));
    op.getInputMutable().assign(padded);
    op.setPad(SmallVector<int64_t>(4, 0));
  });
}

bool padded(llvm::ArrayRef<int64_t> pad) {
  return pad.size() == 4 && llvm::all_of(pad, [](int64_t p) { return p >= 0; }) &&
         llvm::any_of(pad, [](int64_t p) { return p > 0; });
}

/// Convolutions: the pad value is the input zero point, which must be 0.
template <typename ConvOp> struct SplitConv : OpRewritePattern<ConvOp> {
  using OpRewritePattern<ConvOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rewriter) const override {
    if (!padded(op.getPad()) || !onJit(op)) return failure();
    auto zp = constantFloat(op.getInputZp());
    auto zpType = dyn_cast<RankedTensorType>(op.getInputZp().getType());
    if (!zp || *zp != 0.0 || !zpType || zpType.getElementType() != getElementTypeOrSelf(op.getInput().getType()))
      return failure();
    Value p = padInput(rewriter, op.getLoc(), op.getInput(), op.getPad(), op.getInputZp());
    if (!p) return failure();
    usePadded(rewriter, op, p);
    return success();
  }
};

/// Max pooling: padding never wins a maximum, so the pad value is -inf.
struct SplitMaxPool : OpRewritePattern<tosa::MaxPool2dOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tosa::MaxPool2dOp op, PatternRewriter &rewriter) const override {
    if (!padded(op.getPad()) || !onJit(op)) return failure();
    auto type = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto et = type ? dyn_cast<FloatType>(type.getElementType()) : nullptr;
    if (!et) return failure();
    auto valueType = RankedTensorType::get({1}, et);
    Value lowest = tosa::ConstOp::create(
        rewriter, op.getLoc(), valueType,
        DenseElementsAttr::get(valueType, APFloat::getInf(et.getFloatSemantics(), /*Negative=*/true)));
    Value p = padInput(rewriter, op.getLoc(), op.getInput(), op.getPad(), lowest);
    if (!p) return failure();
    usePadded(rewriter, op, p);
    return success();
  }
};

struct SplitConvPadding : impl::KilnSplitConvPaddingBase<SplitConvPadding> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitConv<tosa::DepthwiseConv2DOp>, SplitConv<tosa::Conv2DOp>, SplitMaxPool>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) return signalPassFailure();
  }
};

}  // namespace
}  // namespace kiln::lowering
