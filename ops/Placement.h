// Per-op placement: whether an op runs as JIT-compiled code or as a
// handwritten kernel. The vocabulary shared by the public options, the
// partitioner (lowering), eager dispatch and the cache key.
//
//   auto   -> JIT when MLIR lowers the op, else a kernel ("no lowering")
//   kernel -> a kernel when one accepts this use of the op, else JIT
//   jit    -> JIT when lowerable, else a kernel
//
// Placement by measurement (`measure`, on unless "measure=off"): an `auto`
// op that both a kernel and generated code can run, and that a kernel is
// built around (conv, matmul, pooling), is timed both ways when it is first
// compiled, and runs where it was faster (jit/PlacementTuner.h).
//
// Winograd convolution (`winograd`, on unless "winograd=off"): 3x3 stride-1
// convs with constant filters, placed on JIT, compute through Winograd
// transforms whose filter side is done once, when the weights are hoisted
// (lowering/cpu/WinogradConv.cpp).
//
// Padded weight rows (`padrows`, on unless "padrows=off"): matmul weights
// and conv filters that generated code reads are stored with rows padded off
// multiples of 256 bytes (lowering::WeightLayouts::padMatmulWeights).
//
// Filter panels (`panels`, on unless "panels=off"): filters of convs that
// stream them from memory (few output pixels, bigger than L2) are stored in
// panels, one contiguous block per parallel block of the conv
// (lowering::WeightLayouts::panelStreamingFilters), and matmul weights
// bigger than L2 in panels of the register tiles' columns
// (lowering::WeightLayouts::panelMatmulWeights).
//
// Fused attention (`attention`, on unless "attention=off"): attention's
// two matmuls (softmax(Q Kᵀ) x V, both of activations) in one cluster, run
// by generated code as one loop over blocks of query rows
// (lowering/cpu/strategy/RowFusion.cpp).
//
// Thread-safety: plain values.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>

namespace kiln::ops {

enum class OpMode { kAuto, kJit, kKernel };

/// "auto" | "jit" | "kernel"
const char *opModeName(OpMode mode);

struct PlacementOptions {
  /// Mode by op name ("tosa.conv2d"); the key "*" sets the default.
  std::map<std::string, OpMode> modes;
  /// Time JIT against kernel for `auto` ops both can run (unset: on).
  std::optional<bool> measure;
  /// Winograd 3x3 convs on JIT (unset: on).
  std::optional<bool> winograd;
  /// Padded weight rows for generated code (unset: on).
  std::optional<bool> padRows;
  /// Streamed conv filters and matmul weights stored in panels (unset: on).
  std::optional<bool> panels;
  /// Attention's matmuls and softmax fused (unset: on).
  std::optional<bool> attention;

  bool measuring() const { return measure.value_or(true); }
  bool winogradOn() const { return winograd.value_or(true); }
  bool padRowsOn() const { return padRows.value_or(true); }
  bool panelsOn() const { return panels.value_or(true); }
  bool attentionOn() const { return attention.value_or(true); }

  OpMode modeFor(llvm::StringRef op) const;
  /// "tosa.conv2d=kernel,*=jit" (sorted; ",measure=off", ",winograd=off",
  /// ",padrows=off", ",panels=off", ",attention=off" when off): the cache
  /// key's op-mode part.
  std::string canonical() const;
  bool empty() const { return modes.empty(); }
  /// `other`'s entries override this one's.
  void merge(const PlacementOptions &other);
};

/// Parses "tosa.conv2d=kernel,tosa.gather=jit,*=auto,measure=off,winograd=off,padrows=off,panels=off,
/// attention=off" (also $KILN_OP_MODE).
llvm::Expected<PlacementOptions> parseOpModes(llvm::StringRef spec);

}  // namespace kiln::ops
