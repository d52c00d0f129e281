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

  /// From an LLVM feature string ("+avx2,+avx512f,-sse4a,..."); at most
  /// `maxVectorBits` wide when that is > 0 (e.g. 256 on an AVX-512 host to
  /// run the AVX2 strategy).
  static CpuTuning fromFeatures(llvm::StringRef features, int64_t maxVectorBits = 0);
  /// The kiln-cpu-strategy options for this tuning.
  std::string passOptions() const;
};

/// A register tile: `m` rows of `n` f32 accumulators.
struct RegisterTile {
  int64_t m, n;
};
/// The register tile for an m x n output: sizes divide m and n (n a power
/// of two, as LLVM wants vector lengths), the
/// accumulators plus one row of B and one broadcast fit the vector
/// registers, and the FMAs per loaded element (weighted by how full the
/// vectors are) are the most.
RegisterTile chooseRegisterTile(int64_t m, int64_t n, const CpuTuning &tuning);

/// Attribute that tags an op with its strategy's id while the schedule runs.
inline constexpr llvm::StringLiteral kStrategyIdAttr = "kiln.strategy_id";

}  // namespace kiln::lowering
