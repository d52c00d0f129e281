// The host's figures for code generation (CpuTuning from LLVM's host
// features) and the choices made from them alone: register tiles, panel
// widths of streamed matmul weights, blocks of streamed conv filters (see
// CpuStrategy.h).
#include "lowering/cpu/CpuStrategy.h"
#include "lowering/cpu/strategy/Support.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace kiln::lowering {
using namespace strategy;

namespace strategy {
double tileScore(int64_t mr, int64_t nr, const CpuTuning &tuning) {
  const int64_t lanes = tuning.lanes();
  int64_t vecs = (nr + lanes - 1) / lanes;
  if (mr * vecs + vecs + 1 > tuning.vectorRegisters) return 0.0;
  double utilization = double(nr) / double(vecs * lanes);
  return utilization * double(mr * vecs) / double(mr + vecs);
}
}  // namespace strategy

/// A per-tile figure of `tile` over `m` rows: the full tiles' rows at
/// `figure(tile.m)`, the tail's at `figure(tile.tail)`.
template <typename Figure>
static double overRows(const RegisterTile &tile, int64_t m, Figure figure) {
  if (!tile.tail) return figure(tile.m);
  return (double(m - tile.tail) * figure(tile.m) + double(tile.tail) * figure(tile.tail)) / double(m);
}

double registerTileScore(const RegisterTile &tile, int64_t m, const CpuTuning &tuning) {
  return overRows(tile, m, [&](int64_t rows) { return tileScore(rows, tile.n, tuning); });
}

/// How a tile with a tail is ranked among the others with tails on a host
/// with one FMA pipe: FMAs per load count up to kTailBelowScore (beyond it
/// the tile waits on its FMAs, not its loads), and a tile with fewer than
/// kMinAccumulatorChains accumulators waits on each FMA's latency. On
/// AVX2's 16 registers over a 7-wide map, 6x16 and a 1x16 tail (two chains)
/// lost to 4x16 and a 3x16 tail: MobileNetV3-small's 1x1 96 -> 576 on 7x7
/// 112-114 -> 100-105 us (BM_MobileNetV3SmallConv/6, two alternating runs;
/// Zen 1, whose 256-bit FMAs have 5 cycles of latency); EfficientNet-B0
/// and MobileNetV2 3% faster (docs/codegen-cpu.md).
static double oneRankOfTails(int64_t mr, int64_t nr, const CpuTuning &tuning) {
  const int64_t vecs = (nr + tuning.lanes() - 1) / tuning.lanes();
  return std::min(tileScore(mr, nr, tuning), kTailBelowScore) *
         std::min(1.0, double(mr * vecs) / double(kMinAccumulatorChains));
}

RegisterTile chooseRegisterTile(int64_t m, int64_t n, const CpuTuning &tuning, bool allowTail,
                                double tailBelowScore) {
  const int64_t lanes = tuning.lanes();
  auto score = [&](int64_t mr, int64_t nr) { return tileScore(mr, nr, tuning); };
  RegisterTile best{1, 1}, bestTail{1, 1};
  double bestScore = -1, bestTailScore = -1, bestTailRank = -1;
  for (int64_t mr = 1; mr <= std::min<int64_t>(m, 8); ++mr) {
    int64_t tail = m % mr;
    if (tail && !allowTail) continue;
    // Vector lengths are powers of two: LLVM splits others badly (a
    // vector<48xf32> ran 10x slower than two of 32 and one of 16).
    for (int64_t nr = 1; nr <= std::min<int64_t>(n, 4 * lanes); nr *= 2) {
      if (n % nr) continue;
      if (score(mr, nr) <= 0) continue;
      // Rows in full tiles at the full tile's figure, the tail's at its own.
      double s = registerTileScore({mr, nr, tail}, m, tuning);
      // Tiles with tails on one FMA pipe: ranked by oneRankOfTails; the
      // chosen one's score still weighs it against the dividing tiles.
      double rank = s;
      if (tail && tuning.fmaPipes == 1)
        rank = overRows({mr, nr, tail}, m, [&](int64_t rows) { return oneRankOfTails(rows, nr, tuning); });
      RegisterTile &b = tail ? bestTail : best;
      double &br = tail ? bestTailRank : bestScore;
      // Ties: the bigger tile, then more rows (a B row reused more often).
      bool tie = std::abs(rank - br) <= 1e-9;
      if (rank > br + 1e-9 || (tie && (mr * nr > b.m * b.n || (mr * nr == b.m * b.n && mr > b.m)))) {
        br = rank;
        if (tail) bestTailScore = s;
        b = {mr, nr, tail};
      }
    }
  }
  if (bestScore < tailBelowScore && bestTailScore > bestScore * kTailGain) return bestTail;
  return best;
}


int64_t matmulPanelWidth(int64_t m, int64_t n, int64_t k, const CpuTuning &tuning) {
  // (A vector times B, m = 1, reads each row of B once, whole: no panels.)
  if (tuning.vectorBits <= 0 || m < 4 || n <= 0 || k <= 0 || k * n * 4 <= tuning.l2Bytes) return 0;
  MatmulBlocks mb = matmulBlocks(1, m, n, k, tuning);
  int64_t lanes = tuning.lanes();
  // Tiles of at least 8 columns (a classifier's 1000 at 512 bits: 8,
  // 32-byte panel rows): the weight streams from memory from start to end
  // either way, where rows of N floats read 8 at a time ran at half the
  // speed. Not where the matmul takes whole-vector tiles and a tile of the
  // rest (raggedMatmulBlocks): those read B's rows as they are.
  if (mb.rb.n < std::min<int64_t>(lanes, 8) || n % mb.rb.n || raggedMatmulBlocks(1, m, n, k, tuning)) return 0;
  return mb.rb.n;
}

int64_t streamingFilterBlock(int64_t kh, int64_t kw, int64_t c, int64_t f, int64_t ow, int64_t pixels,
                             const CpuTuning &tuning) {
  if (tuning.vectorBits <= 0 || kh * kw * c * f * 4 <= tuning.l2Bytes / kStreamingFilterL2Fraction ||
      pixels > kStreamingMaxPixels ||
      2.0 * pixels * kh * kw * c * f < parallelMinFlops(tuning))
    return 0;
  RegisterTile rt = chooseRegisterTile(ow, f, tuning);
  if (rt.n < 4) return 0;
  // One register tile of filters per block where that makes an even number
  // of at least kStreamingBlocks: each block (a panel) is then the tile's
  // own filter columns, one contiguous run that the tile reads from start
  // to end, and the threads share many small blocks. ResNet-50's last
  // stage took 0.82-0.88x the time of eight blocks (1x1 convs; 3x3 0.95-1.0x;
  // AVX2 code 0.81-1.0x), kiln profile --serial, alternating.
  // (The tile the conv strategy takes: on AVX2 with one FMA pipe, 4x16
  // tiles and a 3x16 tail where 7x8 tiles divide a 7-wide map.)
  // An odd number of them shares unevenly below 3 x kStreamingBlocks
  // (sharedUnevenly). (RegNetY's 440
  // filters in 8-wide tiles: 55 blocks, where the fewest even blocks below
  // gave none and blockOf 11 blocks of 40, 6 on one thread and 5 on the
  // other.)
  int64_t taken = chooseRegisterTile(ow, f, tuning, /*allowTail=*/true).n;
  // (Whole vectors only: at 512 bits those 8-wide tiles are half vectors,
  // where blocks of 40 take 32 + 8.)
  if (int64_t n = f / taken; f % taken == 0 && n >= kStreamingBlocks &&
                             (n % 2 == 0 || (!sharedUnevenly(n) && taken >= tuning.lanes())))
    return taken;
  int64_t tiles = f / rt.n;
  // Else the fewest blocks, at least kStreamingBlocks, in an even number
  // where whole register tiles allow it, so that two or four threads get
  // equal shares: MobileNetV2's 1x1 160 -> 960 on 7x7 maps in 5 blocks of
  // 192 ran 3 blocks on one thread and 2 on the other.
  for (int64_t blocks = kStreamingBlocks; blocks <= tiles; blocks += 2)
    if (tiles % blocks == 0) return f / blocks;
  int64_t fc = blockOf(f, rt.n, std::max<int64_t>(rt.n, f / kStreamingBlocks));
  // Blocks that would still share unevenly over an odd number of rows
  // (which the conv strategy cannot halve instead: 7x7 maps) are halved
  // where that leaves whole vectors in tiles of enough accumulators
  // (kMinAccumulatorChains): at 512 bits MobileNetV2's 1x1 576 -> 160 and
  // 960 -> 160 on 7x7 in 10 blocks of 16 (7x16 tiles, the epilogue in
  // registers), not 5 of 32: 50-68 -> 44-50 and 82-110 -> 70-77 us (three
  // runs); MobileNetV3-small's 576 -> 96 in 6 of 16: 34 -> 27
  // (bench/ab_kernels.py, Zen 4).
  if (fc < f && sharedUnevenly(f / fc) && (pixels / ow) % 2 && fc % (2 * tuning.lanes()) == 0 &&
      chooseRegisterTile(ow, fc / 2, tuning).m * (fc / 2 / tuning.lanes()) >= kMinAccumulatorChains)
    fc /= 2;
  return fc < f ? fc : 0;
}

CpuTuning CpuTuning::fromFeatures(llvm::StringRef features, int64_t maxVectorBits) {
  auto has = [&](llvm::StringRef f) {
    llvm::SmallVector<llvm::StringRef> parts;
    features.split(parts, ',');
    for (llvm::StringRef p : parts)
      if (p == ("+" + f).str()) return true;
    return false;
  };
  CpuTuning t;
  if (has("avx512f")) {
    t.vectorBits = 512;
    t.vectorRegisters = 32;
  } else if (has("avx2") || has("avx")) {
    t.vectorBits = 256;
    t.vectorRegisters = 16;
  } else {
    t.vectorBits = 128;
    t.vectorRegisters = 16;
  }
  if (maxVectorBits > 0 && t.vectorBits > maxVectorBits) {
    t.vectorBits = maxVectorBits;
    t.vectorRegisters = 16;
  }
  // AMX marks Intel's Xeon cores from Sapphire Rapids on, all with two
  // 512-bit FMA units (older Xeons vary by SKU: left at 1, unmeasured).
  if (t.vectorBits == 512 && has("amx-tile")) t.fmaPipes = 2;
  return t;
}

std::string CpuTuning::passOptions() const {
  return "vector-bits=" + std::to_string(vectorBits) + " vector-registers=" + std::to_string(vectorRegisters) +
         " l2-bytes=" + std::to_string(l2Bytes) + " l1-bytes=" + std::to_string(l1Bytes) +
         " fma-pipes=" + std::to_string(fmaPipes);
}

}  // namespace kiln::lowering
