//===- FuseElementwise.cpp - bounded elementwise fusion on linalg ----------===//
//
// kiln-fuse-elementwise: fuses elementwise linalg.generic producers into
// their consumers (MLIR's elementwise fusion patterns, reshape folding and
// canonicalization, as linalg-fuse-elementwise-ops does), but only while the
// fused body stays within `max-body-ops` operations, and never folding a
// reshape into a named op or a reduction (a matmul must stay a matmul). Unbounded fusion of a
// long chain rebuilds an ever-growing body at every step (quadratic compile
// time: a 4,000-op chain took seconds); bounded, compile time is linear and
// each fused kernel stays a reasonable loop body.
//
//===----------------------------------------------------------------------===//
#include "lowering/pipelines/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "lowering/pipelines/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

size_t bodyOps(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic ? generic.getBody()->getOperations().size() : 0;
}

struct FuseElementwise : impl::KilnFuseElementwiseBase<FuseElementwise> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    int64_t limit = maxBodyOps;
    linalg::ControlFusionFn control = [limit](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      if (!producer || !producer->hasOneUse()) return false;
      return int64_t(bodyOps(producer) + bodyOps(fused->getOwner())) <= limit;
    };
    // Reshapes fold into elementwise generics only: folded into a matmul or
    // a convolution they would turn it into a higher-rank generic
    // contraction that no strategy recognizes (torch-mlir's linalg BERT ran
    // its matmuls as scalar loops).
    auto isKernelOp = [](Operation *op) {
      auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
      return linalgOp && (!isa<linalg::GenericOp>(op) || linalgOp.getNumReductionLoops() > 0);
    };
    linalg::ControlFusionFn reshapeControl = [control, isKernelOp](OpOperand *fused) {
      if (isKernelOp(fused->getOwner()) || isKernelOp(fused->get().getDefiningOp())) return false;
      return control(fused);
    };
    RewritePatternSet patterns(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, reshapeControl);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, control);
    GreedyRewriteConfig config;
    config.setUseTopDownTraversal(true);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config))) {
      // Not converging within the driver's bound is not an error: the IR is valid.
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
