// Op attributes as the runtime sees them: a small typed map (integer, float,
// integer list, string) taken from an MLIR op by the partitioner, built by
// eager calls, read by kernels and written back to MLIR by the IR builder.
// No MLIR here.
//
// Thread-safety: a value type; const methods may run concurrently.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::ops {

/// An attribute value: integer (also bool/enum index), float, integer list, or string.
using Attr = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

class AttrMap {
public:
  void set(const std::string &name, Attr value) { attrs_[name] = std::move(value); }
  bool has(llvm::StringRef name) const { return attrs_.count(name.str()) != 0; }
  void erase(llvm::StringRef name) { attrs_.erase(name.str()); }
  llvm::Expected<int64_t> getInt(llvm::StringRef name) const;
  llvm::Expected<double> getFloat(llvm::StringRef name) const;  // ints convert
  llvm::Expected<std::vector<int64_t>> getInts(llvm::StringRef name) const;
  llvm::Expected<std::string> getString(llvm::StringRef name) const;
  int64_t getIntOr(llvm::StringRef name, int64_t fallback) const;
  double getFloatOr(llvm::StringRef name, double fallback) const;
  const std::map<std::string, Attr> &all() const { return attrs_; }
  /// "{axis = 1, perms = [1, 0]}", stable order.
  std::string str() const;
  /// A hash of names and values (eager dispatch keys).
  uint64_t hash() const;

private:
  std::map<std::string, Attr> attrs_;
};

/// Hash mixing shared by attribute and dispatch keys.
constexpr uint64_t hashMix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/// An attribute name with its hash; constexpr, so typed eager ops hash
/// their attribute names at compile time.
struct AttrName {
  std::string_view name;
  uint64_t hash;
  constexpr AttrName(const char *n) : name(n), hash(hashOf(n)) {}
  AttrName(llvm::StringRef n) : name(n.data(), n.size()), hash(hashOf(name)) {}

private:
  static constexpr uint64_t hashOf(std::string_view n) {
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (size_t i = 0; i < n.size(); ++i) h = hashMix(h, uint64_t(uint8_t(n[i])));
    return h;
  }
};

/// Hash of one (name, value) attribute; AttrMap::hash folds these in name
/// order. The typed overloads hash exactly as the Attr holding that value
/// would, so a typed eager op and a generic call with the same attributes get
/// the same key without building a map.
uint64_t hashAttr(uint64_t seed, AttrName name, const Attr &value);
inline uint64_t hashAttr(uint64_t seed, AttrName name, int64_t value) {
  return hashMix(hashMix(seed, name.hash), uint64_t(value));
}
uint64_t hashAttr(uint64_t seed, AttrName name, double value);
uint64_t hashAttr(uint64_t seed, AttrName name, llvm::ArrayRef<int64_t> value);
uint64_t hashAttr(uint64_t seed, AttrName name, llvm::StringRef value);
/// The seed AttrMap::hash starts from.
inline constexpr uint64_t kAttrHashSeed = 0x51ed2701u;

}  // namespace kiln::ops
