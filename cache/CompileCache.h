// CompileCache: the runtime-wide cache of compiled functions.
//
// In memory: one entry per full key digest, single flight (concurrent
// requests for one key produce it once; the others wait on the same future),
// bounded with least-recently-used eviction. Behind it, the DiskCache.
// `produce` (supplied by the runtime) looks on disk and compiles on a miss.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "jit/Compiler.h"
#include "runtime/AsyncValue.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <mutex>

namespace kiln::cache {

struct CompileCacheStats {
  uint64_t memoryHits = 0, memoryMisses = 0;  // by full key
  uint64_t diskHits = 0, compiles = 0, compileFailures = 0, evictions = 0;
  uint64_t jitFallbacks = 0;  // JIT clusters that failed to compile and ran on kernels
  double compileMs = 0;   // total time spent compiling
  double diskLoadMs = 0;  // total time loading entries from disk
  DiskCacheStats disk;
};

class CompileCache {
public:
  using Value = std::shared_ptr<const jit::CompiledFunction>;
  CompileCache(size_t capacity, DiskCacheOptions disk);

  DiskCache &disk() { return *disk_; }
  size_t capacity() const { return capacity_; }
  size_t size() const;
  CompileCacheStats stats() const;

  /// The value for `key`: from memory, or produced once by `produce` while
  /// concurrent callers with the same key wait for it. Failures are not cached.
  llvm::Expected<Value> getOrProduce(const CacheKeyParts &key,
                                     llvm::function_ref<llvm::Expected<Value>()> produce);
  /// Accounting for `produce`.
  void recordDiskHit(double ms);
  void recordCompile(double ms, bool ok, int jitFallbacks = 0);

private:
  struct Entry {
    AsyncValueRef<Value> value;
    uint64_t lastUse = 0;
  };
  size_t capacity_;
  std::unique_ptr<DiskCache> disk_;
  mutable std::mutex mu_;
  llvm::StringMap<Entry> entries_;
  uint64_t tick_ = 0;
  CompileCacheStats stats_;
};

}  // namespace kiln::cache
