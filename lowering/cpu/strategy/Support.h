// What kiln-cpu-strategy's schedules are made of, shared by its files
// (internal to lowering/cpu): the thresholds it decides by, blocking for
// parallel tiles and caches, and the op classes it recognizes.
//
// Thread-safety: pure functions.
#pragma once

#include "lowering/cpu/CpuStrategy.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln::lowering::strategy {
using namespace mlir;

/// Ops of at least parallelMinFlops(tuning) FLOPs run their outer tiles in
/// parallel (kiln_parallel_for); smaller ones stay on the calling thread.
/// The bound is a time (a parallel launch and the other thread's share
/// must be worth it): kParallelMinFlops on a core of
/// kParallelReferenceFlopsPerCycle (two 512-bit FMA pipes), and as many
/// fewer FLOPs as the host's core does fewer per cycle (2 x lanes x
/// fmaPipes). On Zen 1 (AVX2, one pipe: 1e6) MobileNetV3-small's 1x1 convs
/// of 2-4 MFLOP on 28x28 and 14x14 had run on one thread: the model 3.55 ->
/// 2.92 ms, EfficientNet-B0 and RegNetY-400MF 1.5-2% faster (medians of 5
/// alternating `kiln run -n 40`); at 0.5e6 the same as 1e6.
inline constexpr double kParallelMinFlops = 4e6;
inline constexpr double kParallelReferenceFlopsPerCycle = 64;
inline double parallelMinFlops(const CpuTuning &tuning) {
  const double perCycle = 2.0 * double(tuning.lanes()) * double(std::max<int64_t>(tuning.fmaPipes, 1));
  return kParallelMinFlops * std::min(1.0, perCycle / kParallelReferenceFlopsPerCycle);
}
/// Convs with at most this many output pixels and a filter bigger than a
/// quarter of L2 (kStreamingFilterL2Fraction) stream their filter
/// (streamingFilterBlock) ... 256 takes in ResNet-50's
/// 14x14 1x1 convs (1-2 MiB filters): cold-filter calls of 1024 -> 256,
/// 1024 -> 512 and 256 -> 1024 took 0.84-0.98x the time they took at 64
/// (AVX2: 0.79-0.89x), the stride-2 3x3 256 -> 256 onto 14x14 0.8x, the
/// 3x3 256 -> 256 on 14x14 the same, A/B in one process; 1024 (28x28 maps)
/// made the stride-2 3x3 128 -> 128 slower.
inline constexpr int64_t kStreamingMaxPixels = 256;
/// ... where the filter is bigger than L2 / this. In a model every layer's
/// filter comes from L3 or memory (the layers between evict it), and read
/// in rows of one register tile, F floats apart, each row is a miss the
/// hardware prefetcher does not foresee; stored as panels, it is one
/// contiguous run per block. At L2 (not L2 / 4) MobileNetV3-small's 1x1 96
/// -> 576 and 576 -> 96 on 7x7 (221 KB filters, 512 KB L2) ran at twice
/// their warm-filter time: 0.17-0.20 -> 0.13-0.15 ms and 0.14-0.15 -> 0.10
/// ms (`kiln profile --serial`), the model 4.67 -> 4.38 ms (medians of 5
/// alternating `kiln run -n 40`); MobileNetV2, EfficientNet-B0, RegNetY,
/// ShuffleNetV2, ResNet-50, DenseNet within +-1.5% (2-vCPU Zen 1, AVX2).
inline constexpr int64_t kStreamingFilterL2Fraction = 4;
/// ... in this many blocks of filters (parallel tiles).
inline constexpr int64_t kStreamingBlocks = 8;
/// A 1x1 conv runs as a matmul when the matmul's register tile scores at
/// least this much better (convs1x1AsMatmuls).
inline constexpr double kMatmulTileGain = 1.1;
/// Most bytes the rows of one input-channel block of a conv filter span (see
/// the conv strategy).
inline constexpr int64_t kFilterBlockSpanBytes = 128 * 1024;
/// Most bytes of filter columns (reduction x register tile) a conv that
/// computes its init and epilogue in its register tiles reads per tile.
inline constexpr int64_t kRegisterFusedColumnBytes = 64 * 1024;
/// Fewest FMAs per load of a narrower register tile taken so that a conv
/// computes in its register tiles (7 x 32 on AVX-512: 1.56).
inline constexpr double kNarrowTileScore = 1.5;
/// Elementwise ops, fills and row reductions that move at least this many
/// bytes run in parallel tiles of their outer loops.
inline constexpr int64_t kParallelMinBytes = 1 << 20;
/// How many parallel tiles a big op aims at (enough for a few threads to
/// balance).
inline constexpr int64_t kParallelTasks = 8;
/// Whether two threads share `tasks` parallel tasks unevenly: an odd number
/// runs as (n + 1) / 2 on one thread and (n - 1) / 2 on the other, (n + 1)
/// / n of the even time, within 4% only from 3 x kStreamingBlocks (24) on.
/// (Streamed conv filters take whole-tile blocks from there on, and halve
/// their rows below it; depthwise convs and pools halve their channels.)
inline bool sharedUnevenly(int64_t tasks) { return tasks % 2 && tasks < 3 * kStreamingBlocks; }

/// FMAs per load of an mr x nr tile (mr broadcasts of A, vecs loads of B),
/// weighted by how full the vectors are; 0 when the tile does not fit the
/// registers (accumulators, one B row, one broadcast of A). (Tuning.cpp)
double tileScore(int64_t mr, int64_t nr, const CpuTuning &tuning);
/// Largest multiple of `unit` that divides `dim` and is at most `limit`
/// (at least `unit`; `unit` must divide `dim`).
int64_t blockOf(int64_t dim, int64_t unit, int64_t limit);
/// The block of output rows (a divisor of `rows`) that gives at least
/// kParallelTasks parallel tiles, with `otherTiles` tiles per row block
/// from the other parallel dimensions; `rows` when there is one row.
int64_t rowBlockForThreads(int64_t rows, int64_t otherTiles);
/// A grouped conv whose groups' channels fill less than a cache line (two
/// or more groups share each line of its input) has its threads take row
/// blocks (every group over its rows) where the fewest row blocks of at
/// least kGroupedRowBlocks leave each group's block kGroupedRowBlockPixels
/// output pixels or more; below that
/// a block's per-group convs are too short and the groups themselves are
/// the parallel tasks. RegNetY-400MF on 2 threads (Zen 1, `kiln profile
/// --serial`): its 3x3 grouped convs on 56x56 0.74 -> 0.52 ms, on 28x28
/// 0.37-0.55 -> 0.28-0.37 (4 blocks; 2 blocks 0.30-0.37, 8-14 blocks
/// 0.38-0.48); on 14x14 (one or seven rows a block) 0.19-0.27 -> 0.19-0.33,
/// so those keep a thread per group. Returns the rows of a block, or 0.
/// (Prepare.cpp)
inline constexpr int64_t kGroupedRowBlocks = 4;
inline constexpr int64_t kGroupedRowBlockPixels = 128;
int64_t groupedRowBlock(int64_t oh, int64_t ow, int64_t channelBytes);
/// How kiln-cpu-strategy blocks a (batched) matmul: B batches of M x K
/// times K x N.
struct MatmulBlocks {
  RegisterTile rt{1, 1};  // over the whole M x N
  int64_t kc = 1, nc = 1, mc = 1;
  bool parallel = false;
  RegisterTile rb{1, 1};  // within an mc x nc block
};
/// With `columnBlocks` false every block spans all N columns (the threads
/// share batches and row blocks only); with `oneThread` no block is split
/// for threads (a matmul inside a parallel loop already: attention's).
MatmulBlocks matmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning,
                          bool columnBlocks = true, bool oneThread = false);
/// Columns no vector divides whose dividing register tiles are narrower
/// than a vector: the blocks of the first N - N % lanes columns (tiles of
/// whole vectors; the rest a tile of its own), each block over all N
/// columns (nc = N), where the threads get enough blocks of batches and
/// rows or the matmul runs on one thread; else none (also for N a multiple
/// of the vector).
std::optional<MatmulBlocks> raggedMatmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning,
                                               bool oneThread = false);
/// The blocks the matmul strategy takes: raggedMatmulBlocks where it gives
/// some (`ragged` says so), else matmulBlocks.
MatmulBlocks chosenMatmulBlocks(int64_t B, int64_t M, int64_t N, int64_t K, const CpuTuning &tuning,
                                bool *ragged = nullptr, bool oneThread = false);
/// Parallel tiles for an elementwise op, fill, row or outer reduction over
/// at least kParallelMinBytes (blocks of its outer parallel loops); empty
/// when it should stay on the calling thread.
SmallVector<int64_t> parallelRowBlocks(linalg::LinalgOp op, llvm::ArrayRef<int64_t> bounds);
/// Whether `op` is inside an scf.forall already (attention's tiles,
/// RowFusion.cpp): its own tiles then run on the calling thread.
bool insideParallelLoop(Operation *op);
/// Every operand and result has a static shape.
bool allStatic(linalg::LinalgOp op);
/// Every operand is f32.
bool allF32(linalg::LinalgOp op);
/// The bit width when every operand is f32, or every one f64 (layer norms
/// that exporters compute in double); 0 otherwise.
unsigned uniformFloatBits(linalg::LinalgOp op);
/// Every operand's elements are whole bytes: vectors of i1 would be stored
/// as packed bits, while kiln's buffers hold one byte per i1.
bool byteSizedElements(linalg::LinalgOp op);
/// Elementwise generics whose bodies only compute (arith, math): anything
/// else (index lookups, guarded accesses, calls) stays on loops.
bool isVectorizableElementwise(linalg::LinalgOp op);
/// f32 or f64 reductions over the innermost loop only (sums, maxima:
/// softmax's and layer norm's rows) whose bodies only compute.
bool isVectorizableRowReduction(linalg::LinalgOp op);
/// f32 or f64 reductions whose innermost loop is parallel (a global pool
/// over H and W of NHWC data; sums over rows): vectors across the innermost
/// loop, accumulated over the reduction loops in registers.
bool isVectorizableOuterReduction(linalg::LinalgOp op);
/// The vector width for a reduction's innermost loop of `inner`: the widest
/// of two vectors, one, or half a vector (at least 4 lanes) that divides
/// it; 0 when none does.
int64_t reductionWidth(int64_t inner, int64_t lanes);
/// "1x128x12x64": `op`'s loop ranges ("?" where dynamic), for descriptions.
std::string loopRangesText(linalg::LinalgOp op);
/// "[1, 2, 3]": sizes as the transform dialect writes them.
std::string list(llvm::ArrayRef<int64_t> v);

}  // namespace kiln::lowering::strategy
