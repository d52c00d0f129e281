#include "cache/CacheKey.h"

#include "SourceId.h"

#include "llvm/Config/llvm-config.h"

#include <xxhash.h>

#include <cstdio>

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif
#ifndef KILN_SOURCE_ID
#define KILN_SOURCE_ID "unknown"
#endif

namespace kiln::cache {

ShapeSignature ShapeSignature::of(llvm::ArrayRef<Tensor> inputs) {
  ShapeSignature s;
  for (const Tensor &t : inputs) {
    llvm::ArrayRef<int64_t> dims = t.shape();
    s.words_.push_back(int64_t(t.dtype()) | (int64_t(dims.size()) << 8));
    s.words_.append(dims.begin(), dims.end());
  }
  s.finish();
  return s;
}

ShapeSignature ShapeSignature::of(llvm::ArrayRef<TensorType> inputs) {
  ShapeSignature s;
  for (const TensorType &t : inputs) {
    s.words_.push_back(int64_t(t.dtype) | (int64_t(t.shape.size()) << 8));
    s.words_.append(t.shape.begin(), t.shape.end());
  }
  s.finish();
  return s;
}

void ShapeSignature::finish() {
  hash_ = XXH3_64bits(words_.data(), words_.size() * sizeof(int64_t));
}

std::string ShapeSignature::str() const {
  std::string out;
  for (size_t i = 0; i < words_.size();) {
    auto dtype = DType(words_[i] & 0xff);
    size_t rank = size_t(words_[i] >> 8);
    if (!out.empty()) out += ",";
    TensorType t{dtype, Shape(words_.begin() + i + 1, words_.begin() + i + 1 + rank)};
    out += t.str();
    i += 1 + rank;
  }
  return out;
}

std::vector<std::pair<const char *, const std::string *>> CacheKeyParts::fields() const {
  return {{"graph", &graph},       {"function", &function},   {"signature", &signature},
          {"target", &target},     {"pipeline", &pipeline},   {"op_modes", &opModes},
          {"kiln_version", &kilnVersion}, {"llvm_version", &llvmVersion}};
}

std::string CacheKeyParts::digest() const {
  std::string all;
  for (auto [name, value] : fields()) {
    all += name;
    all += '\0';
    all += *value;
    all += '\0';
  }
  return hash128Hex(all);
}

std::string CacheKeyParts::firstDifference(const CacheKeyParts &other) const {
  auto a = fields(), b = other.fields();
  for (size_t i = 0; i < a.size(); ++i)
    if (*a[i].second != *b[i].second) return a[i].first;
  return "";
}

size_t CacheKeyParts::numEqualParts(const CacheKeyParts &other) const {
  auto a = fields(), b = other.fields();
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += *a[i].second == *b[i].second;
  return n;
}

std::string hash128Hex(llvm::StringRef bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)h.high64,
                (unsigned long long)h.low64);
  return buf;
}

uint64_t hash64(llvm::StringRef bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string kilnVersion() { return std::string(KILN_VERSION) + "+" + KILN_SOURCE_ID; }

}  // namespace kiln::cache
