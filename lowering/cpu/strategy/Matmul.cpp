// matmul and batch_matmul (f32): parallel blocks [Mc, Nc] (an scf.forall
// when big enough), a k block, then a register tile [mr, nr, 1]; vectorized
// to a vector.contract whose accumulator is hoisted out of the k loop,
// lowered to outer products (broadcast A x vector of B, FMA). A matmul's
// accumulator init and elementwise epilogue run inside its parallel tiles
// (a batch-1 batch_matmul flattened for its epilogue became a 2-D matmul
// first: Prepare.cpp). Blocks and register tiles: matmulBlocks (Support.cpp).
//
// Columns that no vector divides (attention's 197 keys, a classifier's 1000
// classes at 512 bits), where the only register tiles that divide N are
// narrow (1 or 8 columns): whole-vector tiles over the first N - N % lanes
// columns and one tile of the rest (transform.structured.split), with the
// threads sharing batches and row blocks, every block all N columns.
#include "lowering/cpu/strategy/OpStrategy.h"

namespace kiln::lowering::strategy {
namespace {

struct MatmulPlan {
  SmallVector<int64_t> bounds;
  bool batched = false;
  MatmulBlocks blocks;
  /// Ragged columns: `blocks.rb` tiles the first `whole` columns (a
  /// multiple of the vector), a tile of rb.m x (N - whole) the rest; every
  /// block spans all N columns.
  int64_t whole = 0;
  /// Tile sizes of the parallel blocks and of the k block (over every loop).
  SmallVector<int64_t> outer, reduction;
};

class MatmulStrategy final : public PlannedStrategy<MatmulPlan> {
public:
  llvm::StringRef name() const override { return "matmul"; }

  bool recognize(linalg::LinalgOp op) const override {
    return isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) && allF32(op);
  }

  std::optional<MatmulPlan> choose(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation());
    auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
    if ((mm && mm.hasUserDefinedMaps()) || (bmm && bmm.hasUserDefinedMaps())) return std::nullopt;
    MatmulPlan p;
    p.bounds = op.getStaticLoopRanges();
    p.batched = p.bounds.size() == 4;
    int64_t M = p.bounds[p.batched], N = p.bounds[p.batched + 1], K = p.bounds[p.batched + 2];
    int64_t B = p.batched ? p.bounds[0] : 1;
    // (Ragged columns: blocks and tiles of the whole vectors' columns, each
    // block over every column, raggedMatmulBlocks.)
    bool ragged = false;
    p.blocks = chosenMatmulBlocks(B, M, N, K, w.tuning(), &ragged, /*oneThread=*/insideParallelLoop(op));
    if (ragged) p.whole = N - N % w.lanes();
    const MatmulBlocks &mb = p.blocks;
    p.outer = {mb.mc == M ? 0 : mb.mc, mb.nc == N ? 0 : mb.nc, 0};
    p.reduction = {0, 0, mb.kc == K ? 0 : mb.kc};
    if (p.batched) {
      p.outer.insert(p.outer.begin(), B > 1 ? 1 : 0);
      p.reduction.insert(p.reduction.begin(), 0);
    }
    return p;
  }

  // Several k blocks in parallel blocks (BERT-base's 3072 -> 768
  // projection: 24 k blocks of 128, its rows 3 KiB apart in the output;
  // 3.4 -> 2.8 ms, docs/codegen-cpu.md).
  bool accumulatesApart(linalg::LinalgOp op, const ScheduleWriter &w) const override {
    if (!isa<linalg::MatmulOp>(op.getOperation())) return false;
    std::optional<MatmulPlan> p = choose(op, w);
    return p && p->blocks.parallel && p->blocks.kc < p->bounds[2];
  }

  std::string describe(linalg::LinalgOp op, const MatmulPlan &p, const ScheduleWriter &w) const override {
    int64_t B = p.batched ? p.bounds[0] : 1, M = p.bounds[p.batched], N = p.bounds[p.batched + 1],
            K = p.bounds[p.batched + 2];
    const MatmulBlocks &mb = p.blocks;
    std::string out;
    if (auto m = op->getAttrOfType<IntegerAttr>(kWinogradAttr))
      out = llvm::formatv("winograd F({0}x{0},3x3) conv as ", m.getInt()).str();
    out += (B > 1 ? llvm::formatv("{0} x matmul ", B).str() : std::string("matmul ")) +
           llvm::formatv("{0}x{1}x{2}: registers {3}x{4}", M, N, K, mb.rb.m, mb.rb.n).str();
    if (mb.rb.tail) out += llvm::formatv(" (+{0} rows)", mb.rb.tail).str();
    if (p.whole) out += llvm::formatv(" (+ {0}x{1} for the last {1} columns)", mb.rb.m, N - p.whole).str();
    if (mb.kc < K) out += llvm::formatv(", k blocks of {0}", mb.kc).str();
    if (mb.parallel)
      out += llvm::formatv(", {0} parallel blocks of {1}x{2}", (B > 1 ? B : 1) * (M / mb.mc) * (N / mb.nc), mb.mc,
                           mb.nc)
                 .str();
    else
      out += ", one thread";
    Fused f = p.batched ? Fused{} : w.fusedOf(op);
    return out + (mb.parallel ? ScheduleWriter::fusedText(f) : std::string());
  }

  void write(linalg::LinalgOp op, const MatmulPlan &p, ScheduleWriter &w) const override {
    Schedule &schedule = w.schedule();
    std::string h = w.tag(op);
    Fused f = p.batched ? Fused{} : w.fusedOf(op);
    bool parallel = p.blocks.parallel;
    if (parallel && (f.init || f.epilogue))
      h = w.tileFused(h, p.bounds, {p.outer[0], p.outer[1]}, f);
    else {
      w.unfused(f);
      h = parallel ? schedule.tileForall(h, p.outer) : schedule.tile(h, p.outer);
    }
    h = schedule.tile(h, p.reduction);
    RegisterTile rb = p.blocks.rb;
    bool batched = p.batched;
    // Column tiles outside row tiles: a tile's k block of B (kc x
    // rb.n, in L1) serves every row tile before the next is read
    // (rows outside read the block's nc columns of B, from L2, for
    // each row tile; BERT-base's kernels took 1.04-1.06x the time).
    SmallVector<int64_t> colsOuter = batched ? SmallVector<int64_t>{0, 2, 1, 3} : SmallVector<int64_t>{1, 0, 2};
    // Rows past the last whole register tile (rb.tail): the row-tile loop
    // peeled, its remainder one static tile in the same k block and column
    // tile. (Split into two ops inside the k loop, the parts' accumulators
    // were hoisted out of it side by side and put back one into the other,
    // which bufferization cannot prove disjoint: it copied the bigger part
    // into a heap buffer and back on every block. Split before the k
    // blocks, each part read B again: BERT-base's FFN matmuls 1.13x.)
    h = schedule.tile(h, p.reduction);
    auto tiles = [&](const std::string &part, int64_t cols) {
      SmallVector<int64_t> sizes = {rb.m, cols, 1};
      if (batched) sizes.insert(sizes.begin(), 0);
      std::string t = schedule.tile(part, sizes, colsOuter);
      if (!rb.tail) return schedule.vectorize(t);
      // Loops: columns, rows, k. (Vector sizes given: the remainder's
      // bounds fold to static ones after vectorization, no masks left.)
      auto [full, tail] = schedule.peelLoop(t, /*index=*/1);
      SmallVector<int64_t> vec = {rb.m, cols, 1};
      if (batched) vec.insert(vec.begin(), 1);
      schedule.vectorize(full, vec);
      vec[batched] = rb.tail;
      schedule.vectorize(tail, vec);
    };
    if (!p.whole) return tiles(h, rb.n);
    auto [whole, rest] = schedule.split(h, /*dim=*/batched ? 2 : 1, p.whole);
    tiles(whole, rb.n);
    tiles(rest, p.bounds[batched + 1] - p.whole);
  }
};

}  // namespace

const OpStrategy &matmulStrategy() {
  static const MatmulStrategy strategy;
  return strategy;
}

}  // namespace kiln::lowering::strategy
