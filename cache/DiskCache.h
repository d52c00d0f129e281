// DiskCache: the persistent compile cache, shared by processes.
//
// Layout: <dir>/v1/<2 hex>/<digest>.kiln — one file per compiled function:
//   "KILNCAC2" | u32 metadata bytes | u64 object bytes | u64 XXH3-64 of both
//   | metadata (JSON: every key part, calling convention, types, the
//     execution plan: steps, buffers, kernel attributes, object sizes)
//   | object code (the ELF objects, back to back)
//
// Writes go to a unique temporary file, are fsync'ed and renamed into place
// (atomic: readers see a whole entry or none; concurrent writers of one key
// both succeed). A truncated, corrupted, foreign-version or foreign-key
// entry is never run: it is reported once, removed, and the caller
// recompiles. Hits refresh the file's mtime; when the directory grows past
// its size cap, the least recently used entries are evicted under an
// exclusive flock on <dir>/lock. A directory that cannot be written (read-only,
// full disk) degrades to lookups only, with one warning; no call fails.
//
// Nothing outside the directory is ever read, written, touched or deleted:
// below <dir> (which may itself be a link the user chose) every level is
// opened relative to the one above without following a link (openat,
// O_NOFOLLOW), so a v1/ or shard that is a symlink is skipped, never
// entered; an entry with another hard link is skipped (its mtime is never
// refreshed); only regular files owned by this user that carry a kiln
// header (temporary files: kiln's name pattern and a prefix of a header)
// are deleted. The directory is created 0700, and one that other users can
// write, or that belongs to another user, is refused (memory-only cache):
// the checksum detects corruption, not forgery, and entries are native code.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include "cache/CacheKey.h"

#include "llvm/Support/Chrono.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::cache {

enum class CacheMode { kOff, kReadOnly, kReadWrite };
/// Parsing modes from text is the API's business (kiln::parseCacheMode).
llvm::StringRef cacheModeName(CacheMode mode);

struct DiskCacheOptions {
  std::string dir;                           // required unless mode is off
  CacheMode mode = CacheMode::kReadWrite;
  uint64_t maxBytes = 2ull << 30;            // size cap (LRU eviction above it)
  /// Receives warnings (bad entries, unwritable directory); none: dropped.
  std::function<void(const std::string &)> warn;
};

/// What a cache entry holds besides its key.
struct CachedFunction {
  CacheKeyParts key;
  std::vector<TensorType> inputs, weights, results;
  std::string plan;                  // the execution plan as JSON (jit/PlanJson.h)
  std::vector<std::string> objects;  // ELF bytes of the JIT steps
};

struct DiskCacheStats {
  uint64_t hits = 0, misses = 0, rejected = 0, writes = 0, writeErrors = 0, evictions = 0;
  uint64_t orphansRemoved = 0;  // temporary files of killed writers
};

struct DiskEntryInfo {
  std::string path, digest;
  uint64_t bytes = 0;
  int64_t ageSeconds = 0;
  bool valid = false;
  CacheKeyParts key;    // when valid
  std::string problem;  // why it is not valid
};

class DiskCache {
public:
  /// Never fails: an unusable directory gives a cache in a degraded mode.
  static std::unique_ptr<DiskCache> open(DiskCacheOptions options);

  CacheMode mode() const { return mode_.load(); }
  const std::string &dir() const { return dir_; }

  /// The entry for `key`, or nullopt (miss, or a bad entry that was removed).
  /// `counted`: in stats() (records that are not compiled code, such as
  /// placement decisions, are not).
  std::optional<CachedFunction> load(const CacheKeyParts &key, bool counted = true);
  /// Whether an entry file for `key` exists (not whether it is valid: load
  /// checks that). False with the cache off.
  bool contains(const CacheKeyParts &key) const;
  /// Stores atomically; failures degrade the cache to read-only with a warning.
  void store(const CachedFunction &entry, bool counted = true);

  DiskCacheStats stats() const;
  std::vector<DiskEntryInfo> list() const;
  uint64_t totalBytes() const;
  /// Drops the entry for `key` (one that decoded but cannot serve its key,
  /// e.g. its plan disagrees with the module), with a warning naming `why`.
  void remove(const CacheKeyParts &key, const std::string &why);
  /// Removes every entry; returns how many.
  llvm::Expected<size_t> clear();
  /// For a key: "hit <path>" or why it misses, naming the key part that
  /// differs from the nearest entry.
  std::string explain(const CacheKeyParts &key) const;

  /// Serialization, exposed for tests (fuzzing).
  static std::string encode(const CachedFunction &entry);
  static llvm::Expected<CachedFunction> decode(llvm::StringRef bytes);

private:
  DiskCache() = default;
  std::string pathFor(const std::string &digest) const;
  /// Entry files with sizes and mtimes, without reading them.
  struct File {
    std::string shard, name, path;
    uint64_t bytes;
    llvm::sys::TimePoint<> mtime;
  };
  /// The tree's entries; with `orphans`, also stale temporary files.
  std::vector<File> scan(std::vector<File> *orphans = nullptr) const;
  void warnOnce(const std::string &key, const std::string &message);
  void reject(const std::string &digest, const std::string &why);
  /// Above the size cap: oldest entries go (never `keep`, never a file
  /// that is not a kiln entry); stale temporary files always go.
  void evictIfNeeded(const std::string &keep = "");

  std::string dir_;
  std::atomic<CacheMode> mode_{CacheMode::kOff};
  uint64_t maxBytes_ = 0;
  std::function<void(const std::string &)> warn_;
  mutable std::mutex mu_;
  std::set<std::string> warned_;
  DiskCacheStats stats_;
};

}  // namespace kiln::cache
