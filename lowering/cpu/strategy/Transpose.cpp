// linalg.transpose of activations (elements of whole bytes) whose innermost
// dimension stays innermost — the head split and merge of attention,
// [B, S, H, D] <-> [B, H, S, D]: a copy of rows, each row read and written
// in whole vectors (the remainder one static tail), rows in parallel tiles
// when it moves enough bytes. Without it the copy ran as scalar loops at
// ~2.5 ns an element (GPT-2's query/key/value kernels at 65% of peak
// against 87% for its other matmul kernels).
//
// Transposes of a weight (reaching a matmul's B or a conv's filter through
// reshapes) are left alone: panel reads (Panels.cpp) remove them after the
// schedule. Transposes that move the innermost dimension stay on loops.
#include "lowering/cpu/strategy/OpStrategy.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

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

/// Nothing to choose: the tiles follow from the loop ranges.
struct TransposePlan {};

class TransposeStrategy final : public PlannedStrategy<TransposePlan> {
public:
  llvm::StringRef name() const override { return "transpose"; }

  bool recognize(linalg::LinalgOp op) const override {
    auto t = dyn_cast<linalg::TransposeOp>(op.getOperation());
    if (!t || !byteSizedElements(op)) return false;
    ArrayRef<int64_t> perm = t.getPermutation();
    return !perm.empty() && perm.back() == int64_t(perm.size()) - 1 && !feedsWeightOperand(t->getResult(0));
  }

  std::optional<TransposePlan> choose(linalg::LinalgOp, const ScheduleWriter &) const override {
    return TransposePlan{};
  }

  std::string describe(linalg::LinalgOp op, const TransposePlan &, const ScheduleWriter &) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    SmallVector<std::string> sizes;
    for (int64_t n : bounds) sizes.push_back(std::to_string(n));
    return "transpose " + llvm::join(sizes, "x") + ": rows in vectors" +
           (parallelRowBlocks(op, bounds).empty() ? "" : ", in parallel");
  }

  void write(linalg::LinalgOp op, const TransposePlan &, ScheduleWriter &w) const override {
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    std::string h = w.parallelRows(w.tag(op), op, bounds);
    w.elementwise(h, bounds);
  }
};

}  // namespace

const OpStrategy &transposeStrategy() {
  static const TransposeStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
