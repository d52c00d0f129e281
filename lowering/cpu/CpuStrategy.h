// The host CPU's figures that code-generation strategies are chosen from
// (kiln-cpu-strategy), and the register-tile choice, exposed for tests.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace kiln::lowering {

struct CpuTuning {
  /// Widest vector register in bits; 0 = no strategy (plain loops).
  int64_t vectorBits = 0;
  int64_t vectorRegisters = 16;
  int64_t l2Bytes = 512 * 1024;
  int64_t l1Bytes = 32 * 1024;
  /// FMA pipes per core at the full vector width: 2 on Intel Xeon cores with
  /// AMX (Sapphire Rapids and later: two 512-bit FMA units), where a matmul's
  /// register tile needs more FMAs per load to keep both busy; 1 elsewhere
  /// (AMD Zen 4 runs 512-bit FMAs as two 256-bit halves).
  int64_t fmaPipes = 1;
  /// How far ahead register-tile loops prefetch the rows of an operand
  /// that streams (a function argument of at least half of L2: a weight
  /// the loops before evicted), in bytes; 0: no prefetches
  /// (kiln-prefetch-streams). ResNet-50's last stage, filters of 4-9 MB
  /// read from L3 once per call: 12-15% less time per conv.
  int64_t prefetchBytes = 8192;

  /// f32 lanes of the widest vector (at least 1).
  int64_t lanes() const { return vectorBits >= 32 ? vectorBits / 32 : 1; }

  /// From an LLVM feature string ("+avx2,+avx512f,-sse4a,..."); at most
  /// `maxVectorBits` wide when that is > 0 (e.g. 256 on an AVX-512 host to
  /// run the AVX2 strategy).
  static CpuTuning fromFeatures(llvm::StringRef features, int64_t maxVectorBits = 0);
  /// The kiln-cpu-strategy options for this tuning.
  std::string passOptions() const;
};

/// A register tile: `m` rows of `n` f32 accumulators; when `tail` > 0 the
/// rows do not divide the op's, and the last `tail` rows (fewer than `m`)
/// run as one tile of their own (a static split, no masks).
struct RegisterTile {
  int64_t m, n;
  int64_t tail = 0;
};
/// FMAs per load below which a register tile is taken to wait on loads ...
inline constexpr double kTailBelowScore = 1.2;
/// ... and how much better a tile with a tail must score to replace it.
inline constexpr double kTailGain = 1.15;
/// Fewest accumulators (independent FMA chains) a register tile needs to
/// keep one FMA pipe busy (5 cycles of latency on Zen 1's 256-bit FMAs).
inline constexpr int64_t kMinAccumulatorChains = 5;
/// The register tile for an m x n output: `n` divides n and is a power of
/// two (as LLVM wants vector lengths), the accumulators plus one row of B and
/// one broadcast fit the vector registers, and the FMAs per loaded element
/// (weighted by how full the vectors are, and over the rows by the tail's
/// own figure) are the most. Without `allowTail` the rows divide m too. With
/// it, a tile that does not divide m is taken when every one that does
/// waits on loads (fewer than kTailBelowScore FMAs per load) and the tail
/// version scores kTailGain better: AVX2's 16 registers on a 7-wide map
/// give 7x8 (7 FMAs per 8 loads) against 4x16 and a 3x16 tail (8 per 6;
/// on one FMA pipe the tiles with tails rank by oneRankOfTails, which
/// prefers that to 6x16 and a 1x16 tail of two accumulator chains).
/// AVX-512's dividing tiles do at least 1.5 per load, and there 6x64 tiles
/// with tails instead of 4x64 and 7x32 measured slower (up to 1.4x on 1x1
/// convs; BM_ResNet50Conv, BM_MobileNetV2Conv, BM_BertMatmul, ABBA; Zen 4,
/// one FMA pipe). `tailBelowScore` replaces kTailBelowScore: matmulBlocks
/// on a host with two FMA pipes passes one no dividing tile reaches.
RegisterTile chooseRegisterTile(int64_t m, int64_t n, const CpuTuning &tuning, bool allowTail = false,
                                double tailBelowScore = kTailBelowScore);
/// The FMAs per loaded element of a register tile (rows, tail included),
/// as chooseRegisterTile weighs them; 0 when it does not fit the registers.
double registerTileScore(const RegisterTile &tile, int64_t m, const CpuTuning &tuning);

/// Filters per parallel block of a conv (f32, `kh` x `kw` x `c` -> `f`,
/// output width `ow`, `pixels` output pixels in all) whose filter streams
/// from memory on every call: bigger than a quarter of L2 (in a model the
/// layers between evict it) and few output pixels to reuse
/// it (ResNet-50's last stage: 49 pixels, 4-9 MB filters), so that how the
/// threads read the filter decides the time. 0 when the conv is not one.
/// Blocks of fc filters read fc floats of every filter row, rows F floats
/// apart: 32 filters (128 B of each 2 KiB row) read 4 GB/s from memory on
/// a Zen 4 where a sequential read reaches 17. HoistConstants stores such
/// filters block by block (panels), each block one contiguous run whatever
/// its width, and the conv strategy gives each block every output row; the
/// block is one register tile of filters where that makes an even number of
/// at least eight blocks (each tile then streams its own contiguous
/// columns), else an eighth of the filters (at least a register tile), so
/// that threads slowed unevenly still get even shares.
int64_t streamingFilterBlock(int64_t kh, int64_t kw, int64_t c, int64_t f, int64_t ow, int64_t pixels,
                             const CpuTuning &tuning);

/// Columns per panel of a matmul's constant B operand (k x n, f32, times an
/// m-row A) that generated code streams from memory (bigger than L2): the
/// width of the register tiles kiln-cpu-strategy takes, each of which then
/// reads its k block of B from one contiguous run of a panel [n/w, k, w]
/// (rows of B are 3-12 KiB apart in BERT-base's weights, 256 bytes of each
/// per tile). 0 when B does not stream, A has fewer than 4 rows or the
/// tiles are not whole vectors.
int64_t matmulPanelWidth(int64_t m, int64_t n, int64_t k, const CpuTuning &tuning);

/// Attribute that tags an op with its strategy's id while the schedule runs.
inline constexpr llvm::StringLiteral kStrategyIdAttr = "kiln.strategy_id";
/// Attribute on the batch_matmul of a conv in Winograd form (kiln-winograd-
/// conv): its output tile size m of F(m x m, 3 x 3), for the strategy's
/// description.
inline constexpr llvm::StringLiteral kWinogradAttr = "kiln.winograd";

}  // namespace kiln::lowering
