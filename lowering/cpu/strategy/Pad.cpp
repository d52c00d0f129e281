// Pads: tensor.pad of static shapes with a constant value decomposed
// before the schedule (see Rewrites.h); its border fills and interior
// copy are then scheduled as elementwise ops (Elementwise.cpp).
#include "lowering/cpu/strategy/Rewrites.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering::strategy {
using namespace mlir;

/// tensor.pad of static shapes with a constant value: the source copied
/// into the interior of a new tensor, and fills of the border only (one
/// slab per padded side, vectorized like any fill). Filling the whole
/// padded tensor first would write a stride-2 depthwise conv's 5 MB input
/// twice. Other pads: a fill of the whole and an insert (upstream).
void decomposePads(ModuleOp module) {
  SmallVector<tensor::PadOp> pads;
  module.walk([&](tensor::PadOp pad) { pads.push_back(pad); });
  if (pads.empty()) return;
  IRRewriter rewriter(module.getContext());
  for (tensor::PadOp pad : pads) {
    RankedTensorType type = pad.getResultType(), srcType = pad.getSourceType();
    Value value = pad.getConstantPaddingValue();
    if (!type.hasStaticShape() || !srcType.hasStaticShape() || !value || pad.getNofold()) continue;
    // Amounts given as attributes or as constant SSA values (tosa.pad's
    // lowering leaves arith.constants).
    SmallVector<int64_t> low, high;
    bool constant = true;
    for (auto [mixed, out] : {std::pair(pad.getMixedLowPad(), &low), std::pair(pad.getMixedHighPad(), &high)})
      for (OpFoldResult r : mixed) {
        std::optional<int64_t> c = getConstantIntValue(r);
        constant &= c.has_value();
        out->push_back(c.value_or(0));
      }
    if (!constant) continue;
    // The padded buffer is created at the top of the block: it then
    // dominates the source's producer, and empty-tensor elimination lets
    // that producer write straight into the interior (no copy).
    Location loc = pad.getLoc();
    rewriter.setInsertionPointToStart(pad->getBlock());
    Value cur = tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
    rewriter.setInsertionPoint(pad);
    int64_t rank = type.getRank();
    SmallVector<int64_t> ones(rank, 1);
    auto fold = [&](llvm::ArrayRef<int64_t> v) { return getAsIndexOpFoldResult(module.getContext(), v); };
    cur = tensor::InsertSliceOp::create(rewriter, loc, pad.getSource(), cur, fold(low), fold(srcType.getShape()),
                                        fold(ones));
    for (int64_t d = 0; d < rank; ++d) {
      for (bool before : {true, false}) {
        int64_t width = before ? low[d] : high[d];
        if (width == 0) continue;
        // Dimensions before d: the interior; d: this side; after d: all.
        SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape());
        for (int64_t e = 0; e < d; ++e) {
          offsets[e] = low[e];
          sizes[e] = srcType.getDimSize(e);
        }
        offsets[d] = before ? 0 : low[d] + srcType.getDimSize(d);
        sizes[d] = width;
        Value slab = tensor::ExtractSliceOp::create(rewriter, loc, cur, fold(offsets), fold(sizes), fold(ones));
        Value filled = linalg::FillOp::create(rewriter, loc, value, slab).getResult(0);
        cur = tensor::InsertSliceOp::create(rewriter, loc, filled, cur, fold(offsets), fold(sizes), fold(ones));
      }
    }
    rewriter.replaceOp(pad, cur);
  }
  RewritePatternSet patterns(module.getContext());
  patterns.add<linalg::DecomposePadOpPattern>(module.getContext());
  (void)applyPatternsGreedily(module, std::move(patterns));
}

}  // namespace kiln::lowering::strategy
