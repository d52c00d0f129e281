// Compile-cache keys.
//
// ShapeSignature: the in-memory key of one call's inputs (dtype, rank and
// dims of each), packed in place and hashed with XXH3: building and hashing
// one allocates nothing for up to 16 words (e.g. 4 inputs of rank 3).
//
// CacheKeyParts: everything a compiled function depends on, stored in every
// disk entry and compared field by field on load, so that no component can
// be missing from the key: the canonical graph (weights' values excluded),
// the shape signature, the target (triple, CPU, features), the pipeline and
// its options, per-op modes, kiln's version and LLVM's version.
//
// Thread-safety: plain values.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cache {

class ShapeSignature {
public:
  static ShapeSignature of(llvm::ArrayRef<Tensor> inputs);
  static ShapeSignature of(llvm::ArrayRef<TensorType> inputs);
  uint64_t hash() const { return hash_; }
  bool operator==(const ShapeSignature &o) const { return hash_ == o.hash_ && words_ == o.words_; }
  /// "1x8xf32,4xi32"
  std::string str() const;

private:
  void finish();
  llvm::SmallVector<int64_t, 16> words_;  // per input: dtype | rank << 8, then dims
  uint64_t hash_ = 0;
};

struct CacheKeyParts {
  std::string graph;        // XXH3-128 of lowering::Program::canonicalGraph, hex
  std::string function;
  std::string signature;    // ShapeSignature::str()
  std::string target;       // "triple cpu features"
  std::string pipeline;     // XXH3-128 of the pipeline text + options, hex
  std::string opModes;      // per-op JIT/kernel modes ("" = all JIT)
  std::string kilnVersion;
  std::string llvmVersion;

  /// The parts as (name, value) pairs, in a fixed order.
  std::vector<std::pair<const char *, const std::string *>> fields() const;
  /// XXH3-128 over all parts: the entry's file name.
  std::string digest() const;
  /// Name of the first part that differs from `other` ("" if equal).
  std::string firstDifference(const CacheKeyParts &other) const;
  size_t numEqualParts(const CacheKeyParts &other) const;
};

/// XXH3-128 of `bytes` as 32 hex digits.
std::string hash128Hex(llvm::StringRef bytes);
/// XXH3-64 of `bytes`.
uint64_t hash64(llvm::StringRef bytes);
/// kiln's version string (project version + the build's source id).
std::string kilnVersion();

}  // namespace kiln::cache
