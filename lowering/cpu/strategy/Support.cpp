// Blocking and op classes of kiln-cpu-strategy (see Support.h).
#include "lowering/cpu/strategy/Support.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln::lowering::strategy {

/// Largest multiple of `unit` that divides `dim` and is at most `limit`
/// (at least `unit`; `unit` must divide `dim`).
int64_t blockOf(int64_t dim, int64_t unit, int64_t limit) {
  int64_t best = unit;
  for (int64_t b = unit; b <= std::min(dim, limit); b += unit)
    if (dim % b == 0) best = b;
  return best;
}

/// The block of output rows (a divisor of `rows`) that gives at least
/// kParallelTasks parallel tiles, with `otherTiles` tiles per row block
/// from the other parallel dimensions; `rows` when there is one row.
int64_t rowBlockForThreads(int64_t rows, int64_t otherTiles) {
  int64_t block = rows;
  while (otherTiles * (rows / block) < kParallelTasks && block > 1) block = blockOf(rows, 1, block - 1);
  return block;
}

MatmulBlocks matmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning, bool columnBlocks,
                          bool oneThread) {
  MatmulBlocks p;
  p.rt = chooseRegisterTile(M, N, tuning);
  // K blocks whose rows of one register tile's columns of B (kc x
  // rt.n) fit L1, so that every row tile of the block reads them from
  // there (AVX-512's 64 columns: 128 rows, not 256).
  int64_t kcMax = std::min<int64_t>(256, std::max<int64_t>(64, tuning.l1Bytes / (p.rt.n * 4)));
  p.kc = blockOf(K, 1, kcMax);
  // A reduction that nothing near kcMax divides (attention's x V over 197
  // keys: blocks of 1) in one block where that is at most twice kcMax.
  if (p.kc * 4 < kcMax && K <= 2 * kcMax) p.kc = K;
  p.nc = columnBlocks ? blockOf(N, p.rt.n, 256) : N;
  // Row blocks: every row at once when a k block of A for all of them
  // fits in half of L2, so that each block of B (a weight, streamed
  // from memory) is read once per call, not once per row block (two
  // row blocks of BERT's 128 rows made its FFN matmul ~10% slower).
  p.mc = M * p.kc * 4 <= tuning.l2Bytes / 2 ? M : blockOf(M, p.rt.m, 64);
  // (Or a weight of at least kParallelMinBytes read by few rows: a
  // classifier's vector times its 4 MB weight is memory-bound, and two
  // cores read memory at twice one's rate.)
  p.parallel = !oneThread && (2.0 * B * M * N * K >= parallelMinFlops(tuning) || B * K * N * 4 >= kParallelMinBytes);
  if (p.parallel) {
    // Enough blocks for the threads to share: smaller column blocks
    // (B still read once), then smaller row blocks.
    auto tasks = [&] { return B * (M / p.mc) * (N / p.nc); };
    while (columnBlocks && tasks() < kParallelTasks && p.nc > p.rt.n) p.nc = blockOf(N, p.rt.n, p.nc - 1);
    while (tasks() < kParallelTasks && p.mc > p.rt.m) p.mc = blockOf(M, p.rt.m, p.mc - 1);
    p.parallel = tasks() > 1;
  }
  // The register tile within an mc x nc block: rows split off where a
  // tile that does not divide mc fits the registers better.
  p.rb = chooseRegisterTile(p.mc, p.nc, tuning, /*allowTail=*/true);
  // Two FMA pipes: a dividing tile does not wait on loads for one pipe, but
  // both need more FMAs per load — more rows of the same columns with a
  // tail where that scores kTailGain better (BERT-base's 128 rows: 6x64 and
  // a 2x64 tail, not 4x64: its matmuls 4-6% faster on a Xeon with AMX,
  // BM_BertMatmul and `kiln run`, ABAB; the same columns keep the panels).
  // (chooseRegisterTile compares the two tiles; `tall` is p.rb or the
  // tail tile that scores kTailGain better.)
  if (tuning.fmaPipes > 1) {
    RegisterTile tall = chooseRegisterTile(p.mc, p.nc, tuning, /*allowTail=*/true, /*tailBelowScore=*/1e9);
    if (tall.n == p.rb.n) p.rb = tall;
  }
  return p;
}

std::optional<MatmulBlocks> raggedMatmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning,
                                               bool oneThread) {
  const int64_t lanes = tuning.lanes();
  if (N <= lanes || N % lanes == 0) return std::nullopt;
  MatmulBlocks mb = matmulBlocks(B, M, N, K, tuning, /*columnBlocks=*/true, oneThread);
  if (mb.rb.n >= lanes) return std::nullopt;
  // A few rows over many columns (a classifier at batch 8) keep their
  // narrow tiles in parallel column blocks.
  MatmulBlocks ragged = matmulBlocks(B, M, N - N % lanes, K, tuning, /*columnBlocks=*/false, oneThread);
  if (mb.parallel && !(ragged.parallel && B * (M / ragged.mc) >= kParallelTasks)) return std::nullopt;
  ragged.nc = N;
  return ragged;
}

MatmulBlocks chosenMatmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning, bool *ragged,
                                bool oneThread) {
  std::optional<MatmulBlocks> r = raggedMatmulBlocks(B, M, N, K, tuning, oneThread);
  if (ragged) *ragged = r.has_value();
  return r ? *r : matmulBlocks(B, M, N, K, tuning, /*columnBlocks=*/true, oneThread);
}

/// Parallel tiles for an elementwise op, fill or row reduction over at
/// least kParallelMinBytes: blocks of its outer loops (never the innermost,
/// whose vectors stay whole), the outermost with more than one iteration
/// and, when that gives too few tiles, the next one too. Empty when it
/// should stay on the calling thread.
SmallVector<int64_t> parallelRowBlocks(linalg::LinalgOp op, llvm::ArrayRef<int64_t> bounds) {
  if (insideParallelLoop(op)) return {};
  double bytes = 0;  // no overflow on absurd shapes
  for (Value v : llvm::concat<Value>(op.getDpsInputs(), op->getResults()))  // inits are the results' buffers
    if (auto t = dyn_cast<ShapedType>(v.getType()); t && t.hasStaticShape())
      bytes += double(t.getNumElements()) * double(llvm::divideCeil(t.getElementTypeBitWidth(), 8));
  if (bytes < double(kParallelMinBytes)) return {};
  SmallVector<int64_t> blocks(bounds.size(), 0);
  auto iters = op.getIteratorTypesArray();
  int64_t tiles = 1;
  for (size_t i = 0; i + 1 < bounds.size() && tiles < kParallelTasks; ++i) {
    if (bounds[i] <= 1 || iters[i] != utils::IteratorType::parallel) continue;
    // The fewest tiles of this loop, dividing it, that make kParallelTasks
    // with those of the loops outside (a few more where none divides).
    int64_t need = llvm::divideCeil(kParallelTasks, tiles);
    int64_t t = 0;
    for (int64_t c = std::min(need, bounds[i]); c <= std::min(bounds[i], 4 * need) && !t; ++c)
      if (bounds[i] % c == 0) t = c;
    if (!t) continue;  // e.g. a large prime: the next loop may divide
    blocks[i] = bounds[i] / t;
    tiles *= t;
  }
  if (tiles == 1) return {};
  return blocks;
}

bool insideParallelLoop(Operation *op) { return op->getParentOfType<scf::ForallOp>() != nullptr; }

bool allStatic(linalg::LinalgOp op) {
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<ShapedType>(v.getType()); t && !t.hasStaticShape()) return false;
  for (Type t : op->getResultTypes())
    if (auto s = dyn_cast<ShapedType>(t); s && !s.hasStaticShape()) return false;
  return true;
}

bool allF32(linalg::LinalgOp op) {
  for (Value v : op->getOperands())
    if (!getElementTypeOrSelf(v.getType()).isF32()) return false;
  return true;
}

/// The bit width when every operand is f32, or every one f64 (layer norms
/// that exporters compute in double); 0 otherwise.
unsigned uniformFloatBits(linalg::LinalgOp op) {
  unsigned bits = 0;
  for (Value v : op->getOperands()) {
    Type e = getElementTypeOrSelf(v.getType());
    unsigned b = e.isF32() ? 32 : e.isF64() ? 64 : 0;
    if (!b || (bits && b != bits)) return 0;
    bits = b;
  }
  return bits;
}

/// Every operand's elements are whole bytes: vectors of i1 would be stored
/// as packed bits, while kiln's buffers hold one byte per i1.
bool byteSizedElements(linalg::LinalgOp op) {
  for (Value v : op->getOperands()) {
    Type e = getElementTypeOrSelf(v.getType());
    if (!e.isIntOrFloat() || e.getIntOrFloatBitWidth() % 8 || e.getIntOrFloatBitWidth() > 64) return false;
  }
  return true;
}

/// Elementwise generics whose bodies only compute (arith, math): anything
/// else (index lookups, guarded accesses, calls) stays on loops.
bool isVectorizableElementwise(linalg::LinalgOp op) {
  if (!isa<linalg::GenericOp>(op) || op.getNumDpsInits() != 1 || op.getNumLoops() == 0) return false;
  if (op.getNumParallelLoops() != op.getNumLoops()) return false;
  if (!op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity()) return false;
  // Inputs may broadcast (dims dropped or 0), not permute: an input whose
  // innermost access is not the innermost loop would read with a stride
  // (a transpose) and stays on loops.
  unsigned last = op.getNumLoops() - 1;
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/true)) return false;
    for (unsigned r = 0; r + 1 < map.getNumResults(); ++r)
      if (auto d = dyn_cast<AffineDimExpr>(map.getResult(r)); d && d.getPosition() == last) return false;
  }
  for (Operation &inner : op->getRegion(0).front()) {
    Dialect *d = inner.getDialect();
    if (isa<linalg::YieldOp>(inner)) continue;
    if (!d || !isa<arith::ArithDialect, math::MathDialect>(d)) return false;
    if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp, arith::CeilDivSIOp,
            arith::FloorDivSIOp, arith::CeilDivUIOp>(inner))
      return false;
    // The vector form of fpowi broadcasts its integer exponent too, which
    // llvm.intr.powi does not take (a linalg input's x ** 2).
    if (isa<math::FPowIOp>(inner)) return false;
    if (inner.getNumRegions()) return false;
  }
  // Elements of whole bytes, but for inputs broadcast along the innermost
  // loop (a row's boolean, torch's safe softmax's "row all -inf"): those
  // are read one element at a time and broadcast, never as a vector of
  // packed bits.
  for (OpOperand &operand : op->getOpOperands()) {
    Type e = getElementTypeOrSelf(operand.get().getType());
    if (!e.isIntOrFloat() || e.getIntOrFloatBitWidth() > 64) return false;
    if (e.getIntOrFloatBitWidth() % 8 == 0) continue;
    if (!op.isDpsInput(&operand) || op.getMatchingIndexingMap(&operand).isFunctionOfDim(last)) return false;
  }
  return true;
}

/// f32 or f64 reductions over the innermost loop only (sums, maxima:
/// softmax's and layer norm's rows) whose bodies only compute.
bool isVectorizableRowReduction(linalg::LinalgOp op) {
  if (!isa<linalg::GenericOp, linalg::ReduceOp>(op) || op.getNumDpsInits() != 1 || op.getNumLoops() < 1) return false;
  unsigned last = op.getNumLoops() - 1;
  auto iters = op.getIteratorTypesArray();
  for (unsigned i = 0; i < iters.size(); ++i)
    if ((i == last) != (iters[i] == utils::IteratorType::reduction)) return false;
  if (!uniformFloatBits(op)) return false;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!out.isProjectedPermutation() || out.getNumResults() != last) return false;
  for (unsigned r = 0; r < out.getNumResults(); ++r)
    if (out.getDimPosition(r) != r) return false;
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    if (!map.isIdentity()) return false;
  }
  Block &body = op->getRegion(0).front();
  if (body.getOperations().size() != 2) return false;  // one combiner + yield
  return isa<arith::AddFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp>(
      body.front());
}

/// f32 or f64 reductions whose innermost loop is parallel (a global pool
/// over H and W of NHWC data; sums over rows): vectors across the innermost
/// loop, accumulated over the reduction loops in registers.
bool isVectorizableOuterReduction(linalg::LinalgOp op) {
  if (!isa<linalg::GenericOp, linalg::ReduceOp>(op) || op.getNumDpsInits() != 1 || op.getNumLoops() < 2) return false;
  auto iters = op.getIteratorTypesArray();
  unsigned last = op.getNumLoops() - 1;
  if (iters[last] != utils::IteratorType::parallel || op.getNumReductionLoops() == 0) return false;
  if (!uniformFloatBits(op)) return false;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!out.isProjectedPermutation() || out.getNumResults() == 0 ||
      out.getResult(out.getNumResults() - 1) != getAffineDimExpr(last, op->getContext()))
    return false;
  for (OpOperand *in : op.getDpsInputOperands())
    if (!op.getMatchingIndexingMap(in).isIdentity()) return false;
  Block &body = op->getRegion(0).front();
  if (body.getOperations().size() != 2) return false;  // one combiner + yield
  return isa<arith::AddFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp>(body.front());
}

/// The vector width for a reduction's innermost loop of `inner`: the widest
/// of two vectors, one, or half a vector (at least 4 lanes) that divides
/// it; 0 when none does.
int64_t reductionWidth(int64_t inner, int64_t lanes) {
  for (int64_t w : {2 * lanes, lanes, lanes / 2})
    if (w >= 4 && inner % w == 0) return w;
  return 0;
}

std::string loopRangesText(linalg::LinalgOp op) {
  SmallVector<std::string> sizes;
  for (int64_t n : op.getStaticLoopRanges()) sizes.push_back(ShapedType::isDynamic(n) ? "?" : std::to_string(n));
  return llvm::join(sizes, "x");
}

std::string list(llvm::ArrayRef<int64_t> v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace kiln::lowering::strategy
