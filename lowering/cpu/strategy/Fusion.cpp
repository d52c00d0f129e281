// Fused ops of kiln-cpu-strategy's anchors (see Fusion.h).
#include "lowering/cpu/strategy/Fusion.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/TilingInterface.h"

namespace kiln::lowering::strategy {

bool isAnchor(linalg::LinalgOp op) {
  auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation());
  return op.hasPureTensorSemantics() && allStatic(op) && allF32(op) &&
         (isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp, linalg::DepthwiseConv2DNhwcHwcOp,
              linalg::PoolingNhwcMaxOp, linalg::PoolingNhwcSumOp>(op) ||
          (mm && !mm.hasUserDefinedMaps()));
}

Fused fusable(linalg::LinalgOp op) {
  Fused f{};
  Value result = op->getResult(0);
  auto resultType = dyn_cast<RankedTensorType>(result.getType());
  if (!resultType) return f;
  if (auto init = op.getDpsInitOperand(0)->get().getDefiningOp<linalg::LinalgOp>();
      init && init->hasOneUse() && init.hasPureTensorSemantics() && allStatic(init) &&
      (isa<linalg::FillOp>(init) || isVectorizableElementwise(init)) && init->getResult(0).getType() == resultType)
    f.init = init;
  if (!result.hasOneUse()) return f;
  auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
  if (!user || !user.hasPureTensorSemantics() || !allStatic(user) || !isVectorizableElementwise(user) ||
      user->getNumResults() != 1 || user->getResult(0).getType() != resultType)
    return f;
  for (OpOperand *in : user.getDpsInputOperands())
    if (in->get() == result && !user.getMatchingIndexingMap(in).isIdentity()) return f;
  if (!user.getRegionOutputArgs()[0].use_empty()) return f;
  f.epilogue = user;
  return f;
}

bool canAccumulateApart(const Fused &f) {
  linalg::LinalgOp init = f.init;
  return f.epilogue && init && init.getNumDpsInits() == 1 &&
         init.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>();
}

void accumulateApart(linalg::LinalgOp init) {
  auto empty = init.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>();
  OpBuilder b(init);
  init.getDpsInitOperand(0)->set(b.clone(*empty)->getResult(0));
}

linalg::GenericOp inPlaceEpilogue(linalg::GenericOp epilogue, Value result) {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  SmallVector<unsigned> dropped;
  for (OpOperand *in : epilogue.getDpsInputOperands()) {
    if (in->get() == result) {
      dropped.push_back(in->getOperandNumber());
      continue;
    }
    inputs.push_back(in->get());
    maps.push_back(epilogue.getMatchingIndexingMap(in));
  }
  maps.push_back(epilogue.getMatchingIndexingMap(epilogue.getDpsInitOperand(0)));
  OpBuilder b(epilogue);
  auto updated = linalg::GenericOp::create(b, epilogue.getLoc(), epilogue->getResultTypes(), inputs,
                                           ValueRange{result}, maps, epilogue.getIteratorTypesArray());
  updated.getRegion().takeBody(epilogue.getRegion());
  Block &body = updated.getRegion().front();
  BlockArgument out = body.getArguments().back();
  for (unsigned i : llvm::reverse(dropped)) {
    body.getArgument(i).replaceAllUsesWith(out);
    body.eraseArgument(i);
  }
  epilogue->replaceAllUsesWith(updated);
  epilogue->erase();
  return updated;
}

bool inRegisters(linalg::LinalgOp op, const Fused &f, const RegisterTile &reg, int64_t reduction) {
  if ((!f.init && !f.epilogue) || reg.tail || reduction * reg.n * 4 > kRegisterFusedColumnBytes) return false;
  if (!isa<linalg::Conv2DNhwcHwcfOp>(op) && panelWidth(op) == 0) return false;
  return !computedOperands(op, f);
}

bool transcendentalEpilogue(const Fused &f) {
  if (!f.epilogue) return false;
  return f.epilogue
      ->walk([](Operation *op) {
        return isa<math::ExpOp, math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log1pOp, math::Log2Op, math::TanhOp,
                   math::ErfOp, math::PowFOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

bool computedOperands(linalg::LinalgOp op, const Fused &f) {
  auto computed = [](Value v) { return v.getDefiningOp<TilingInterface>() != nullptr; };
  for (Value v : op.getDpsInputs())
    if (computed(v)) return true;
  for (linalg::LinalgOp fusedOp : {f.init, linalg::LinalgOp(f.epilogue)})
    if (fusedOp)
      for (Value v : fusedOp.getDpsInputs())
        if (computed(v)) return true;
  return false;
}

int64_t panelWidth(linalg::LinalgOp op) {
  if (!isa<linalg::Conv2DNhwcFhwcOp>(op)) return 0;
  auto collapse = op.getDpsInputs()[1].getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse || collapse.getReassociationIndices() != SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}, {4}})
    return 0;
  auto grouped = collapse.getSrc().getDefiningOp<linalg::TransposeOp>();
  if (!grouped || grouped.getPermutation() != ArrayRef<int64_t>{0, 4, 1, 2, 3}) return 0;
  return cast<RankedTensorType>(grouped.getInput().getType()).getDimSize(4);
}

}  // namespace kiln::lowering::strategy
