// Reductions (f32 or f64, bodies that only compute):
//   outer reductions (the innermost loop parallel: a global pool over H
//   and W of NHWC data, sums over rows): vectors across the innermost
//   loop, the accumulator in a register across the reduction loops;
//   row reductions (over the innermost loop only: softmax's and layer
//   norm's rows): vector partials across the row, one horizontal reduction
//   at the end, rows in parallel tiles when they move enough bytes.
#include "lowering/cpu/strategy/OpStrategy.h"

namespace kiln::lowering::strategy {
namespace {

/// The vector width of `op`'s innermost loop (0: none fits).
int64_t innerWidth(linalg::LinalgOp op, const ScheduleWriter &w) {
  return reductionWidth(op.getStaticLoopRanges().back(), w.lanes() * 32 / uniformFloatBits(op));
}

struct OuterReductionPlan {
  /// Tile sizes: vectors of the innermost loop and one element of the other
  /// parallel loops (`outer`), then the reduction loops one step at a time.
  SmallVector<int64_t> outer, reduction;
};

class OuterReductionStrategy final : public PlannedStrategy<OuterReductionPlan> {
public:
  llvm::StringRef name() const override { return "outer-reduction"; }

  bool recognize(linalg::LinalgOp op) const override { return isVectorizableOuterReduction(op); }

  std::optional<OuterReductionPlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    int64_t inner = bounds.back();
    int64_t width = innerWidth(op, w);
    if (width == 0) return std::nullopt;
    // Vectors across the innermost loop (and one element of the other
    // parallel loops), then the reduction loops one step at a time
    // inside: the accumulator vector stays in a register.
    auto iters = op.getIteratorTypesArray();
    OuterReductionPlan p{SmallVector<int64_t>(bounds.size(), 0), SmallVector<int64_t>(bounds.size(), 0)};
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      if (bounds[i] == 1) continue;
      (iters[i] == utils::IteratorType::parallel ? p.outer : p.reduction)[i] = 1;
    }
    p.outer.back() = width == inner ? 0 : width;
    return p;
  }

  std::string describe(linalg::LinalgOp op, const OuterReductionPlan &p, const ScheduleWriter &) const override {
    int64_t inner = op.getStaticLoopRanges().back();
    return llvm::formatv("outer reduction: vectors of {0}", p.outer.back() ? p.outer.back() : inner).str() +
           (parallelRowBlocks(op, op.getStaticLoopRanges()).empty() ? "" : ", in parallel");
  }

  // Blocks of the outer parallel loops for the threads where the op moves
  // enough bytes: a squeeze-and-excitation's pool over a 56x56x144 map
  // (EfficientNet-B0; 1.8 MB read) took 0.26 ms on one thread.
  void write(linalg::LinalgOp op, const OuterReductionPlan &p, ScheduleWriter &w) const override {
    Schedule &schedule = w.schedule();
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string h = schedule.tile(w.parallelRows(w.tag(op), op, bounds), p.outer);
    h = schedule.tile(h, p.reduction);
    schedule.vectorize(h);
  }
};

struct RowReductionPlan {
  int64_t width = 0;  // of the vector partials
  /// Rows no vector width divides (197 tokens of ViT, any odd sequence
  /// length): the first `whole` elements of each row in vectors, the rest
  /// (fewer than `width`) reduced after them as one short vector.
  int64_t whole = 0;
};

class RowReductionStrategy final : public PlannedStrategy<RowReductionPlan> {
public:
  llvm::StringRef name() const override { return "row-reduction"; }

  bool recognize(linalg::LinalgOp op) const override { return isVectorizableRowReduction(op); }

  std::optional<RowReductionPlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    int64_t inner = op.getStaticLoopRanges().back();
    int64_t width = innerWidth(op, w);
    if (width != 0) {
      if (inner == width) return std::nullopt;  // short rows stay on loops
      return RowReductionPlan{width, 0};
    }
    // Ragged rows: whole vectors, then the rest.
    int64_t lanes = w.lanes() * 32 / uniformFloatBits(op);
    if (inner < 2 * lanes) return std::nullopt;
    return RowReductionPlan{lanes, inner - inner % lanes};
  }

  std::string describe(linalg::LinalgOp op, const RowReductionPlan &p, const ScheduleWriter &) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string out = llvm::formatv("row reduction of {0}: vectors of {1}", bounds.back(), p.width).str();
    if (p.whole) out += llvm::formatv(" (+{0} after)", bounds.back() - p.whole).str();
    return out + (parallelRowBlocks(op, bounds).empty() ? "" : ", rows in parallel");
  }

  void write(linalg::LinalgOp op, const RowReductionPlan &p, ScheduleWriter &w) const override {
    Schedule &schedule = w.schedule();
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string h = w.parallelRows(w.tag(op), op, bounds);
    SmallVector<int64_t> rows(bounds.size(), 0), split(bounds.size(), 0);
    for (size_t i = 0; i + 1 < bounds.size(); ++i) rows[i] = bounds[i] > 1 ? 1 : 0;
    split.back() = p.width;
    if (p.whole) {
      // The row's whole vectors, then the rest, which continues from their
      // result (a split along the reduction: the second part's init is the
      // first part's result).
      auto [whole, rest] = schedule.split(h, int64_t(bounds.size()) - 1, p.whole);
      schedule.tileReduction(schedule.tile(whole, rows), split);
      schedule.vectorize(schedule.tile(rest, rows));
      return;
    }
    h = schedule.tile(h, rows);
    schedule.tileReduction(h, split);
  }
};

}  // namespace

const OpStrategy &outerReductionStrategy() {
  static const OuterReductionStrategy strategy;
  return strategy;
}

const OpStrategy &rowReductionStrategy() {
  static const RowReductionStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
