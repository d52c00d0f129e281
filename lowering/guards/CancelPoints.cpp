//===- CancelPoints.cpp - loops of unknown length can be stopped ----------===//
//
// kiln-cancel-points: a tosa.while_loop may never end (its condition never
// turns false). Each scf.while's condition becomes
//   cond && kiln_cancel_requested() == 0
// so the loop leaves at the next iteration once the call's cancellation
// token is cancelled or its deadline passes; the runtime (jit's host
// launcher) then reports the step as cancelled instead of returning the
// loop's partial values. Loops with static trip counts (all of linalg's)
// need no check: they end.
//
//===----------------------------------------------------------------------===//
#include "lowering/guards/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNCANCELPOINTS
#include "lowering/guards/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

struct CancelPoints : impl::KilnCancelPointsBase<CancelPoints> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<scf::ConditionOp> conditions;
    module.walk([&](scf::WhileOp loop) { conditions.push_back(loop.getConditionOp()); });
    if (conditions.empty()) return;
    OpBuilder b(module.getBodyRegion());
    auto i64 = b.getI64Type();
    if (!module.lookupSymbol<func::FuncOp>(kCancelSymbol)) {
      b.setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(b, module.getLoc(), kCancelSymbol, b.getFunctionType({}, {i64}));
      decl.setPrivate();
    }
    for (scf::ConditionOp cond : conditions) {
      b.setInsertionPoint(cond);
      Location loc = cond.getLoc();
      Value requested = func::CallOp::create(b, loc, kCancelSymbol, TypeRange{i64}, ValueRange{}).getResult(0);
      Value zero = arith::ConstantIntOp::create(b, loc, i64, 0);
      Value goOn = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, requested, zero);
      Value next = arith::AndIOp::create(b, loc, cond.getCondition(), goOn);
      cond.getConditionMutable().assign(next);
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
