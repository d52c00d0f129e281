//===- GpuTileParallel.cpp - parallel loops shaped for GPU threads --------===//
//
// kiln-gpu-tile-parallel (memrefs, after convert-linalg-to-parallel-loops):
// every outermost scf.parallel with static bounds becomes one flat loop
// (collapseParallelLoops: the innermost dimension varies fastest, so the 32
// threads of a warp touch consecutive elements) tiled by `block-size` with
// an in-bounds check (tileParallelLoop without min/max bounds): the outer
// loop runs over thread blocks, the inner one over a block's threads.
// gpu-map-parallel-loops then maps them to block_x and thread_x. A loop of
// fewer iterations than a block gets one block of exactly that many threads.
//
//===----------------------------------------------------------------------===//
#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNGPUTILEPARALLEL
#include "lowering/gpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Iterations of `op` when its bounds and steps are constants.
std::optional<int64_t> staticTripCount(scf::ParallelOp op) {
  int64_t total = 1;
  for (auto [lb, ub, step] : llvm::zip(op.getLowerBound(), op.getUpperBound(), op.getStep())) {
    APInt l, u, s;
    if (!matchPattern(lb, m_ConstantInt(&l)) || !matchPattern(ub, m_ConstantInt(&u)) ||
        !matchPattern(step, m_ConstantInt(&s)) || s.getSExtValue() <= 0)
      return std::nullopt;
    int64_t n = llvm::divideCeil(std::max<int64_t>(0, u.getSExtValue() - l.getSExtValue()), s.getSExtValue());
    if (__builtin_mul_overflow(total, n, &total)) return std::nullopt;
  }
  return total;
}

struct GpuTileParallel : impl::KilnGpuTileParallelBase<GpuTileParallel> {
  using Base::Base;
  void runOnOperation() override {
    if (blockSize <= 0 || blockSize > 1024) {
      getOperation().emitError("kiln-gpu-tile-parallel: block-size must be in 1..1024, not ") << blockSize;
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp op) {
      if (!op->getParentOfType<scf::ParallelOp>()) loops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp op : loops) {
      std::optional<int64_t> n = staticTripCount(op);
      if (!n || *n == 0) continue;
      if (op.getNumLoops() > 1) {
        std::vector<unsigned> all(op.getNumLoops());
        std::iota(all.begin(), all.end(), 0u);
        rewriter.setInsertionPoint(op);
        // collapseParallelLoops replaces `op`; find the loop it made.
        Operation *before = op->getPrevNode();
        Block *block = op->getBlock();
        mlir::collapseParallelLoops(rewriter, op, {all});
        Operation *made = before ? before->getNextNode() : &block->front();
        while (made && !isa<scf::ParallelOp>(made)) made = made->getNextNode();
        if (!made) {
          getOperation().emitError("kiln-gpu-tile-parallel: collapsing a parallel loop failed");
          return signalPassFailure();
        }
        op = cast<scf::ParallelOp>(made);
      }
      int64_t tile = std::min<int64_t>(blockSize, *n);
      // Fixed bounds with an in-bounds check: gpu-map-parallel-loops needs
      // the inner loop's bounds constant.
      scf::tileParallelLoop(op, {tile}, /*noMinMaxBounds=*/true);
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
