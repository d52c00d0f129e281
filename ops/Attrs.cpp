#include "ops/Attrs.h"
#include "runtime/Error.h"

#include <cstring>
#include <sstream>

namespace kiln::ops {

namespace {
llvm::Error missing(llvm::StringRef name, const char *kind) {
  return error(ErrorCode::kInvalidArgument, "attribute '%s' (%s) is missing or has another type",
               name.str().c_str(), kind);
}
uint64_t hashBytes(uint64_t h, llvm::StringRef s) {
  for (char c : s) h = hashMix(h, uint64_t(uint8_t(c)));
  return h;
}
}  // namespace

llvm::Expected<int64_t> AttrMap::getInt(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<int64_t>(it->second)) return missing(name, "integer");
  return std::get<int64_t>(it->second);
}
llvm::Expected<double> AttrMap::getFloat(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it != attrs_.end() && std::holds_alternative<double>(it->second)) return std::get<double>(it->second);
  if (it != attrs_.end() && std::holds_alternative<int64_t>(it->second))
    return double(std::get<int64_t>(it->second));
  return missing(name, "float");
}
llvm::Expected<std::vector<int64_t>> AttrMap::getInts(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<std::vector<int64_t>>(it->second))
    return missing(name, "integer list");
  return std::get<std::vector<int64_t>>(it->second);
}
llvm::Expected<std::string> AttrMap::getString(llvm::StringRef name) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<std::string>(it->second)) return missing(name, "string");
  return std::get<std::string>(it->second);
}
int64_t AttrMap::getIntOr(llvm::StringRef name, int64_t fallback) const {
  auto it = attrs_.find(name.str());
  if (it == attrs_.end() || !std::holds_alternative<int64_t>(it->second)) return fallback;
  return std::get<int64_t>(it->second);
}
double AttrMap::getFloatOr(llvm::StringRef name, double fallback) const {
  auto v = getFloat(name);
  if (!v) {
    llvm::consumeError(v.takeError());
    return fallback;
  }
  return *v;
}

std::string AttrMap::str() const {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto &[k, v] : attrs_) {
    os << (first ? "" : ", ") << k << " = ";
    first = false;
    if (auto *i = std::get_if<int64_t>(&v)) os << *i;
    else if (auto *d = std::get_if<double>(&v)) os << *d;
    else if (auto *s = std::get_if<std::string>(&v)) os << '"' << *s << '"';
    else {
      os << "[";
      const auto &l = std::get<std::vector<int64_t>>(v);
      for (size_t j = 0; j < l.size(); ++j) os << (j ? ", " : "") << l[j];
      os << "]";
    }
  }
  os << "}";
  return os.str();
}

uint64_t hashAttr(uint64_t h, AttrName name, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  return hashMix(hashMix(h, name.hash), bits);
}
uint64_t hashAttr(uint64_t h, AttrName name, llvm::ArrayRef<int64_t> v) {
  h = hashMix(h, name.hash);
  for (int64_t x : v) h = hashMix(h, uint64_t(x));
  return h;
}
uint64_t hashAttr(uint64_t h, AttrName name, llvm::StringRef v) { return hashBytes(hashMix(h, name.hash), v); }

uint64_t hashAttr(uint64_t h, AttrName name, const Attr &v) {
  if (auto *i = std::get_if<int64_t>(&v)) return hashAttr(h, name, *i);
  if (auto *d = std::get_if<double>(&v)) return hashAttr(h, name, *d);
  if (auto *s = std::get_if<std::string>(&v)) return hashAttr(h, name, llvm::StringRef(*s));
  return hashAttr(h, name, llvm::ArrayRef<int64_t>(std::get<std::vector<int64_t>>(v)));
}

uint64_t AttrMap::hash() const {
  uint64_t h = kAttrHashSeed;
  for (const auto &[k, v] : attrs_) h = hashAttr(h, AttrName(llvm::StringRef(k)), v);
  return h;
}

}  // namespace kiln::ops
