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
#include <dirent.h>
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

/// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd &operator=(Fd &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  explicit operator bool() const { return fd >= 0; }
};

/// The directory `name` inside `parent`, never through a symlink
/// (O_NOFOLLOW: a link at that name fails with ELOOP or ENOTDIR); with
/// `create`, made (0700) when missing.
Fd openDirAt(int parent, const char *name, bool create) {
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (::mkdirat(parent, name, 0700) != 0 && errno != EEXIST) return Fd();
    fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  return Fd(fd);
}

/// Whether a temporary file's name is one kiln writes: ".tmp.<pid>.<n>.<8 hex>".
bool isOurTempName(llvm::StringRef name) {
  if (!name.consume_front(".tmp.")) return false;
  llvm::SmallVector<llvm::StringRef, 3> parts;
  name.split(parts, '.');
  return parts.size() == 3 && !parts[0].empty() && llvm::all_of(parts[0], llvm::isDigit) && !parts[1].empty() &&
         llvm::all_of(parts[1], llvm::isDigit) && parts[2].size() == 8 && isHex(parts[2]);
}

/// Whether `name` in the directory `dirfd` is a file the cache may delete:
/// a regular file (not a link) with no other hard link, owned by this user,
/// that starts with a kiln cache header (for a temporary file of a killed
/// writer: whatever prefix of one it got to write, possibly nothing).
bool isOurs(int dirfd, const char *name, bool temporary) {
  Fd fd(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return false;
  struct stat st;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != ::geteuid())
    return false;
  char magic[7] = {};
  ssize_t n = ::read(fd.fd, magic, 7);
  if (n == 7) return std::memcmp(magic, kMagic, 7) == 0;
  return temporary && n >= 0 && n == st.st_size && std::memcmp(magic, kMagic, size_t(n)) == 0;
}

/// The cache's directory (which may be a link the user chose).
Fd openRoot(const std::string &dir) { return Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); }

/// <dir>/v1/<shard>, each level below the root opened without following a link.
Fd openShard(const std::string &dir, const std::string &shard, bool create) {
  Fd root = openRoot(dir);
  if (!root) return Fd();
  Fd layout = openDirAt(root.fd, kLayout, create);
  if (!layout) return Fd();
  return openDirAt(layout.fd, shard.c_str(), create);
}

/// Removes <dir>/v1/<shard>/<name> if it is a file the cache may delete (isOurs).
bool removeIfOurs(const std::string &dir, const std::string &shard, const std::string &name, bool temporary) {
  Fd d = openShard(dir, shard, /*create=*/false);
  return d && isOurs(d.fd, name.c_str(), temporary) && ::unlinkat(d.fd, name.c_str(), 0) == 0;
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
  auto memoryOnly = [&](const std::string &why) {
    c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' " + why + "; compiled code is cached in memory only");
    return std::move(c);
  };
  // The directory itself may be a link the user chose; it is made private to
  // its user (0700), and one that others can write is refused: an entry is
  // native code that kiln runs (its checksum detects corruption, not forgery).
  if (mode == CacheMode::kReadWrite && !llvm::sys::fs::is_directory(c->dir_))
    if (auto ec = llvm::sys::fs::create_directories(c->dir_, /*IgnoreExisting=*/true, llvm::sys::fs::perms::owner_all)) {
      c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' cannot be created (" + ec.message() +
                             "); compiled code is cached in memory only");
      return c;
    }
  Fd root = openRoot(c->dir_);
  if (!root) {
    if (mode == CacheMode::kReadWrite || errno != ENOENT)
      return memoryOnly("cannot be opened (" + errnoText() + ")");
    c->mode_ = CacheMode::kReadOnly;  // read-only and absent: nothing to find yet
    return c;
  }
  struct stat st;
  if (::fstat(root.fd, &st) != 0) return memoryOnly("cannot be read (" + errnoText() + ")");
  if (st.st_uid != ::geteuid())
    return memoryOnly("belongs to another user (uid " + std::to_string(st.st_uid) + ")");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char perms[8];
    std::snprintf(perms, sizeof(perms), "%04o", unsigned(st.st_mode & 07777));
    return memoryOnly(std::string("can be written by other users (mode ") + perms +
                      "; cached code is run as it is found: make it private with chmod 700)");
  }
  // Below it, no level may be a link: v1/ and its shards are real directories.
  Fd layout = openDirAt(root.fd, kLayout, mode == CacheMode::kReadWrite);
  if (!layout && errno != ENOENT)
    return memoryOnly(std::string("has a '") + kLayout + "' that is not a directory of its own (" +
                      (errno == ELOOP || errno == ENOTDIR ? std::string("a symbolic link or a file") : errnoText()) + ")");
  if (mode == CacheMode::kReadWrite) {
    if (!layout) {
      c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' cannot be created (" + errnoText() +
                             "); compiled code is cached in memory only");
      mode = CacheMode::kOff;
    } else if (::faccessat(root.fd, kLayout, W_OK, AT_SYMLINK_NOFOLLOW) != 0 && ::faccessat(root.fd, kLayout, W_OK, 0) != 0) {
      c->warnOnce("dir", "compile cache directory '" + c->dir_ + "' is not writable (" + errnoText() +
                             "); using it read-only");
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

void DiskCache::reject(const std::string &digest, const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected;
  }
  std::string path = pathFor(digest);
  warnOnce("reject:" + path, "compile cache entry '" + path + "' rejected (" + why +
                                 "); it is removed and the function recompiled");
  // Only files that carry a kiln header are removed; anything else at an
  // entry's path is left to be replaced by the next write (rename).
  if (mode_.load() == CacheMode::kReadWrite) removeIfOurs(dir_, digest.substr(0, 2), digest + kSuffix, false);
}

void DiskCache::remove(const CacheKeyParts &key, const std::string &why) { reject(key.digest(), why); }

bool DiskCache::contains(const CacheKeyParts &key) const {
  if (mode_.load() == CacheMode::kOff) return false;
  struct stat st;
  return ::lstat(pathFor(key.digest()).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<CachedFunction> DiskCache::load(const CacheKeyParts &key, bool counted) {
  if (mode_.load() == CacheMode::kOff) return std::nullopt;
  std::string digest = key.digest(), path = pathFor(digest), name = digest + kSuffix;
  auto miss = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.misses += counted;
    return std::nullopt;
  };
  // Every level opened without following a link; the entry a regular file,
  // not a link, FIFO or device, with no other hard link (its mtime is
  // refreshed on a hit, which would touch the other name's file too), and
  // not larger than the cache.
  Fd dir = openShard(dir_, digest.substr(0, 2), /*create=*/false);
  if (!dir) {
    if (errno == ELOOP || errno == ENOTDIR)
      warnOnce("kind:" + path, "compile cache directory '" + llvm::sys::path::parent_path(path).str() +
                                   "' is not a directory of its own (a symbolic link or a file); it is skipped");
    else if (errno != ENOENT)
      warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + errnoText() + ")");
    return miss();
  }
  Fd fd(::openat(dir.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ELOOP)
      warnOnce("kind:" + path, "compile cache entry '" + path +
                                   "' is not a regular file; it is skipped (and replaced by the next write)");
    else if (errno != ENOENT)
      warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + errnoText() + ")");
    return miss();
  }
  struct stat st;
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    warnOnce("kind:" + path, "compile cache entry '" + path +
                                 "' is not a regular file; it is skipped (and replaced by the next write)");
    return miss();
  }
  if (st.st_nlink != 1) {
    warnOnce("kind:" + path, "compile cache entry '" + path + "' has " + std::to_string(st.st_nlink) +
                                 " hard links (kiln writes one); it is skipped (and replaced by the next write)");
    return miss();
  }
  if (uint64_t(st.st_size) > std::max<uint64_t>(maxBytes_, kHeaderBytes)) {
    reject(digest, "it is larger than the cache's size cap");
    return miss();
  }
  auto buf = llvm::MemoryBuffer::getOpenFile(fd.fd, path, st.st_size, /*RequiresNullTerminator=*/false);
  if (!buf) {
    warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" + buf.getError().message() + ")");
    return miss();
  }
  auto entry = decode((*buf)->getBuffer());
  if (!entry) {
    reject(digest, llvm::toString(entry.takeError()));
    return miss();
  }
  if (std::string part = entry->key.firstDifference(key); !part.empty()) {
    reject(digest, "its key part '" + part + "' differs from the request");
    return miss();
  }
  if (mode_.load() == CacheMode::kReadWrite) ::futimens(fd.fd, nullptr);  // the file just checked, not a name
  std::lock_guard<std::mutex> lock(mu_);
  stats_.hits += counted;
  return std::move(*entry);
}

void DiskCache::store(const CachedFunction &entry, bool counted) {
  if (mode_.load() != CacheMode::kReadWrite) return;
  std::string digest = entry.key.digest(), path = pathFor(digest), name = digest + kSuffix;
  auto fail = [&](const std::string &what) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.writeErrors += counted;
    }
    mode_ = CacheMode::kReadOnly;
    warnOnce("write", "cannot write the compile cache in '" + dir_ + "' (" + what +
                          "); compiled code is cached in memory only from now on");
  };
  // The shard is opened level by level without following links and the
  // temporary file and the rename happen inside it (openat/renameat): nothing
  // is written outside the cache whatever links are planted in it.
  Fd dir = openShard(dir_, digest.substr(0, 2), /*create=*/true);
  if (!dir)
    return fail(errno == ELOOP || errno == ENOTDIR
                    ? "'" + llvm::sys::path::parent_path(path).str() + "' is not a directory of its own"
                    : errnoText());
  static std::atomic<uint64_t> counter{0};
  std::string tmp = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." + digest.substr(0, 8);
  int fd = ::openat(dir.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail(errnoText());
  std::string bytes = encode(entry);
  bool ok = writeAll(fd, bytes) && ::fsync(fd) == 0;
  std::string err = ok ? "" : errnoText();
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::renameat(dir.fd, tmp.c_str(), dir.fd, name.c_str()) != 0) {
    if (err.empty()) err = errnoText();
    ::unlinkat(dir.fd, tmp.c_str(), 0);
    return fail(err);
  }
  ::fsync(dir.fd);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.writes += counted;
  }
  evictIfNeeded(path);
}

std::vector<DiskCache::File> DiskCache::scan(std::vector<File> *orphans) const {
  // Exactly <dir>/v1/<2 hex>/<32 hex>.kiln: real directories and regular
  // files only, never a symlink, never anything else in the tree; each level
  // opened relative to the one above (openat, O_NOFOLLOW).
  std::vector<File> files;
  if (mode_.load() == CacheMode::kOff) return files;
  auto mtimeOf = [](const struct stat &st) {
    auto t = llvm::sys::toTimePoint(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    auto now = std::chrono::system_clock::now();
    return t > now ? llvm::sys::TimePoint<>(now) : llvm::sys::TimePoint<>(t);  // future mtimes count as now
  };
  Fd root = openRoot(dir_);
  if (!root) return files;
  Fd layout = openDirAt(root.fd, kLayout, false);
  if (!layout) return files;
  auto names = [](int dirfd) {  // the names in a directory (a dup of its fd is read)
    std::vector<std::string> out;
    int dup = ::dup(dirfd);
    if (dup < 0) return out;
    DIR *d = ::fdopendir(dup);
    if (!d) {
      ::close(dup);
      return out;
    }
    while (struct dirent *e = ::readdir(d)) out.push_back(e->d_name);
    ::closedir(d);
    return out;
  };
  std::string root1 = dir_ + "/" + kLayout + "/";
  for (const std::string &shard : names(layout.fd)) {
    if (shard.size() != 2 || !isHex(shard)) continue;
    Fd sdir = openDirAt(layout.fd, shard.c_str(), false);
    if (!sdir) continue;
    for (const std::string &name : names(sdir.fd)) {
      struct stat st;
      if (::fstatat(sdir.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      File f{shard, name, root1 + shard + "/" + name, uint64_t(st.st_size), mtimeOf(st)};
      if (llvm::StringRef(name).starts_with(".tmp.")) {
        if (orphans && isOurTempName(name) && std::chrono::system_clock::now() - f.mtime > kOrphanAge)
          orphans->push_back(std::move(f));
        continue;
      }
      llvm::StringRef digest = name;
      if (!digest.consume_back(kSuffix) || digest.size() != 32 || !isHex(digest) || !digest.starts_with(shard))
        continue;
      files.push_back(std::move(f));
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
    info.digest = llvm::sys::path::stem(f.name).str();
    info.bytes = f.bytes;
    info.ageSeconds = std::chrono::duration_cast<std::chrono::seconds>(now - f.mtime).count();
    Fd dir = openShard(dir_, f.shard, false);
    Fd fd(dir ? ::openat(dir.fd, f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1);
    struct stat st;
    if (!fd || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      info.problem = fd ? "not a regular file" : errnoText();
    } else if (st.st_nlink != 1) {
      info.problem = "has other hard links";
    } else if (uint64_t(st.st_size) > std::max<uint64_t>(maxBytes_, kHeaderBytes)) {
      info.problem = "larger than the cache's size cap";
    } else if (auto buf = llvm::MemoryBuffer::getOpenFile(fd.fd, f.path, st.st_size, false); !buf) {
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
  Fd root = openRoot(dir_);
  if (!root) return;
  Fd lock(::openat(root.fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!lock) return;
  if (::flock(lock.fd, LOCK_EX | LOCK_NB) != 0) return;  // another process is evicting
  size_t evicted = 0, cleaned = 0;
  for (const File &f : orphans)  // writers killed before their rename
    if (removeIfOurs(dir_, f.shard, f.name, /*temporary=*/true)) ++cleaned;
  // Only kiln entries count and can go: a foreign file with an entry's name
  // neither triggers eviction nor is removed.
  files.erase(std::remove_if(files.begin(), files.end(),
                             [&](const File &f) {
                               Fd dir = openShard(dir_, f.shard, false);
                               return !dir || !isOurs(dir.fd, f.name.c_str(), false);
                             }),
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
    if (removeIfOurs(dir_, f.shard, f.name, false)) {
      total -= f.bytes;
      ++evicted;
    }
  }
  ::flock(lock.fd, LOCK_UN);
  std::lock_guard<std::mutex> guard(mu_);
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
    if (removeIfOurs(dir_, f.shard, f.name, false)) ++n;
  for (const File &f : orphans) removeIfOurs(dir_, f.shard, f.name, true);
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
