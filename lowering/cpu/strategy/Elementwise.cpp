// Elementwise ops, fills and copies (byte-sized elements; generics whose bodies
// only compute): the innermost dimension in whole vectors, the remainder
// peeled into one static tail (no masks), in parallel tiles of the outer
// loops when they move at least kParallelMinBytes. The same tiles serve
// the inits and epilogues of anchors that are not fused into their tiles
// (ScheduleWriter::elementwise), and the border fills of decomposed pads
// (Pad.cpp).
#include "lowering/cpu/strategy/OpStrategy.h"

namespace kiln::lowering::strategy {
namespace {

/// Nothing to choose ahead: the parallel tiles and vectors follow from
/// the loop ranges as the schedule writes them.
struct ElementwisePlan {};

class ElementwiseStrategy final : public PlannedStrategy<ElementwisePlan> {
public:
  llvm::StringRef name() const override { return "elementwise"; }
  bool minor() const override { return true; }

  bool recognize(linalg::LinalgOp op) const override {
    // (A 0-d fill or copy has no loop to vectorize: left to loops.)
    return (isa<linalg::FillOp, linalg::CopyOp>(op) && op.getNumLoops() > 0 && byteSizedElements(op)) ||
           isVectorizableElementwise(op);
  }

  std::optional<ElementwisePlan> choose(linalg::LinalgOp, const ScheduleWriter &) const override {
    return ElementwisePlan{};
  }

  std::string describe(linalg::LinalgOp op, const ElementwisePlan &, const ScheduleWriter &) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string out = isa<linalg::FillOp>(op) ? "fill" : isa<linalg::CopyOp>(op) ? "copy" : "elementwise";
    return out + (parallelRowBlocks(op, bounds).empty() ? "" : " in parallel");
  }

  void write(linalg::LinalgOp op, const ElementwisePlan &, ScheduleWriter &w) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string h = w.parallelRows(w.tag(op), op, bounds);
    w.elementwise(h, bounds);
  }
};

}  // namespace

const OpStrategy &elementwiseStrategy() {
  static const ElementwiseStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
