// Host memory blocks kept for reuse by size (see HostBlocks.h).
#include "runtime/HostBlocks.h"
#include "runtime/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace kiln {
namespace {

struct Header {
  uint64_t magic;
  size_t sizeClass;  // 0: not cached
  void *raw;         // what std::aligned_alloc returned
};
constexpr size_t kHeader = 64;
static_assert(sizeof(Header) <= kHeader);
constexpr uint64_t kMagic = 0x6b696c6e6a697431ull;  // "kilnjit1"
size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct State {
  std::mutex mu;
  std::map<size_t, std::vector<void *>> free;
  size_t cached = 0;
};
State &state() {
  static State *s = new State();  // never destroyed, like hostBlocks()
  return *s;
}

/// A fresh block for `bytes` (its size class when cached) with the header
/// in front; null when the system has none.
void *fresh(size_t bytes, size_t align, size_t cls) {
  size_t front = roundUp(kHeader, align);
  size_t total = roundUp(bytes + front, align);
  if (total < bytes) return nullptr;  // wrapped
  void *raw = std::aligned_alloc(align, total);
  if (!raw) return nullptr;
  char *user = static_cast<char *>(raw) + front;
  auto *h = reinterpret_cast<Header *>(user - kHeader);
  h->magic = kMagic;
  h->sizeClass = cls;
  h->raw = raw;
  return user;
}

}  // namespace

void *HostBlocks::allocate(size_t bytes, size_t align) {
  if (align < kHeader) align = kHeader;
  if (bytes == 0) bytes = 1;
  // Cached by whole pages, 64-byte aligned blocks only (every caller's).
  size_t cls = align == kHeader && bytes >= kLargeBlock && bytes <= SIZE_MAX / 2 ? roundUp(bytes, 4096) : 0;
  State &s = state();
  if (cls) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.free.find(cls);
    if (it != s.free.end() && !it->second.empty()) {
      void *raw = it->second.back();
      it->second.pop_back();
      s.cached -= cls;
      return static_cast<char *>(raw) + kHeader;
    }
  }
  if (void *p = fresh(cls ? cls : bytes, align, cls)) return p;
  // Memory the free lists hold may be what the system is missing.
  trim();
  return fresh(cls ? cls : bytes, align, cls);
}

namespace {
/// At most kMaxCached, and a quarter of kiln's tensor memory limit where
/// one is set: the cached blocks are memory the limit does not count.
size_t cacheCap() {
  uint64_t limit = tensorMemoryLimit();
  return limit ? std::min<size_t>(HostBlocks::kMaxCached, size_t(limit / 4)) : HostBlocks::kMaxCached;
}
}  // namespace

void HostBlocks::release(void *p) {
  if (!p) return;
  auto *h = reinterpret_cast<Header *>(static_cast<char *>(p) - kHeader);
  if (h->magic != kMagic) std::abort();  // never ours: nothing frees foreign memory here
  if (h->sizeClass) {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.cached + h->sizeClass <= cacheCap()) {
      s.free[h->sizeClass].push_back(h->raw);
      s.cached += h->sizeClass;
      return;
    }
  }
  h->magic = 0;
  std::free(h->raw);
}

void HostBlocks::trim() {
  std::map<size_t, std::vector<void *>> blocks;
  {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    blocks.swap(s.free);
    s.cached = 0;
  }
  for (auto &[cls, raws] : blocks)
    for (void *raw : raws) {
      static_cast<Header *>(raw)->magic = 0;
      std::free(raw);
    }
}

size_t HostBlocks::cachedBytes() const {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.cached;
}

HostBlocks &hostBlocks() {
  static HostBlocks *b = new HostBlocks();
  return *b;
}

}  // namespace kiln
