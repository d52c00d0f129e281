// MemoryCache: a bounded in-memory map from a key digest to a shared,
// immutable value, evicting the least recently used entry when full.
// A store, no policy: what goes in, when, and what happens on a miss is the
// compile service's business (jit/CompileService.h).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <memory>
#include <mutex>

namespace kiln::cache {

template <typename V> class MemoryCache {
public:
  using Value = std::shared_ptr<const V>;
  explicit MemoryCache(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  size_t capacity() const { return capacity_; }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }
  uint64_t evictions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return evictions_;
  }

  /// Whether a value is stored under `digest` (its use not refreshed).
  bool contains(llvm::StringRef digest) const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.find(digest) != entries_.end();
  }

  /// The value stored under `digest` (refreshing its use), or null.
  Value get(llvm::StringRef digest) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(digest);
    if (it == entries_.end()) return nullptr;
    it->second.lastUse = ++tick_;
    return it->second.value;
  }

  /// Stores `value` (replacing any), then evicts least recently used
  /// entries other than this one while over capacity.
  void put(llvm::StringRef digest, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry &e = entries_[digest];
    e.value = std::move(value);
    e.lastUse = ++tick_;
    while (entries_.size() > capacity_) {
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->first() != digest && (victim == entries_.end() || it->second.lastUse < victim->second.lastUse))
          victim = it;
      if (victim == entries_.end()) break;
      entries_.erase(victim);
      ++evictions_;
    }
  }

private:
  struct Entry {
    Value value;
    uint64_t lastUse = 0;
  };
  size_t capacity_;
  mutable std::mutex mu_;
  llvm::StringMap<Entry> entries_;
  uint64_t tick_ = 0, evictions_ = 0;
};

}  // namespace kiln::cache
