// The order kiln-cpu-strategy tries its op strategies in (see OpStrategy.h).
#include "lowering/cpu/strategy/OpStrategy.h"

namespace kiln::lowering::strategy {

llvm::ArrayRef<const OpStrategy *> strategies() {
  static const OpStrategy *const all[] = {&matmulStrategy(),         &convStrategy(),         &windowStrategy(),
                                          &outerReductionStrategy(), &rowReductionStrategy(), &elementwiseStrategy(),
                                          &transposeStrategy()};
  return all;
}

const OpStrategy *strategyFor(linalg::LinalgOp op) {
  for (const OpStrategy *strategy : strategies())
    if (strategy->recognize(op)) return strategy;
  return nullptr;
}

}  // namespace kiln::lowering::strategy
