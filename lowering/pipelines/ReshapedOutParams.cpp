//===- ReshapedOutParams.cpp - results computed in their out-params ------===//
//
// kiln-reshaped-out-params: buffer-results-to-out-params{hoist-static-allocs}
// computes a returned allocation directly in the caller's out-param, but a
// result returned through a reshape (a 2-D matmul with its epilogue whose
// function returns 1 x M x N) is computed into a temporary and copied:
//
//   %a = memref.alloc() : memref<128x3072xf32>       ... computes into %a
//   %e = memref.expand_shape %a [[0, 1], [2]] ...
//   memref.copy %e, %out : memref<1x128x3072xf32> to memref<1x128x3072xf32>
//
// When %out is used by nothing else and %a has the identity layout, %a
// becomes `memref.collapse_shape %out` (the inverse reshape) and the copy
// goes.
//
//===----------------------------------------------------------------------===//
#include "lowering/pipelines/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNRESHAPEDOUTPARAMS
#include "lowering/pipelines/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

struct ReshapedOutParams : impl::KilnReshapedOutParamsBase<ReshapedOutParams> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal()) return;
    Block &entry = fn.getBody().front();
    SmallVector<memref::CopyOp> copies;
    for (Operation &op : entry)
      if (auto copy = dyn_cast<memref::CopyOp>(op)) copies.push_back(copy);
    for (memref::CopyOp copy : copies) {
      auto out = dyn_cast<BlockArgument>(copy.getTarget());
      if (!out || out.getOwner() != &entry || !out.hasOneUse()) continue;
      Operation *reshape = copy.getSource().getDefiningOp();
      if (!reshape || !isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(reshape) || !reshape->hasOneUse())
        continue;
      auto alloc = reshape->getOperand(0).getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != &entry || !alloc.getType().getLayout().isIdentity() ||
          !alloc.getType().hasStaticShape() || !alloc.getDynamicSizes().empty())
        continue;
      OpBuilder b(alloc);
      Value view;
      if (auto expand = dyn_cast<memref::ExpandShapeOp>(reshape)) {
        // The out-param is contiguous (identity layout): its collapse is too.
        auto collapsed = memref::CollapseShapeOp::create(b, alloc.getLoc(), out, expand.getReassociationIndices());
        view = collapsed.getResult();
      } else {
        auto collapse = cast<memref::CollapseShapeOp>(reshape);
        view = memref::ExpandShapeOp::create(b, alloc.getLoc(), alloc.getType().getShape(), out,
                                             collapse.getReassociationIndices())
                   .getResult();
      }
      if (view.getType() != alloc.getType()) {
        view.getDefiningOp()->erase();
        continue;
      }
      copy->erase();
      reshape->erase();
      alloc.getResult().replaceAllUsesWith(view);
      alloc->erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
