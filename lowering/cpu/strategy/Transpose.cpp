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
// stay on loops. An output row that no block of 8 or more divides (ViT's
// 197 keys: K^T 1x12x197x64 -> 1x12x64x197, a prime) takes blocks of a
// whole vector and one narrower block of the rest (the loop peeled).
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
  /// Blocks of a whole vector along the output's rows, which they do not
  /// divide: the last block is the remainder, peeled.
  bool peeled = false;
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
    // (Only where the threads do not split the across loop, so that the
    // blocks' vector sizes are the loops' own, and where that loop is read
    // in whole vectors too: ShuffleNet's 116 channels over 14-wide rows
    // (blocks of 14x16 and 14x4) took 1.02x the loops' time over its 11
    // kernels, bench/ab_kernels.py.)
    SmallVector<int64_t> threads = parallelRowBlocks(op, bounds);
    if (p.tile[rank - 1] < least && bounds[rank - 1] > w.lanes() &&
        p.tile[p.across] == w.lanes() && (threads.empty() || !threads[p.across])) {
      p.tile[rank - 1] = w.lanes();
      p.peeled = true;
    }
    if (p.tile[rank - 1] < least || p.tile[p.across] < least) return std::nullopt;
    return p;
  }

  std::string describe(linalg::LinalgOp op, const TransposePlan &p, const ScheduleWriter &) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string how = p.rows ? ": rows in vectors"
                             : llvm::formatv(": blocks of {0}x{1} transposed in registers",
                                             std::max<int64_t>(p.tile[p.across], 1), p.tile.back())
                                   .str();
    if (p.peeled)
      how += llvm::formatv(" (+ {0}x{1} for the last {1})", p.tile[p.across], bounds.back() % p.tile.back()).str();
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
    if (!p.peeled) {
      h = w.schedule().tile(h, tile);
      w.schedule().vectorize(h);
      return;
    }
    // Whole-vector blocks along the rows and the remainder, each vectorized
    // at its static size (the other loops one at a time, or whole: the
    // across loop, never split for the threads, and loops of 1).
    tile[rank - 1] = p.tile[rank - 1];
    int loop = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) loop += tile[d] != 0;
    std::string tiled = w.schedule().tile(h, tile);
    auto [full, rest] = w.schedule().peelLoop(tiled, loop);
    SmallVector<int64_t> vec(rank);
    for (int64_t d = 0; d < rank; ++d) vec[d] = tile[d] ? tile[d] : bounds[d];
    w.schedule().vectorize(full, vec);
    vec[rank - 1] = bounds[rank - 1] % tile[rank - 1];
    w.schedule().vectorize(rest, vec);
  }
};

}  // namespace

const OpStrategy &transposeStrategy() {
  static const TransposeStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
