#include "runtime/FileIO.h"
#include "runtime/Error.h"

#include "llvm/Support/Path.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {
namespace {

std::string dirOf(llvm::StringRef path) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

/// A name no one else holds: pid, a counter and random bits.
std::string temporaryName(llvm::StringRef path) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}());
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%d.%llu.%08llx", int(::getpid()),
                (unsigned long long)counter++, (unsigned long long)(rng() & 0xffffffffull));
  return (llvm::Twine(dirOf(path)) + "/." + llvm::sys::path::filename(path) + suffix).str();
}

llvm::Error ioError(llvm::StringRef path, int err) {
  return error(ErrorCode::kIO, "cannot write '%s': %s", path.str().c_str(), std::strerror(err));
}

/// Whether anything exists at `path` (a dangling link counts).
bool exists(llvm::StringRef path) {
  struct stat st;
  return ::lstat(path.str().c_str(), &st) == 0;
}

}  // namespace

llvm::Expected<std::string> createTemporaryBeside(llvm::StringRef path) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string tmp = temporaryName(path);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) return ioError(path, errno);
  }
  return ioError(path, EEXIST);
}

llvm::Error renameReplacing(llvm::StringRef from, llvm::StringRef to, Existing existing) {
  std::string f = from.str(), t = to.str();
  if (existing == Existing::kReplace) {
    if (::rename(f.c_str(), t.c_str()) != 0) return ioError(to, errno);
  } else {
    // link(2) fails with EEXIST on any existing name (and never follows a
    // symlink at the target): the no-replace rename.
    if (::link(f.c_str(), t.c_str()) != 0) {
      if (errno == EEXIST)
        return error(ErrorCode::kIO, "'%s' already exists; it is not overwritten (remove it first)", t.c_str());
      return ioError(to, errno);
    }
    ::unlink(f.c_str());
  }
  int dfd = ::open(dirOf(to).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return llvm::Error::success();
}

llvm::Error writeFileReplacing(llvm::StringRef path, llvm::StringRef bytes, Existing existing) {
  if (existing == Existing::kRefuse && exists(path))
    return error(ErrorCode::kIO, "'%s' already exists; it is not overwritten (remove it first)", path.str().c_str());
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = temporaryName(path);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return ioError(path, errno);
  }
  if (fd < 0) return ioError(path, EEXIST);
  int err = 0;
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left && !err) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    if (n == 0) err = ENOSPC;
    p += n;
    left -= size_t(n);
  }
  if (!err && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return ioError(path, err);
  }
  if (auto e = renameReplacing(tmp, path, existing)) {
    ::unlink(tmp.c_str());
    return e;
  }
  return llvm::Error::success();
}

}  // namespace kiln
