#include "cache/DiskCache.h"
#include "runtime/Error.h"

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
  std::string m = meta.dump();
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
  if (mode_.load() == CacheMode::kReadWrite) ::unlink(path.c_str());
}

std::optional<CachedFunction> DiskCache::load(const CacheKeyParts &key) {
  if (mode_.load() == CacheMode::kOff) return std::nullopt;
  std::string path = pathFor(key.digest());
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) {
    if (buf.getError() != std::errc::no_such_file_or_directory)
      warnOnce("read:" + path, "compile cache entry '" + path + "' is unreadable (" +
                                   buf.getError().message() + ")");
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return std::nullopt;
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
  evictIfNeeded();
}

std::vector<DiskCache::File> DiskCache::scan() const {
  std::vector<File> files;
  if (mode_.load() == CacheMode::kOff) return files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir_ + "/" + kLayout, ec), end;
       it != end && !ec; it.increment(ec)) {
    if (!llvm::StringRef(it->path()).ends_with(kSuffix)) continue;
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(it->path(), st)) continue;
    files.push_back({it->path(), st.getSize(), st.getLastModificationTime()});
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

void DiskCache::evictIfNeeded() {
  std::vector<File> files = scan();
  uint64_t total = 0;
  for (const File &f : files) total += f.bytes;
  if (total <= maxBytes_) return;
  std::string lockPath = dir_ + "/lock";
  int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another process is evicting
    ::close(fd);
    return;
  }
  std::sort(files.begin(), files.end(), [](auto &a, auto &b) { return a.mtime < b.mtime; });
  uint64_t target = maxBytes_ / 10 * 9;
  size_t evicted = 0;
  for (const File &f : files) {
    if (total <= target) break;
    if (::unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      ++evicted;
    }
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.evictions += evicted;
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
  for (const File &f : scan())
    if (::unlink(f.path.c_str()) == 0) ++n;
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
