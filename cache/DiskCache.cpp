#include "cache/DiskCache.h"
#include "runtime/Error.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cache {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', '2'};
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8;
constexpr const char *kLayout = "v1";
constexpr const char *kSuffix = ".kiln";
/// Temporary files of writers killed before their rename are removed after this long.
constexpr auto kOrphanAge = std::chrono::hours(1);

bool isHex(llvm::StringRef s) { return llvm::all_of(s, [](char c) { return llvm::isHexDigit(c) && !llvm::isUpper(c); }); }

/// lstat: no symlink is ever followed inside the cache tree.
bool lstatRegular(const std::string &path, struct stat &st) {
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Whether `path` is a regular file (not a link) starting with a kiln cache
/// header: the only files the cache ever deletes.
bool isOurEntry(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  char magic[7] = {};
  bool ours = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::read(fd, magic, 7) == 7 &&
              std::memcmp(magic, kMagic, 7) == 0;
  ::close(fd);
  return ours;
}

template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof(T));
}
template <typename T> T get(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

nlohmann::json typesToJson(const std::vector<TensorType> &types) {
  nlohmann::json a = nlohmann::json::array();
  for (const TensorType &t : types) a.push_back(t.str());
  return a;
}

llvm::Expected<std::vector<TensorType>> typesFromJson(const nlohmann::json &a) {
  std::vector<TensorType> out;
  for (const auto &v : a) {
    auto t = parseTensorType(v.get<std::string>());
    if (!t) return t.takeError();
    out.push_back(*t);
  }
  return out;
}

std::string errnoText() { return std::strerror(errno); }

/// Writes all of `data` to `fd`.
bool writeAll(int fd, llvm::StringRef data) {
  const char *p = data.data();
  size_t left = data.size();
  while (left) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= size_t(n);
  }
  return true;
}


}  // namespace

llvm::StringRef cacheModeName(CacheMode m) {
  switch (m) {
  case CacheMode::kOff: return "off";
  case CacheMode::kReadOnly: return "read-only";
  case CacheMode::kReadWrite: return "read-write";
  }
  return "?";
}

std::string DiskCache::encode(const CachedFunction &e) {
  nlohmann::json meta;
  nlohmann::json key;
  for (auto [name, value] : e.key.fields()) key[name] = *value;
  meta["key"] = key;
  meta["calling_convention"] = "each JIT step: entry(void **buffers) over its inputs, then outputs";
  meta["inputs"] = typesToJson(e.inputs);
  meta["weights"] = typesToJson(e.weights);
  meta["results"] = typesToJson(e.results);
  meta["plan"] = e.plan;
  std::string objects;
  nlohmann::json sizes = nlohmann::json::array();
  for (const std::string &o : e.objects) {
    sizes.push_back(o.size());
    objects += o;
  }
  meta["object_sizes"] = sizes;
  std::string m = meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // names from models may be any bytes
  std::string out(kMagic, 8);
  put<uint32_t>(out, uint32_t(m.size()));
  put<uint64_t>(out, uint64_t(objects.size()));
  put<uint64_t>(out, hash64(m + objects));
  out += m;
  out += objects;
  return out;
}

llvm::Expected<CachedFunction> DiskCache::decode(llvm::StringRef bytes) {
  if (bytes.size() < kHeaderBytes) return error(ErrorCode::kIO, "truncated header");
  if (std::memcmp(bytes.data(), kMagic, 7) != 0) return error(ErrorCode::kIO, "not a kiln cache entry");
  if (bytes[7] != kMagic[7])
    return error(ErrorCode::kIO, "entry format version '%c', this kiln reads '%c'", bytes[7], kMagic[7]);
  uint32_t metaLen = get<uint32_t>(bytes.data() + 8);
  uint64_t objLen = get<uint64_t>(bytes.data() + 12);
  uint64_t sum = get<uint64_t>(bytes.data() + 20);
  if (uint64_t(kHeaderBytes) + metaLen + objLen != bytes.size())
    return error(ErrorCode::kIO, "size %zu does not match its header (%llu)", bytes.size(),
                                   (unsigned long long)(kHeaderBytes + metaLen + objLen));
  llvm::StringRef body = bytes.drop_front(kHeaderBytes);
  if (hash64(body) != sum) return error(ErrorCode::kIO, "checksum mismatch");
  CachedFunction e;
  try {
    auto meta = nlohmann::json::parse(body.substr(0, metaLen).str());
    auto key = meta.at("key");
    CacheKeyParts parts;
    for (auto [name, value] : parts.fields()) *const_cast<std::string *>(value) = key.at(name).get<std::string>();
    e.key = parts;
    e.plan = meta.at("plan").get<std::string>();
    uint64_t at = 0;
    for (uint64_t size : meta.at("object_sizes").get<std::vector<uint64_t>>()) {
      if (at + size > objLen) return error(ErrorCode::kIO, "object sizes exceed the payload");
      e.objects.push_back(body.substr(metaLen + at, size).str());
      at += size;
    }
    if (at != objLen) return error(ErrorCode::kIO, "object sizes do not add up to the payload");
    auto in = typesFromJson(meta.at("inputs"));
    auto w = typesFromJson(meta.at("weights"));
    auto r = typesFromJson(meta.at("results"));
    if (!in) return in.takeError();
    if (!w) return w.takeError();
    if (!r) return r.takeError();
    e.inputs = *in;
    e.weights = *w;
    e.results = *r;
  } catch (const std::exception &ex) {
    return error(ErrorCode::kIO, "bad metadata: %s", ex.what());
  }
  return e;
}

std::unique_ptr<DiskCache> DiskCache::open(DiskCacheOptions options) {
  std::unique_ptr<DiskCache> c(new DiskCache());
  c->warn_ = options.warn ? options.warn : [](const std::string &) {};
  c->dir_ = options.dir;
  c->maxBytes_ = options.maxBytes;
  CacheMode mode = options.mode;
  if (mode == CacheMode::kOff) return c;
  if (c->dir_.empty()) {
    c->warnOnce("dir", "no compile cache directory was given; compiled code is cached in memory only");
    return c;
  }
  std::string layout = c->dir_ + "/" + kLayout;
  if (mode == CacheMode::kReadWrite) {
    if (auto ec = llvm::sys::fs::create_directories(layout)) {
      c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' cannot be created (" +
                             ec.message() + "); compiled code is cached in memory only");
      mode = llvm::sys::fs::is_directory(layout) ? CacheMode::kReadOnly : CacheMode::kOff;
    } else if (::access(layout.c_str(), W_OK) != 0) {
      c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' is not writable (" +
                             errnoText() + "); using it read-only");
      mode = CacheMode::kReadOnly;
    }
  }
  c->mode_ = mode;
  return c;
}

std::string DiskCache::pathFor(const std::string &digest) const {
  return dir_ + "/" + kLayout + "/" + digest.substr(0, 2) + "/" + digest + kSuffix;
}

void DiskCache::warnOnce(const std::string &key, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!warned_.insert(key).second) return;
  }
  warn_(message);
}

void DiskCache::reject(const std::string &path, const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected;
  }
  warnOnce("reject:" + path, "compile cache entry '" + path + "' rejected (" + why +
                                 "); it is removed and the function recompiled");
  // Only files that carry a kiln header are removed; anything else at an
  // entry's path is left to be replaced by the next write (rename).
  if (mode_.load() == CacheMode::kReadWrite && isOurEntry(path)) ::unlink(path.c_str());
}

std::optional<CachedFunction> DiskCache::load(const CacheKeyParts &key) {
  if (mode_.load() == CacheMode::kOff) return std::nullopt;
  std::string path = pathFor(key.digest());
  auto miss = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return std::nullopt;
  };
  // A regular file, not a link, FIFO or device, and not larger than the cache.
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + errnoText() + ")");
    return miss();
  }
  if (!S_ISREG(st.st_mode)) {
    warnOnce("kind:" + path, "compile cache entry '" + path +
                                 "' is not a regular file; it is skipped (and replaced by the next write)");
    return miss();
  }
  if (uint64_t(st.st_size) > std::max<uint64_t>(maxBytes_, kHeaderBytes)) {
    reject(path, "it is larger than the cache's size cap");
    return miss();
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + errnoText() + ")");
    return miss();
  }
  auto buf = llvm::MemoryBuffer::getOpenFile(fd, path, st.st_size, /*RequiresNullTerminator=*/false);
  ::close(fd);
  if (!buf) {
    warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + buf.getError().message() + ")");
    return miss();
  }
  auto entry = decode((*buf)->getBuffer());
  if (!entry) {
    reject(path, llvm::toString(entry.takeError()));
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return std::nullopt;
  }
  if (std::string part = entry->key.firstDifference(key); !part.empty()) {
    reject(path, "its key part '" + part + "' differs from the request");
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return std::nullopt;
  }
  if (mode_.load() == CacheMode::kReadWrite) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hits;
  return std::move(*entry);
}

void DiskCache::store(const CachedFunction &entry) {
  if (mode_.load() != CacheMode::kReadWrite) return;
  std::string path = pathFor(entry.key.digest());
  std::string dir = llvm::sys::path::parent_path(path).str();
  auto fail = [&](const std::string &what) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.writeErrors;
    }
    mode_ = CacheMode::kReadOnly;
    warnOnce("write", "cannot write the compile cache in '" + dir_ + "' (" + what +
                          "); compiled code is cached in memory only from now on");
  };
  if (auto ec = llvm::sys::fs::create_directories(dir)) return fail(ec.message());
  static std::atomic<uint64_t> counter{0};
  std::string tmp = dir + "/.tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++) + "." + entry.key.digest().substr(0, 8);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errnoText());
  std::string bytes = encode(entry);
  bool ok = writeAll(fd, bytes) && ::fsync(fd) == 0;
  std::string err = ok ? "" : errnoText();
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (err.empty()) err = errnoText();
    ::unlink(tmp.c_str());
    return fail(err);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.writes;
  }
  evictIfNeeded(path);
}

std::vector<DiskCache::File> DiskCache::scan(std::vector<File> *orphans) const {
  // Exactly <dir>/v1/<2 hex>/<32 hex>.kiln: real directories and regular
  // files only, never a symlink, never anything else in the tree.
  std::vector<File> files;
  if (mode_.load() == CacheMode::kOff) return files;
  std::string root = dir_ + "/" + kLayout;
  auto mtimeOf = [](const struct stat &st) {
    auto t = llvm::sys::toTimePoint(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    auto now = std::chrono::system_clock::now();
    return t > now ? llvm::sys::TimePoint<>(now) : llvm::sys::TimePoint<>(t);  // future mtimes count as now
  };
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator shard(root, ec), end; shard != end && !ec; shard.increment(ec)) {
    llvm::StringRef shardName = llvm::sys::path::filename(shard->path());
    struct stat sst;
    if (shardName.size() != 2 || !isHex(shardName) || ::lstat(shard->path().c_str(), &sst) != 0 ||
        !S_ISDIR(sst.st_mode))
      continue;
    std::error_code ec2;
    for (llvm::sys::fs::directory_iterator it(shard->path(), ec2), end2; it != end2 && !ec2; it.increment(ec2)) {
      std::string path = it->path();
      llvm::StringRef name = llvm::sys::path::filename(path);
      struct stat st;
      if (!lstatRegular(path, st)) continue;
      if (name.starts_with(".tmp.")) {
        if (orphans && std::chrono::system_clock::now() - mtimeOf(st) > kOrphanAge)
          orphans->push_back({path, uint64_t(st.st_size), mtimeOf(st)});
        continue;
      }
      llvm::StringRef digest = name;
      if (!digest.consume_back(kSuffix) || digest.size() != 32 || !isHex(digest) || !digest.starts_with(shardName))
        continue;
      files.push_back({path, uint64_t(st.st_size), mtimeOf(st)});
    }
  }
  return files;
}

std::vector<DiskEntryInfo> DiskCache::list() const {
  std::vector<DiskEntryInfo> out;
  auto now = std::chrono::system_clock::now();
  for (const File &f : scan()) {
    DiskEntryInfo info;
    info.path = f.path;
    info.digest = llvm::sys::path::stem(f.path).str();
    info.bytes = f.bytes;
    info.ageSeconds = std::chrono::duration_cast<std::chrono::seconds>(now - f.mtime).count();
    auto buf = llvm::MemoryBuffer::getFile(f.path, false, false);
    if (!buf) {
      info.problem = buf.getError().message();
    } else if (auto e = decode((*buf)->getBuffer())) {
      info.valid = true;
      info.key = e->key;
    } else {
      info.problem = llvm::toString(e.takeError());
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](auto &a, auto &b) { return a.ageSeconds < b.ageSeconds; });
  return out;
}

uint64_t DiskCache::totalBytes() const {
  uint64_t total = 0;
  for (const File &f : scan()) total += f.bytes;
  return total;
}

void DiskCache::evictIfNeeded(const std::string &keep) {
  std::vector<File> orphans;
  std::vector<File> files = scan(&orphans);
  uint64_t total = 0;
  for (const File &f : files) total += f.bytes;
  if (total <= maxBytes_ && orphans.empty()) return;
  std::string lockPath = dir_ + "/lock";
  int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another process is evicting
    ::close(fd);
    return;
  }
  size_t evicted = 0, cleaned = 0;
  for (const File &f : orphans)  // writers killed before their rename
    if (::unlink(f.path.c_str()) == 0) ++cleaned;
  // Only kiln entries count and can go: a foreign file with an entry's name
  // neither triggers eviction nor is removed.
  files.erase(std::remove_if(files.begin(), files.end(), [](const File &f) { return !isOurEntry(f.path); }),
              files.end());
  total = 0;
  for (const File &f : files) total += f.bytes;
  // Oldest first; an entry larger than the whole cap goes first whatever its
  // age; the entry just written stays.
  std::sort(files.begin(), files.end(), [&](const File &a, const File &b) {
    bool ha = a.bytes > maxBytes_, hb = b.bytes > maxBytes_;
    return ha != hb ? ha : a.mtime < b.mtime;
  });
  uint64_t target = maxBytes_ / 10 * 9;
  for (const File &f : files) {
    if (total <= target) break;
    if (f.path == keep) continue;
    if (::unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      ++evicted;
    }
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.evictions += evicted;
  stats_.orphansRemoved += cleaned;
}

DiskCacheStats DiskCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

llvm::Expected<size_t> DiskCache::clear() {
  if (mode_.load() != CacheMode::kReadWrite)
    return error(ErrorCode::kIO, "the compile cache in '%s' is %s; cannot clear it",
                                   dir_.c_str(), cacheModeName(mode_.load()).str().c_str());
  size_t n = 0;
  std::vector<File> orphans;
  for (const File &f : scan(&orphans))
    if (isOurEntry(f.path) && ::unlink(f.path.c_str()) == 0) ++n;
  for (const File &f : orphans) ::unlink(f.path.c_str());
  return n;
}

std::string DiskCache::explain(const CacheKeyParts &key) const {
  if (mode_.load() == CacheMode::kOff) return "miss: the disk cache is off";
  std::string path = pathFor(key.digest());
  std::optional<CacheKeyParts> nearest;
  std::string nearestPath;
  for (const DiskEntryInfo &info : list()) {
    if (!info.valid) continue;
    if (info.path == path && info.key.firstDifference(key).empty()) return "hit: " + path;
    if (!nearest || info.key.numEqualParts(key) > nearest->numEqualParts(key)) {
      nearest = info.key;
      nearestPath = info.path;
    }
  }
  if (!nearest) return "miss: the cache in '" + dir_ + "' has no entries";
  std::string out = "miss: nearest entry " + nearestPath + " differs in";
  auto a = nearest->fields(), b = key.fields();
  for (size_t i = 0; i < a.size(); ++i)
    if (*a[i].second != *b[i].second) {
      std::string have = *a[i].second, want = *b[i].second;
      auto clip = [](std::string s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; };
      out += std::string("\n  ") + a[i].first + ": entry has '" + clip(have) + "', request has '" +
             clip(want) + "'";
    }
  return out;
}

}  // namespace kiln::cache
