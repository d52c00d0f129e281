// linalg.transpose of activations (elements of whole bytes) whose innermost
// dimension stays innermost — the head split and merge of attention,
// [B, S, H, D] <-> [B, H, S, D]: a copy of rows, each row read and written
// in whole vectors (the remainder one static tail), rows in parallel tiles
// when it moves enough bytes: 1x128x12x64 -> 1x12x128x64 in 9-11 us, on
// scalar loops 29-30. Transposes that move the innermost dimension (K^T
// for attention scores) take blocks of up to a vector's width by as many
// of the loop that reads the input's innermost dimension, transposed in
// registers (vector.transpose), where both are at least 8 wide (an add and
// 1x128x12x64 -> 1x12x64x128 in 46-49 us, on loops 110-118); narrower ones
// stay on loops.
//
// Transposes of a weight (reaching a matmul's B or a conv's filter through
// reshapes) are left alone: panel reads (Panels.cpp) remove them after the
// schedule.
#include "lowering/cpu/strategy/OpStrategy.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>

namespace kiln::lowering::strategy {
namespace {

/// Whether `v` reaches, through reshapes, a matmul's B operand or a conv's
/// filter: a weight whose transpose the panel reads take over.
bool feedsWeightOperand(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user) && feedsWeightOperand(user->getResult(0)))
      return true;
    if (isa<linalg::MatmulOp, linalg::BatchMatmulOp, linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp>(user) &&
        use.getOperandNumber() == 1)
      return true;
  }
  return false;
}

/// Rows (the innermost dimension stays): nothing to choose, the tiles
/// follow from the loop ranges. Blocks (it moves): a tile of `block`
/// elements of the output's innermost loop by `block` of the loop that
/// reads the input's innermost dimension (`across`), every other loop one
/// at a time, transposed in registers.
struct TransposePlan {
  bool rows = true;
  int64_t across = -1;
  SmallVector<int64_t> tile;
};

class TransposeStrategy final : public PlannedStrategy<TransposePlan> {
public:
  llvm::StringRef name() const override { return "transpose"; }

  bool recognize(linalg::LinalgOp op) const override {
    auto t = dyn_cast<linalg::TransposeOp>(op.getOperation());
    if (!t || !byteSizedElements(op)) return false;
    return t.getPermutation().size() >= 2 && !feedsWeightOperand(t->getResult(0));
  }

  std::optional<TransposePlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    ArrayRef<int64_t> perm = cast<linalg::TransposeOp>(op.getOperation()).getPermutation();
    int64_t rank = int64_t(perm.size());
    if (perm.back() == rank - 1) return TransposePlan{};
    TransposePlan p;
    p.rows = false;
    p.across = std::find(perm.begin(), perm.end(), rank - 1) - perm.begin();
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    p.tile.assign(rank, 1);
    for (int64_t d = 0; d < rank; ++d)
      if (bounds[d] == 1) p.tile[d] = 0;
    for (int64_t d : {rank - 1, p.across}) p.tile[d] = blockOf(bounds[d], 1, w.lanes());
    // Blocks narrower than 8 lost to the loops: NCHW -> NHWC of an image
    // (3 channels: 16x3 blocks) took 1.4-1.6x the loops' time, while 16x16
    // blocks of K^T (1x128x12x64 -> 1x12x64x128) took 0.46x.
    int64_t least = std::min<int64_t>(8, w.lanes());
    if (p.tile[rank - 1] < least || p.tile[p.across] < least) return std::nullopt;
    return p;
  }

  std::string describe(linalg::LinalgOp op, const TransposePlan &p, const ScheduleWriter &) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string how = p.rows ? ": rows in vectors"
                             : llvm::formatv(": blocks of {0}x{1} transposed in registers",
                                             std::max<int64_t>(p.tile[p.across], 1), p.tile.back())
                                   .str();
    return "transpose " + loopRangesText(op) + how +
           (parallelRowBlocks(op, bounds).empty() ? "" : ", in parallel");
  }

  void write(linalg::LinalgOp op, const TransposePlan &p, ScheduleWriter &w) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string h = w.parallelRows(w.tag(op), op, bounds);
    if (p.rows) return w.elementwise(h, bounds);
    // The blocks again within the parallel tile (its bounds), dividing it:
    // every block static.
    int64_t rank = int64_t(bounds.size());
    SmallVector<int64_t> tile(rank, 1);
    for (int64_t d = 0; d < rank; ++d)
      if (bounds[d] == 1) tile[d] = 0;
    for (int64_t d : {rank - 1, p.across}) {
      tile[d] = blockOf(bounds[d], 1, w.lanes());
      if (tile[d] == bounds[d]) tile[d] = 0;  // the whole loop in the block
    }
    h = w.schedule().tile(h, tile);
    w.schedule().vectorize(h);
  }
};

}  // namespace

const OpStrategy &transposeStrategy() {
  static const TransposeStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
