// Attention as one loop: softmax(Q Kᵀ) x V (what torch-mlir's and the ONNX
// route's multi-head attention become: batch_matmul, a scale, a mask, a
// row max, exp, a row sum, a normalization, batch_matmul) tiled over
// (batch x heads, blocks of query rows) with everything between the two
// matmuls and the first matmul fused into each tile. A tile computes its
// rows' scores against all keys, their softmax and their x V while the
// scores (rows x keys) stay in L1 — before, the scores of all heads went
// to memory between the passes (QKᵀ, then max, exp, sum and the
// normalization as passes of their own, then x V in another kernel).
// kiln-outline-clusters puts the two matmuls in one cluster.
//
// Inside the loop the ops keep their strategies (matmul register tiles,
// row reductions in vectors, elementwise ops in vectors), on one thread
// each: the loop is the parallel one.
#include "lowering/cpu/strategy/Rewrites.h"
#include "lowering/cpu/strategy/Support.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/SetVector.h"

namespace kiln::lowering::strategy {
namespace {

/// The ops between attention's two matmuls.
struct Chain {
  linalg::BatchMatmulOp scores;  // Q Kᵀ
  linalg::BatchMatmulOp out;     // P V
  llvm::SetVector<Operation *> ops;  // between them (and their inits), not the matmuls
  bool reshapes = false;             // some of them are tensor reshapes
};

bool plainBatchMatmul(linalg::BatchMatmulOp op) {
  return op && op.hasPureTensorSemantics() && !op.hasUserDefinedMaps() && allStatic(op) && allF32(op);
}

/// Whether a generic reduces at most its last loop, reading and writing
/// through projected permutations (row-wise: a block of rows needs only
/// its own rows).
bool rowWiseGeneric(linalg::GenericOp g) {
  auto iters = g.getIteratorTypesArray();
  for (size_t i = 0; i + 1 < iters.size(); ++i)
    if (iters[i] != utils::IteratorType::parallel) return false;
  return llvm::all_of(g.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isProjectedPermutation(/*allowZeroInResults=*/true); });
}

bool rowWiseReduce(linalg::ReduceOp r) {
  auto t = dyn_cast<RankedTensorType>(r.getInputs()[0].getType());
  return t && r.getDimensions().size() == 1 && r.getDimensions()[0] == t.getRank() - 1;
}

/// The chain from `out`'s left operand back to a batch_matmul; none when
/// something else stands in it or a value of it is used outside it.
std::optional<Chain> findChain(linalg::BatchMatmulOp out) {
  if (!plainBatchMatmul(out)) return std::nullopt;
  Chain c;
  c.out = out;
  SmallVector<Value> work = {out.getDpsInputs()[0]};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *d = v.getDefiningOp();
    if (!d || isa<arith::ConstantOp, tensor::EmptyOp>(d)) continue;
    if (auto mm = dyn_cast<linalg::BatchMatmulOp>(d)) {
      if ((c.scores && c.scores != mm) || !plainBatchMatmul(mm)) return std::nullopt;
      c.scores = mm;
      continue;
    }
    if (c.ops.contains(d)) continue;
    auto g = dyn_cast<linalg::GenericOp>(d);
    auto r = dyn_cast<linalg::ReduceOp>(d);
    bool ok = (g && rowWiseGeneric(g)) || (r && rowWiseReduce(r)) || isa<linalg::FillOp>(d);
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(d)) {
      // (A view of an input, e.g. the mask, is read as it is.)
      Operation *src = d->getOperand(0).getDefiningOp();
      if (!src || !isa<linalg::LinalgOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(src)) continue;
      ok = c.reshapes = true;
    }
    if (!ok || d->getNumRegions() > 1) return std::nullopt;
    if (auto l = dyn_cast<linalg::LinalgOp>(d); l && !allStatic(l)) return std::nullopt;
    c.ops.insert(d);
    for (Value o : d->getOperands()) work.push_back(o);
  }
  if (!c.scores) return std::nullopt;
  // Nothing outside needs a value of the chain (it is computed in tiles
  // only), and the scores feed the chain alone.
  auto inside = [&](Operation *user) { return c.ops.contains(user) || user == out.getOperation(); };
  for (Operation *o : c.ops)
    if (!llvm::all_of(o->getUsers(), inside)) return std::nullopt;
  if (!llvm::all_of(c.scores->getUsers(), inside)) return std::nullopt;
  // Rows of the scores are rows of the left operand of x V.
  auto s = cast<RankedTensorType>(c.scores->getResult(0).getType());
  auto p = cast<RankedTensorType>(out.getDpsInputs()[0].getType());
  if (s.getShape() != p.getShape()) return std::nullopt;
  return c;
}

/// The chain's generics (linalg.reduce generalized first) without the
/// unit loops in front of the last three (torch-mlir's [1, heads, q, k]
/// scores around a [heads, q, k] batch_matmul), and the reshapes between
/// them folded: the chain in the batch_matmuls' own rank.
void dropLeadingUnitLoops(Chain &c) {
  MLIRContext *ctx = c.out->getContext();
  IRRewriter rewriter(ctx);
  llvm::DenseSet<Operation *> targets;
  for (Operation *o : c.ops.takeVector()) {
    if (auto r = dyn_cast<linalg::ReduceOp>(o)) {
      rewriter.setInsertionPoint(r);
      FailureOr<linalg::GenericOp> g = linalg::generalizeNamedOp(rewriter, cast<linalg::LinalgOp>(o));
      if (succeeded(g)) o = *g;
    }
    targets.insert(o);
  }
  linalg::ControlDropUnitDims options;
  options.controlFn = [&targets](Operation *op) -> SmallVector<unsigned> {
    auto g = dyn_cast<linalg::GenericOp>(op);
    if (!g || !targets.contains(op)) return {};
    SmallVector<unsigned> dims;
    SmallVector<int64_t> bounds = g.getStaticLoopRanges();
    // (Batch, rows, keys: the loops before them are the batch's too.) The
    // loops that are not unit are named too: none of them is dropped, but
    // the operands' unit dims read at 0 (a row max broadcast over the
    // keys, [B, M, 1]) are, also where no loop goes.
    for (int64_t i = 0; i < int64_t(bounds.size()); ++i)
      if (bounds[i] != 1 || i + 3 < int64_t(bounds.size())) dims.push_back(unsigned(i));
    return dims;
  };
  RewritePatternSet patterns(ctx);
  linalg::populateFoldUnitExtentDimsPatterns(patterns, options);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
  // (Inits: a reshaped fill is a fill of the reshaped empty tensor.)
  linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::populateFoldTensorEmptyPatterns(patterns);
  SmallVector<Operation *> ops(targets.begin(), targets.end());
  // The reshapes around the chain's ends fold with the ones the drops add.
  for (Operation *o : targets)
    for (Value v : o->getOperands())
      if (Operation *d = v.getDefiningOp(); d && isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(d))
        ops.push_back(d);
  for (Operation *u : c.scores->getUsers()) ops.push_back(u);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  (void)applyOpPatternsGreedily(ops, FrozenRewritePatternSet(std::move(patterns)), config);
}

/// Rows of a tile: the most whose scores (rows x N keys) fill at most two
/// thirds of L1 — all rows where they fit; else a divisor of the rows
/// where one of at least 8 does, else a multiple of the register tile's
/// rows (the rows past the last whole tile are a tile of their own) — with
/// enough tiles for the threads where the rows allow.
int64_t rowBlock(int64_t B, int64_t M, int64_t N, int64_t D, const CpuTuning &tuning) {
  int64_t limit = std::max<int64_t>(8, tuning.l1Bytes * 2 / 3 / (N * 4));
  int64_t r = M <= limit ? M : blockOf(M, 1, limit);
  if (r < 8 && M > limit) {
    // (840 rows: every tile height up to 8 divides them.)
    int64_t mr = chooseRegisterTile(840, D, tuning).m;
    return std::max<int64_t>(mr, limit / mr * mr);
  }
  while (B * (M / r) < kParallelTasks && r > 8) {
    int64_t smaller = blockOf(M, 1, r - 1);
    if (smaller < 8) break;
    r = smaller;
  }
  return r;
}

/// `out` (rows of its batch_matmul) tiled by [1, rows], the chain fused
/// into the tiles; the loop, or null where tiling failed.
Operation *tileAndFuse(IRRewriter &rewriter, linalg::BatchMatmulOp out, int64_t rows,
                       const llvm::DenseSet<Operation *> &fusable) {
  MLIRContext *ctx = out->getContext();
  rewriter.setInsertionPoint(out);
  scf::SCFTilingOptions tiling;
  tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
  tiling.setTileSizes(getAsIndexOpFoldResult(ctx, {1, rows, 0, 0}));
  scf::SCFTileAndFuseOptions options;
  options.setTilingOptions(tiling);
  options.setFusionControlFn([&fusable](tensor::ExtractSliceOp, OpResult producer, bool)
                                 -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
    if (!fusable.contains(producer.getOwner())) return std::nullopt;
    return scf::SCFTileAndFuseOptions::ControlFnResult{};
  });
  // (A part of the rows reads a slice of the chain: a tile's slice of it
  // is then one slice of the chain's result, which fuses.)
  RewritePatternSet cleanup(ctx);
  tensor::populateMergeConsecutiveInsertExtractSlicePatterns(cleanup);
  options.cleanupPatterns = FrozenRewritePatternSet(std::move(cleanup));
  FailureOr<scf::SCFTileAndFuseResult> tiled =
      scf::tileConsumerAndFuseProducersUsingSCF(rewriter, cast<TilingInterface>(out.getOperation()), options);
  if (failed(tiled)) return nullptr;
  rewriter.replaceOp(out, tiled->replacements[out->getResult(0)]);
  // (Fusion leaves the slices of the originals it read, unused.)
  Operation *loop = tiled->loops.front().getOperation();
  SmallVector<tensor::ExtractSliceOp> slices;
  loop->walk([&](tensor::ExtractSliceOp s) {
    if (s->use_empty()) slices.push_back(s);
  });
  for (tensor::ExtractSliceOp s : slices) rewriter.eraseOp(s);
  // The exp read by both the row sum and the normalization was fused once
  // for each: the copies merge.
  DominanceInfo dom(loop);
  eliminateCommonSubExpressions(rewriter, dom, loop);
  return loop;
}

}  // namespace

void fuseAttention(ModuleOp module, const CpuTuning &tuning) {
  SmallVector<linalg::BatchMatmulOp> outs;
  module.walk([&](linalg::BatchMatmulOp op) {
    if (std::optional<Chain> c = findChain(op)) outs.push_back(op);
  });
  for (linalg::BatchMatmulOp out : outs) {
    std::optional<Chain> c = findChain(out);
    if (!c) continue;
    if (c->reshapes) {
      dropLeadingUnitLoops(*c);
      c = findChain(out);
      if (!c || c->reshapes) continue;
    }
    auto shape = cast<RankedTensorType>(c->scores->getResult(0).getType()).getShape();
    int64_t B = shape[0], M = shape[1], N = shape[2];
    int64_t r = rowBlock(B, M, N, cast<RankedTensorType>(out->getResult(0).getType()).getDimSize(2), tuning);
    if (B * llvm::divideCeil(M, r) < 2) continue;  // one tile: nothing to gain over the two ops
    llvm::DenseSet<Operation *> fusable(c->ops.begin(), c->ops.end());
    fusable.insert(c->scores);
    for (Value init : {c->scores.getDpsInits()[0], out.getDpsInits()[0]})
      if (auto f = init.getDefiningOp<linalg::FillOp>()) fusable.insert(f);
    IRRewriter rewriter(module.getContext());
    int64_t whole = M - M % r;
    if (whole == M) {
      if (!tileAndFuse(rewriter, out, r, fusable)) continue;
    } else {
      // Rows no tile divides (ViT's 197 tokens): the whole tiles' rows and
      // the rest as two parts of x V, each tiled (the rest in one tile per
      // batch), written into the result.
      rewriter.setInsertionPoint(out);
      Location loc = out.getLoc();
      int64_t D = cast<RankedTensorType>(out->getResult(0).getType()).getDimSize(2);
      auto tiling = cast<TilingInterface>(out.getOperation());
      SmallVector<OpFoldResult> zero = getAsIndexOpFoldResult(module.getContext(), {0, 0, 0, 0});
      SmallVector<OpFoldResult> fullSizes = getAsIndexOpFoldResult(module.getContext(), {B, M, D, N});
      auto part = [&](int64_t row, int64_t rows) -> linalg::BatchMatmulOp {
        SmallVector<OpFoldResult> offsets = zero, sizes = fullSizes;
        offsets[1] = rewriter.getIndexAttr(row);
        sizes[1] = rewriter.getIndexAttr(rows);
        FailureOr<TilingResult> t = tiling.getTiledImplementation(rewriter, offsets, sizes);
        if (failed(t) || t->tiledOps.size() != 1) return nullptr;
        return dyn_cast<linalg::BatchMatmulOp>(t->tiledOps.front());
      };
      linalg::BatchMatmulOp head = part(0, whole), tail = part(whole, M - whole);
      if (!head || !tail) continue;
      Value result = out.getDpsInits()[0];
      SmallVector<OpFoldResult> ones = getAsIndexOpFoldResult(module.getContext(), {1, 1, 1});
      for (auto [p, row, rows] : {std::tuple{head, int64_t(0), whole}, std::tuple{tail, whole, M - whole}})
        result = tensor::InsertSliceOp::create(rewriter, loc, p->getResult(0), result,
                                               getAsIndexOpFoldResult(module.getContext(), {0, row, 0}),
                                               getAsIndexOpFoldResult(module.getContext(), {B, rows, D}), ones);
      rewriter.replaceOp(out, result);
      if (!tileAndFuse(rewriter, head, r, fusable) || !tileAndFuse(rewriter, tail, M - whole, fusable)) continue;
    }
    // The untiled chain is dead now (but for the unused slices the parts
    // took of it).
    SmallVector<Operation *> dead(c->ops.begin(), c->ops.end());
    dead.push_back(c->scores);
    if (Operation *d = c->scores.getDpsInits()[0].getDefiningOp()) dead.push_back(d);
    SmallVector<Operation *> slices;
    for (Operation *o : dead)
      for (Operation *u : o->getUsers())
        if (isa<tensor::ExtractSliceOp>(u) && u->use_empty()) slices.push_back(u);
    for (Operation *u : slices) rewriter.eraseOp(u);
    for (bool erased = true; erased;) {
      erased = false;
      for (Operation *&o : dead)
        if (o && o->use_empty()) {
          rewriter.eraseOp(o);
          o = nullptr;
          erased = true;
        }
    }
  }
}

}  // namespace kiln::lowering::strategy
