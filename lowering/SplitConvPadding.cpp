//===- SplitConvPadding.cpp - a depthwise conv's padding as its own op -----===//
//
// kiln-split-conv-padding: tosa.depthwise_conv2d with padding becomes
// tosa.pad of its input and the same conv without padding. Lowered as one
// op, the conv copies its whole input into a padded buffer on every call: a
// memory-bound depthwise conv (MobileNet's 112x112x96 input is 4.8 MB) then
// moves twice the bytes it computes on. As an op of its own, the pad joins
// the cluster of the op that produces the input (it is not an anchor), and
// bufferization writes that op's result straight into the padded buffer's
// interior (empty-tensor elimination): only the border is written. Float
// convs with a zero input zero point only (the pad value is that zero).
// Runs when a specialized function is partitioned: TOSA's canonicalizations
// fold such a pad back into the conv, and each cluster's pipeline
// canonicalizes again (where a pad left with its conv folds back: no loss).
//
//===----------------------------------------------------------------------===//
#include "lowering/Passes.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSPLITCONVPADDING
#include "lowering/Passes.h.inc"
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

struct SplitDepthwisePadding : OpRewritePattern<tosa::DepthwiseConv2DOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tosa::DepthwiseConv2DOp op, PatternRewriter &rewriter) const override {
    llvm::ArrayRef<int64_t> pad = op.getPad();  // top, bottom, left, right
    if (pad.size() != 4 || llvm::all_of(pad, [](int64_t p) { return p == 0; })) return failure();
    if (llvm::any_of(pad, [](int64_t p) { return p < 0; })) return failure();
    auto input = dyn_cast<RankedTensorType>(op.getInput().getType());
    if (!input || !input.hasStaticShape() || input.getRank() != 4 || !isa<FloatType>(input.getElementType()))
      return failure();
    auto zp = constantFloat(op.getInputZp());
    if (!zp || *zp != 0.0) return failure();
    auto zpType = dyn_cast<RankedTensorType>(op.getInputZp().getType());
    if (!zpType || zpType.getElementType() != input.getElementType()) return failure();

    SmallVector<int64_t> shape(input.getShape());
    shape[1] += pad[0] + pad[1];
    shape[2] += pad[2] + pad[3];
    auto paddedType = RankedTensorType::get(shape, input.getElementType());
    Location loc = op.getLoc();
    Value padding = tosa::getTosaConstShape(rewriter, loc, {0, 0, pad[0], pad[1], pad[2], pad[3], 0, 0});
    Value padded = tosa::PadOp::create(rewriter, loc, paddedType, op.getInput(), padding, op.getInputZp());
    rewriter.modifyOpInPlace(op, [&] {
      op.getInputMutable().assign(padded);
      op.setPad(SmallVector<int64_t>(4, 0));
    });
    return success();
  }
};

struct SplitConvPadding : impl::KilnSplitConvPaddingBase<SplitConvPadding> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitDepthwisePadding>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) return signalPassFailure();
  }
};

}  // namespace
}  // namespace kiln::lowering
