//===- ReductionInits.cpp - float max/min reductions start from -inf/+inf -===//
//
// kiln-reduction-inits: upstream tosa-to-linalg starts a float reduce_max
// from the lowest finite value (-FLT_MAX) and a reduce_min from the
// largest, where TOSA starts them from -inf and +inf: a row of -inf then
// reduced to -FLT_MAX, not -inf (torch's safe softmax, which asks whether
// a row is all -inf through its maximum, would see no masked row). The
// fills of those inits become -inf / +inf. A row with any value above
// -FLT_MAX (below FLT_MAX) reduces to the same value either way.
//
//===----------------------------------------------------------------------===//
#include "lowering/pipelines/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNREDUCTIONINITS
#include "lowering/pipelines/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

struct ReductionInits : impl::KilnReductionInitsBase<ReductionInits> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::FillOp, bool>> fills;  // fill, negative infinity
    getOperation().walk([&](linalg::ReduceOp reduce) {
      Block &body = reduce.getCombiner().front();
      if (body.getOperations().size() != 2) return;  // one combiner + yield
      Operation &combiner = body.front();
      bool max = isa<arith::MaximumFOp, arith::MaxNumFOp>(combiner);
      bool min = isa<arith::MinimumFOp, arith::MinNumFOp>(combiner);
      if (!max && !min) return;
      for (Value init : reduce.getInits()) {
        auto fill = init.getDefiningOp<linalg::FillOp>();
        if (!fill) continue;
        auto c = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
        auto value = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
        if (!value) continue;
        APFloat v = value.getValue();
        APFloat extreme = APFloat::getLargest(v.getSemantics(), /*Negative=*/max);
        if (v.bitwiseIsEqual(extreme)) fills.push_back({fill, max});
      }
    });
    for (auto [fill, negative] : fills) {
      OpBuilder b(fill);
      Value v = fill.getInputs()[0];
      auto type = cast<FloatType>(v.getType());
      Value inf = arith::ConstantOp::create(
          b, fill.getLoc(), b.getFloatAttr(type, APFloat::getInf(type.getFloatSemantics(), negative)));
      fill->setOperand(0, inf);
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
