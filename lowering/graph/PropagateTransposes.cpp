//===- PropagateTransposes.cpp - layout transposes cancel ------------------===//
//
// kiln-propagate-transposes: exporters from NCHW frameworks wrap every NHWC
// convolution in transposes (NCHW -> NHWC before, back after) and compute
// batch norm, activations and residual adds in NCHW between them. This pass
// sinks each tosa.transpose below the elementwise ops that consume it:
//
//   E(transpose(x, p), transpose(y, p), small) -> transpose(E(x, y, transpose(small, p^-1)), p)
//
// where x is large (more than 4096 elements, or dynamic), every other
// operand of E of the same rank is a transpose by the same permutation or is
// small (a broadcast per-channel constant: its transpose is a few elements,
// or folds into the weights at load). A transpose of a large value also
// sinks below a reduction (the axis follows the permutation). Two
// transposes that meet compose into one, and an identity transpose
// disappears, so the NCHW islands between convolutions vanish and the whole
// graph runs NHWC.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Passes.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNPROPAGATETRANSPOSES
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Operands with at most this many elements may be transposed to follow.
constexpr int64_t kSmallOperand = 4096;

bool isElementwise(Operation *op) {
  return isa<tosa::AddOp, tosa::SubOp, tosa::MulOp, tosa::MaximumOp, tosa::MinimumOp, tosa::ClampOp,
             tosa::SigmoidOp, tosa::TanhOp, tosa::ExpOp, tosa::LogOp, tosa::RsqrtOp, tosa::ReciprocalOp,
             tosa::AbsOp, tosa::NegateOp, tosa::CastOp, tosa::PowOp, tosa::ErfOp, tosa::FloorOp, tosa::CeilOp,
             tosa::GreaterOp, tosa::GreaterEqualOp, tosa::EqualOp, tosa::SelectOp, tosa::LogicalNotOp,
             tosa::LogicalAndOp, tosa::LogicalOrOp>(op);
}

SmallVector<int32_t> inverse(ArrayRef<int32_t> perm) {
  SmallVector<int32_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = int32_t(i);
  return inv;
}

RankedTensorType permutedType(RankedTensorType t, ArrayRef<int32_t> perm) {
  SmallVector<int64_t> shape;
  for (int32_t p : perm) shape.push_back(t.getDimSize(p));
  return RankedTensorType::get(shape, t.getElementType());
}

/// Replaces `op` (one result) by a copy of it on `operands` with
/// `attrs`, whose result is in the layout before the transpose `perm`,
/// followed by that transpose: the transpose moves below `op`.
void moveTransposeBelow(PatternRewriter &rewriter, Operation *op, ValueRange operands, ArrayRef<int32_t> perm,
               ArrayRef<NamedAttribute> attrs) {
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operands);
  state.addTypes(permutedType(resultType, inverse(perm)));
  state.addAttributes(attrs);
  Operation *moved = rewriter.create(state);
  rewriter.replaceOpWithNewOp<tosa::TransposeOp>(op, resultType, moved->getResult(0),
                                                 rewriter.getDenseI32ArrayAttr(perm));
}

struct SinkTransposeThroughElementwise : RewritePattern {
  SinkTransposeThroughElementwise(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isElementwise(op) || op->getNumResults() != 1) return failure();
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!resultType) return failure();
    int64_t rank = resultType.getRank();
    // The permutation of the first operand that transposes a large value
    // (transposes of small values are what this pattern creates: they
    // never move, so the rewrite cannot ping-pong).
    std::optional<SmallVector<int32_t>> perm;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<tosa::TransposeOp>()) {
        auto in = dyn_cast<RankedTensorType>(t.getInput1().getType());
        if (in && in.hasStaticShape() && in.getNumElements() <= kSmallOperand) continue;
        perm = SmallVector<int32_t>(t.getPerms());
        break;
      }
    if (!perm || int64_t(perm->size()) != rank) return failure();
    SmallVector<int32_t> inv = inverse(*perm);
    for (Value v : op->getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || t.getRank() != rank) continue;  // e.g. tosa.mul's shift
      if (auto tr = v.getDefiningOp<tosa::TransposeOp>(); tr && tr.getPerms() == ArrayRef<int32_t>(*perm)) continue;
      if (!t.hasStaticShape() || t.getNumElements() > kSmallOperand) return failure();
    }
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || t.getRank() != rank) {
        operands.push_back(v);
        continue;
      }
      if (auto tr = v.getDefiningOp<tosa::TransposeOp>(); tr && tr.getPerms() == ArrayRef<int32_t>(*perm)) {
        operands.push_back(tr.getInput1());
        continue;
      }
      operands.push_back(tosa::TransposeOp::create(rewriter, op->getLoc(), permutedType(t, inv), v,
                                                   rewriter.getDenseI32ArrayAttr(inv)));
    }
    moveTransposeBelow(rewriter, op, operands, *perm, op->getAttrs());
    return success();
  }
};

/// reduce(transpose(x, p), axis a) -> transpose(reduce(x, axis p[a]), p):
/// a reduction keeps its rank (the axis becomes 1), so the transpose moves
/// below it unchanged and then applies to the smaller result (a global
/// average pool in NCHW then reads NHWC data directly).
struct SinkTransposeThroughReduce : RewritePattern {
  SinkTransposeThroughReduce(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isa<tosa::ReduceSumOp, tosa::ReduceMaxOp, tosa::ReduceMinOp, tosa::ReduceProductOp, tosa::ReduceAllOp,
             tosa::ReduceAnyOp>(op) ||
        op->getNumOperands() != 1 || op->getNumResults() != 1)
      return failure();
    auto tr = op->getOperand(0).getDefiningOp<tosa::TransposeOp>();
    auto axisAttr = op->getAttrOfType<IntegerAttr>("axis");
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!tr || !axisAttr || !resultType) return failure();
    // Any size: the result is smaller than the input, and nothing moves a
    // transpose back above a reduction.
    ArrayRef<int32_t> perm = tr.getPerms();
    int64_t axis = axisAttr.getInt();
    if (axis < 0 || axis >= int64_t(perm.size()) || resultType.getRank() != int64_t(perm.size())) return failure();
    NamedAttrList attrs(op->getAttrs());
    attrs.set("axis", IntegerAttr::get(axisAttr.getType(), perm[axis]));
    moveTransposeBelow(rewriter, op, tr.getInput1(), perm, attrs);
    return success();
  }
};

/// concat(transpose(a, p), transpose(b, p), ...) along axis d ->
/// transpose(concat(a, b, ...) along p[d], p): DenseNet's channel concats
/// of NCHW exports, between convolutions, then run NHWC too (and their
/// transposes meet the next ones and cancel).
struct SinkTransposeThroughConcat : OpRewritePattern<tosa::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tosa::ConcatOp op, PatternRewriter &rewriter) const override {
    auto resultType = dyn_cast<RankedTensorType>(op.getType());
    if (!resultType || op->getNumOperands() < 2) return failure();
    std::optional<SmallVector<int32_t>> perm;
    SmallVector<Value> inputs;
    for (Value v : op->getOperands()) {
      auto t = v.getDefiningOp<tosa::TransposeOp>();
      if (!t) return failure();
      if (!perm) perm = SmallVector<int32_t>(t.getPerms());
      else if (ArrayRef<int32_t>(*perm) != t.getPerms()) return failure();
      inputs.push_back(t.getInput1());
    }
    int64_t axis = op.getAxis();
    if (axis < 0 || axis >= int64_t(perm->size())) return failure();
    SmallVector<int32_t> inv = inverse(*perm);
    auto concat = tosa::ConcatOp::create(rewriter, op.getLoc(), permutedType(resultType, inv), inputs,
                                         rewriter.getI32IntegerAttr((*perm)[axis]));
    rewriter.replaceOpWithNewOp<tosa::TransposeOp>(op, resultType, concat.getResult(),
                                                   rewriter.getDenseI32ArrayAttr(*perm));
    return success();
  }
};

/// transpose(transpose(x, p), q) -> transpose(x, p∘q); identity -> x.
struct ComposeTransposes : OpRewritePattern<tosa::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tosa::TransposeOp op, PatternRewriter &rewriter) const override {
    ArrayRef<int32_t> q = op.getPerms();
    bool identity = true;
    for (size_t i = 0; i < q.size(); ++i) identity &= q[i] == int32_t(i);
    if (identity && op.getInput1().getType() == op.getType()) {
      rewriter.replaceOp(op, op.getInput1());
      return success();
    }
    auto inner = op.getInput1().getDefiningOp<tosa::TransposeOp>();
    if (!inner) return failure();
    ArrayRef<int32_t> p = inner.getPerms();
    SmallVector<int32_t> composed;
    for (int32_t j : q) composed.push_back(p[j]);
    rewriter.replaceOpWithNewOp<tosa::TransposeOp>(op, op.getType(), inner.getInput1(),
                                                   rewriter.getDenseI32ArrayAttr(composed));
    return success();
  }
};

struct PropagateTransposes : impl::KilnPropagateTransposesBase<PropagateTransposes> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkTransposeThroughElementwise, SinkTransposeThroughReduce, SinkTransposeThroughConcat, ComposeTransposes>(
        &getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config))) signalPassFailure();
  }
};

}  // namespace
}  // namespace kiln::lowering
