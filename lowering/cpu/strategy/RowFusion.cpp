// Row-wise fusion: chains of ops that compute a row from rows (softmax,
// layer norm, RMS norm: row reductions and elementwise ops over the last
// dimension) tiled over blocks of rows, every op of the chain fused into
// the tile, so that a block's rows stay in L1 from the first pass to the
// last instead of each pass streaming the whole tensor (a layer norm in
// f64, as torch exports BERT's: five passes over 0.4-0.8 MB).
//
// Attention, softmax(Q Kᵀ) x V (what torch-mlir's and the ONNX route's
// multi-head attention become: batch_matmul, a scale, a mask, a row max,
// exp, a row sum, a normalization, batch_matmul), the same way with both
// matmuls in the tile: x V tiled over (batch x heads, blocks of query
// rows), Q Kᵀ and the softmax fused in. A tile computes its rows' scores
// against all keys, their softmax and their x V while the scores (rows x
// keys) stay in L1 — before, the scores of all heads went to memory
// between the passes and x V ran as another kernel. kiln-outline-clusters
// puts the two matmuls in one cluster.
//
// Inside the loops the ops keep their strategies (matmul register tiles,
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
#include "llvm/Support/FormatVariadic.h"

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

/// `ops` (linalg.reduce generalized first) without their unit loops before
/// the last `keep`, at least two loops left, and the reshapes between them
/// folded (torch-mlir's [1, heads, q, k] scores around a [heads, q, k]
/// batch_matmul, its [1, S, C] layer norms with row sums read back as
/// [1, S, 1]): the ops in the rank of the ops around them.
void dropUnitLoops(MLIRContext *ctx, llvm::ArrayRef<Operation *> ops, int64_t keep) {
  IRRewriter rewriter(ctx);
  llvm::DenseSet<Operation *> generics;
  for (Operation *o : ops) {
    if (auto r = dyn_cast<linalg::ReduceOp>(o)) {
      rewriter.setInsertionPoint(r);
      FailureOr<linalg::GenericOp> g = linalg::generalizeNamedOp(rewriter, cast<linalg::LinalgOp>(o));
      if (succeeded(g)) o = *g;
    }
    if (isa<linalg::GenericOp>(o)) generics.insert(o);
  }
  linalg::ControlDropUnitDims options;
  options.controlFn = [&generics, keep](Operation *op) -> SmallVector<unsigned> {
    auto g = dyn_cast<linalg::GenericOp>(op);
    if (!g || !generics.contains(op)) return {};
    SmallVector<int64_t> bounds = g.getStaticLoopRanges();
    int64_t L = int64_t(bounds.size()), dropped = 0;
    for (int64_t i = 0; i + keep < L; ++i) dropped += bounds[i] == 1;
    if (L - dropped < 2) return {};
    // The loops that are not unit are named too: none of them is dropped,
    // but the operands' unit dims read at 0 (a row max broadcast over the
    // row, [B, M, 1]) are, also where no loop goes.
    SmallVector<unsigned> dims;
    for (int64_t i = 0; i < L; ++i)
      if (bounds[i] != 1 || i + keep < L) dims.push_back(unsigned(i));
    return dims;
  };
  RewritePatternSet patterns(ctx);
  linalg::populateFoldUnitExtentDimsPatterns(patterns, options);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
  // (Inits: a reshaped fill is a fill of the reshaped empty tensor.)
  linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::populateFoldTensorEmptyPatterns(patterns);
  SmallVector<Operation *> worklist(generics.begin(), generics.end());
  // The reshapes between them and around them fold with the ones the
  // drops add.
  for (Operation *o : generics) {
    for (Value v : o->getOperands())
      if (Operation *d = v.getDefiningOp(); d && isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(d))
        worklist.push_back(d);
    for (Operation *u : o->getUsers())
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(u)) worklist.push_back(u);
  }
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  (void)applyOpPatternsGreedily(worklist, FrozenRewritePatternSet(std::move(patterns)), config);
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

/// `op` tiled by `sizes` (in an scf.forall where `parallel`, else an
/// scf.for), the ops of `fusable` it reads (transitively) fused into the
/// tiles; the loop, or null where tiling failed.
Operation *tileAndFuse(IRRewriter &rewriter, TilingInterface op, llvm::ArrayRef<int64_t> sizes, bool parallel,
                       const llvm::DenseSet<Operation *> &fusable, llvm::StringRef what) {
  MLIRContext *ctx = op->getContext();
  rewriter.setInsertionPoint(op);
  scf::SCFTilingOptions tiling;
  tiling.setLoopType(parallel ? scf::SCFTilingOptions::LoopType::ForallOp : scf::SCFTilingOptions::LoopType::ForOp);
  tiling.setTileSizes(getAsIndexOpFoldResult(ctx, sizes));
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
  FailureOr<scf::SCFTileAndFuseResult> tiled = scf::tileConsumerAndFuseProducersUsingSCF(rewriter, op, options);
  if (failed(tiled)) return nullptr;
  rewriter.replaceOp(op, tiled->replacements[op->getResult(0)]);
  // (Fusion leaves the slices of the originals it read, unused.)
  Operation *loop = tiled->loops.front().getOperation();
  SmallVector<tensor::ExtractSliceOp> slices;
  loop->walk([&](tensor::ExtractSliceOp s) {
    if (s->use_empty()) slices.push_back(s);
  });
  for (tensor::ExtractSliceOp s : slices) rewriter.eraseOp(s);
  // An op read twice in the chain (the exp read by both the row sum and
  // the normalization) was fused once for each read: the copies merge.
  DominanceInfo dom(loop);
  eliminateCommonSubExpressions(rewriter, dom, loop);
  loop->setAttr(kFusedRowsAttr, rewriter.getStringAttr(what));
  return loop;
}

/// Erases `ops` as they become unused (and the unused slices taken of
/// them).
void eraseDead(IRRewriter &rewriter, SmallVector<Operation *> dead) {
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

/// A chain of row-wise ops ending in `root`, an elementwise op: the ops
/// it reads through row-wise generics, last-axis reductions, fills and
/// reshapes between them, none of which is read outside the chain. It
/// stops at ops that read an anchor's result (a matmul's or conv's
/// epilogue, fused into the anchor's own tiles) and at values used
/// elsewhere too (a transformer's residual stream), which the tiles read
/// as they are.
struct RowChain {
  linalg::GenericOp root;
  llvm::SetVector<Operation *> ops;  // not the root
  bool reshapes = false, reduces = false;
};

/// Whether `op` is an anchor the strategies fuse epilogues into, or an op
/// that no row-wise chain computes.
bool chainable(Operation *op) {
  auto g = dyn_cast<linalg::GenericOp>(op);
  auto r = dyn_cast<linalg::ReduceOp>(op);
  if (!(g && rowWiseGeneric(g) && g.getNumDpsInits() == 1) && !(r && rowWiseReduce(r) && r.getNumDpsInits() == 1) &&
      !isa<linalg::FillOp>(op))
    return false;
  if (auto l = dyn_cast<linalg::LinalgOp>(op); !allStatic(l)) return false;
  // Floats (and masks) only: a gather's index arithmetic has row sums too,
  // over rows of two indices.
  for (Type t : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto s = dyn_cast<ShapedType>(t); s && !isa<FloatType>(s.getElementType()) &&
                                           !s.getElementType().isInteger(1))
      return false;
  // An anchor's epilogue stays the anchor's.
  for (Value v : op->getOperands())
    if (auto d = v.getDefiningOp<linalg::LinalgOp>(); d && !isa<linalg::GenericOp, linalg::ReduceOp, linalg::FillOp>(d))
      return false;
  return true;
}

std::optional<RowChain> findRowChain(linalg::GenericOp root) {
  if (!chainable(root) || root.getNumReductionLoops() != 0 || root.getNumLoops() < 2) return std::nullopt;
  RowChain c;
  c.root = root;
  SmallVector<Value> work(root->getOperands());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *d = v.getDefiningOp();
    if (!d || c.ops.contains(d)) continue;
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(d)) {
      Operation *src = d->getOperand(0).getDefiningOp();
      if (!src || !chainable(src)) continue;  // a view of an input of the chain
    } else if (!chainable(d)) {
      continue;
    }
    c.ops.insert(d);
    for (Value o : d->getOperands()) work.push_back(o);
  }
  // Values read outside the chain are computed outside it.
  for (bool pruned = true; pruned;) {
    pruned = false;
    for (Operation *o : SmallVector<Operation *>(c.ops.begin(), c.ops.end()))
      if (llvm::any_of(o->getUsers(), [&](Operation *u) { return u != root && !c.ops.contains(u); })) {
        c.ops.remove(o);
        pruned = true;
      }
  }
  for (Operation *o : c.ops) {
    c.reshapes |= isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(o);
    if (auto l = dyn_cast<linalg::LinalgOp>(o)) c.reduces |= l.getNumReductionLoops() > 0;
  }
  if (!c.reduces) return std::nullopt;
  return c;
}

/// Most rows of a row chain's tile: those whose widest intermediate
/// (rows x N elements of `bytes`) fills half of L1.
int64_t chainRowLimit(int64_t N, int64_t bytes, const CpuTuning &tuning) {
  return std::max<int64_t>(1, tuning.l1Bytes / 2 / (N * bytes));
}

}  // namespace

void fuseAttention(ModuleOp module, const CpuTuning &tuning) {
  // (Only x V matmuls: fusing one erases its Q Kᵀ, which must not be in the
  // list. Each chain is found again when its turn comes: the fusions before
  // it rewrite the IR.)
  SmallVector<linalg::BatchMatmulOp> outs;
  module.walk([&](linalg::BatchMatmulOp op) {
    if (findChain(op)) outs.push_back(op);
  });
  for (linalg::BatchMatmulOp out : outs) {
    std::optional<Chain> c = findChain(out);
    if (!c) continue;
    if (c->reshapes) {
      // (Batch, rows, keys: the loops before them are the batch's too.)
      dropUnitLoops(module.getContext(), SmallVector<Operation *>(c->ops.begin(), c->ops.end()), /*keep=*/3);
      c = findChain(out);
      if (!c || c->reshapes) continue;
    }
    auto shape = cast<RankedTensorType>(c->scores->getResult(0).getType()).getShape();
    int64_t B = shape[0], M = shape[1], N = shape[2];
    int64_t D = cast<RankedTensorType>(out->getResult(0).getType()).getDimSize(2);
    int64_t r = rowBlock(B, M, N, D, tuning);
    if (B * llvm::divideCeil(M, r) < 2) continue;  // one tile: nothing to gain over the two ops
    llvm::DenseSet<Operation *> fusable(c->ops.begin(), c->ops.end());
    fusable.insert(c->scores);
    for (Value init : {c->scores.getDpsInits()[0], out.getDpsInits()[0]})
      if (auto f = init.getDefiningOp<linalg::FillOp>()) fusable.insert(f);
    IRRewriter rewriter(module.getContext());
    int64_t whole = M - M % r;
    if (whole == M) {
      std::string what = llvm::formatv("attention in blocks of {0} query rows", r).str();
      if (!tileAndFuse(rewriter, cast<TilingInterface>(out.getOperation()), {1, r, 0, 0}, true, fusable, what))
        continue;
    } else {
      // Rows no tile divides (ViT's 197 tokens): the whole tiles' rows and
      // the rest as two parts of x V, each tiled (the rest in one tile per
      // batch), written into the result.
      rewriter.setInsertionPoint(out);
      Location loc = out.getLoc();
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
      std::string what = llvm::formatv("attention in blocks of {0} query rows", r).str();
      std::string rest = llvm::formatv("attention's last {0} query rows", M - whole).str();
      if (!tileAndFuse(rewriter, cast<TilingInterface>(head.getOperation()), {1, r, 0, 0}, true, fusable, what) ||
          !tileAndFuse(rewriter, cast<TilingInterface>(tail.getOperation()), {1, M - whole, 0, 0}, true, fusable,
                       rest))
        continue;
    }
    // The untiled chain is dead now.
    SmallVector<Operation *> dead(c->ops.begin(), c->ops.end());
    dead.push_back(c->scores);
    if (Operation *d = c->scores.getDpsInits()[0].getDefiningOp()) dead.push_back(d);
    eraseDead(rewriter, dead);
  }
}

void fuseRowChains(ModuleOp module, const CpuTuning &tuning) {
  auto roots = [&] {
    SmallVector<linalg::GenericOp> out;
    module.walk([&](linalg::GenericOp g) {
      // (Not the softmax inside attention's loop: its rows are blocked already.)
      for (Operation *p = g->getParentOp(); p; p = p->getParentOp())
        if (p->hasAttr(kFusedRowsAttr)) return;
      if (g.hasPureTensorSemantics()) out.push_back(g);
    });
    std::reverse(out.begin(), out.end());  // consumers first: a chain's last op is its root
    return out;
  };
  // Chains through reshapes (torch's [1, S, C] layer norms, their row sums
  // read back as [1, S, 1]) lose their unit loops before the last first.
  llvm::DenseSet<Operation *> targets;
  llvm::DenseSet<Operation *> seen;
  for (linalg::GenericOp root : roots()) {
    if (seen.contains(root)) continue;
    std::optional<RowChain> c = findRowChain(root);
    if (!c) continue;
    for (Operation *o : c->ops) seen.insert(o);
    if (!c->reshapes) continue;
    targets.insert(root);
    for (Operation *o : c->ops)
      if (isa<linalg::LinalgOp>(o)) targets.insert(o);
  }
  if (!targets.empty())
    dropUnitLoops(module.getContext(), SmallVector<Operation *>(targets.begin(), targets.end()), /*keep=*/1);
  seen.clear();
  IRRewriter rewriter(module.getContext());
  for (linalg::GenericOp root : roots()) {
    if (seen.contains(root)) continue;
    std::optional<RowChain> c = findRowChain(root);
    if (!c || c->reshapes) continue;
    for (Operation *o : c->ops) seen.insert(o);
    SmallVector<int64_t> bounds = root.getStaticLoopRanges();
    int64_t L = int64_t(bounds.size()), N = bounds.back(), M = bounds[L - 2];
    int64_t others = 1;
    for (int64_t i = 0; i + 2 < L; ++i) others *= bounds[i];
    if (others * M < 2) continue;
    // The widest element of the chain (f64 where torch computes a norm's
    // variance in double).
    int64_t bytes = 4;
    SmallVector<Operation *> all(c->ops.begin(), c->ops.end());
    all.push_back(root);
    for (Operation *o : all)
      for (Type t : o->getResultTypes())
        if (auto s = dyn_cast<ShapedType>(t)) bytes = std::max<int64_t>(bytes, llvm::divideCeil(s.getElementTypeBitWidth(), 8));
    int64_t limit = chainRowLimit(N, bytes, tuning), r = blockOf(M, 1, std::min(M, limit));
    // Rows that no block near the limit divides (a prime count: blocks of
    // one row, a task each) go in whole where other loops give the tiles
    // (a [heads, 197, 197] softmax: one block per head, in L2), else the
    // chain stays as it is.
    if (r < 8 && r * 2 <= std::min(M, limit)) {
      if (others < 2) continue;
      r = M;
    }
    SmallVector<int64_t> sizes(L, 1);
    sizes[L - 2] = r;
    sizes[L - 1] = 0;
    // Threads where the chain moves enough memory to pay for them.
    auto type = cast<ShapedType>(root->getResult(0).getType());
    bool parallel = !insideParallelLoop(root) && others * (M / r) > 1 &&
                    type.getNumElements() * bytes * 2 >= kParallelMinBytes / 2;
    llvm::DenseSet<Operation *> fusable(c->ops.begin(), c->ops.end());
    std::string what = llvm::formatv("row chain in blocks of {0} rows{1}", r, parallel ? ", in parallel" : "").str();
    if (!tileAndFuse(rewriter, cast<TilingInterface>(root.getOperation()), sizes, parallel, fusable, what)) continue;
    eraseDead(rewriter, SmallVector<Operation *>(c->ops.begin(), c->ops.end()));
  }
}

}  // namespace kiln::lowering::strategy
