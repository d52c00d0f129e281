#include "runtime/Tensor.h"
#include "runtime/Error.h"
#include "runtime/HostBlocks.h"
#include "runtime/Poison.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <optional>
#include <set>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace kiln {

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = [] {
    long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size) : uint64_t(1) << 40;
  }();
  return bytes;
}

namespace {
std::atomic<uint64_t> gTensorBytes{0};
std::atomic<uint64_t> gTensorLimit{0};
/// Allocations at least this big are checked against what is available
/// before malloc (which, with overcommit, would not fail).
constexpr uint64_t kCheckedBytes = uint64_t(64) << 20;
/// runtime/Poison.h: the byte new tensor memory is filled with, or -1.
std::atomic<int> gPoison{[] {
  const char *v = std::getenv("KILN_POISON_MEMORY");
  if (!v || !*v) return -1;
  long b = std::strtol(v, nullptr, 0);
  return b >= 0 && b <= 255 ? int(b) : -1;
}()};
void poison(void *p, size_t bytes) {
  int b = gPoison.load(std::memory_order_relaxed);
  if (b >= 0 && p) std::memset(p, b, bytes);
}

/// A number from a one-line file (cgroup v2), or nullopt ("max", absent).
std::optional<uint64_t> readNumber(const char *path) {
  FILE *f = std::fopen(path, "re");
  if (!f) return std::nullopt;
  unsigned long long v = 0;
  int n = std::fscanf(f, "%llu", &v);
  std::fclose(f);
  if (n != 1) return std::nullopt;
  return uint64_t(v);
}

/// Bytes of address space this process has mapped (the first number of
/// /proc/self/statm, in pages).
std::optional<uint64_t> mappedBytes() {
  auto pages = readNumber("/proc/self/statm");
  if (!pages) return std::nullopt;
  return *pages * uint64_t(::sysconf(_SC_PAGE_SIZE));
}

/// Why at most `limit` more bytes can be had, for messages.
struct Headroom {
  uint64_t bytes;
  const char *why;
};

/// MemAvailable from /proc/meminfo: what can be had without swapping.
std::optional<uint64_t> availableMemory() {
  FILE *f = std::fopen("/proc/meminfo", "re");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<uint64_t> out;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
      out = uint64_t(kb) * 1024;
      break;
    }
  }
  std::fclose(f);
  return out;
}

Headroom headroom() {
  Headroom h{physicalMemoryBytes(), "this machine's memory"};
  auto lower = [&](uint64_t bytes, const char *why) {
    if (bytes < h.bytes) h = {bytes, why};
  };
  if (auto avail = availableMemory()) lower(*avail, "the memory available now (MemAvailable)");
  struct rlimit rl;
  std::optional<uint64_t> mapped;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (mapped = mappedBytes()))
    lower(uint64_t(rl.rlim_cur) > *mapped ? uint64_t(rl.rlim_cur) - *mapped : 0,
          "what the address-space limit (ulimit -v) leaves");
  if (::getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (mapped || (mapped = mappedBytes())))
    lower(uint64_t(rl.rlim_cur) > *mapped ? uint64_t(rl.rlim_cur) - *mapped : 0,
          "what the data-size limit (ulimit -d) leaves");
  if (auto max = readNumber("/sys/fs/cgroup/memory.max")) {
    uint64_t used = readNumber("/sys/fs/cgroup/memory.current").value_or(0);
    lower(*max > used ? *max - used : 0, "what the cgroup's memory.max leaves");
  }
  if (uint64_t limit = gTensorLimit.load(std::memory_order_relaxed)) {
    uint64_t used = gTensorBytes.load(std::memory_order_relaxed);
    lower(limit > used ? limit - used : 0, "what kiln's tensor memory limit leaves");
  }
  return h;
}

llvm::Error exhausted(uint64_t bytes, llvm::StringRef what, const char *why, uint64_t left) {
  return error(ErrorCode::kResourceExhausted, "%s needs %llu bytes (%.1f MiB), more than %s (%llu bytes)",
               what.str().c_str(), (unsigned long long)bytes, double(bytes) / (1 << 20), why,
               (unsigned long long)left);
}

/// Counts `bytes` of tensor memory as held, or fails (nothing counted):
/// past the tensor memory limit, or, for allocations of kCheckedBytes or
/// more, past what can be had now (overcommit would let malloc "succeed"
/// and the OOM killer decide later). Undo with gTensorBytes -= bytes.
llvm::Error reserveTensorBytesOnce(uint64_t bytes, llvm::StringRef what) {
  if (bytes > SIZE_MAX - 4 * kBufferAlignment)  // the block and its alignment would wrap
    return error(ErrorCode::kResourceExhausted, "%s has more bytes than 64 bits can count", what.str().c_str());
  uint64_t used = gTensorBytes.fetch_add(bytes, std::memory_order_relaxed);
  if (uint64_t limit = gTensorLimit.load(std::memory_order_relaxed); limit && used + bytes > limit) {
    gTensorBytes.fetch_sub(bytes, std::memory_order_relaxed);
    return exhausted(bytes, what, "what kiln's tensor memory limit leaves", limit > used ? limit - used : 0);
  }
  if (bytes >= kCheckedBytes) {
    Headroom h = headroom();
    if (bytes > h.bytes) {
      gTensorBytes.fetch_sub(bytes, std::memory_order_relaxed);
      return exhausted(bytes, what, h.why, h.bytes);
    }
  }
  return llvm::Error::success();
}

std::atomic<uint64_t (*)()> gReclaimer{nullptr};

/// reserveTensorBytesOnce, and once more after the reclaimer gave memory
/// back.
llvm::Error reserveTensorBytes(uint64_t bytes, llvm::StringRef what) {
  llvm::Error err = reserveTensorBytesOnce(bytes, what);
  if (!err) return err;
  uint64_t (*reclaim)() = gReclaimer.load(std::memory_order_acquire);
  if (!reclaim || reclaim() == 0) return err;
  llvm::consumeError(std::move(err));
  return reserveTensorBytesOnce(bytes, what);
}

/// The error for `bytes` reserved but not given by malloc (the reservation
/// is released here).
llvm::Error allocationFailed(uint64_t bytes, llvm::StringRef what) {
  gTensorBytes.fetch_sub(bytes, std::memory_order_relaxed);
  Headroom h = headroom();
  return exhausted(bytes, what, h.bytes < bytes ? h.why : "the memory the system would give (allocation failed)",
                   h.bytes);
}
}  // namespace

uint64_t allocatableBytes() { return headroom().bytes; }
uint64_t tensorMemoryInUse() { return gTensorBytes.load(std::memory_order_relaxed); }
void setTensorMemoryLimit(uint64_t bytes) { gTensorLimit.store(bytes, std::memory_order_relaxed); }
uint64_t tensorMemoryLimit() { return gTensorLimit.load(std::memory_order_relaxed); }

std::shared_ptr<void> holdTensorMemoryLimit(uint64_t bytes) {
  struct Held {
    std::mutex mu;
    std::multiset<uint64_t> limits;
    uint64_t base = 0;  // the limit when none was held
  };
  static Held *held = new Held();  // never destroyed: handles may outlive statics
  std::lock_guard<std::mutex> lock(held->mu);
  if (held->limits.empty()) held->base = gTensorLimit.load(std::memory_order_relaxed);
  auto it = held->limits.insert(bytes);
  gTensorLimit.store(*held->limits.begin(), std::memory_order_relaxed);
  return std::shared_ptr<void>(nullptr, [it](void *) {
    std::lock_guard<std::mutex> lock(held->mu);
    held->limits.erase(it);
    gTensorLimit.store(held->limits.empty() ? held->base : *held->limits.begin(), std::memory_order_relaxed);
  });
}

llvm::Error checkAllocatable(uint64_t bytes, llvm::StringRef what) {
  if (bytes >= uint64_t(kSizeOverflow))
    return error(ErrorCode::kResourceExhausted, "%s has more bytes than 64 bits can count", what.str().c_str());
  if (bytes <= physicalMemoryBytes() / 64) return llvm::Error::success();  // small: no files read
  Headroom h = headroom();
  if (bytes <= h.bytes) return llvm::Error::success();
  return exhausted(bytes, what, h.why, h.bytes);
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return kSizeOverflow;
  return n;
}

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += "x";
    s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return s;
}

llvm::Expected<Shape> parseShape(llvm::StringRef text, bool allowDynamic) {
  Shape shape;
  text = text.trim();
  if (text.empty()) return shape;
  llvm::SmallVector<llvm::StringRef, 6> parts;
  text.split(parts, 'x');
  for (llvm::StringRef p : parts) {
    p = p.trim();
    if (p == "?" && allowDynamic) {
      shape.push_back(kDynamic);
      continue;
    }
    int64_t d;
    if (p.getAsInteger(10, d) || d < 0)
      return error(ErrorCode::kInvalidArgument, "invalid shape '%s': '%s' is not a non-negative dimension",
                                     text.str().c_str(), p.str().c_str());
    shape.push_back(d);
  }
  return shape;
}

static_assert(sizeof(Buffer) <= kBufferAlignment, "the buffer header must fit in one alignment unit");

namespace {
/// A buffer's block: from the host's block cache (HostBlocks.h), which
/// keeps blocks of 64 KiB and more for reuse by size (a call's outputs are
/// not mapped, faulted in and zeroed again on every call). AddressSanitizer
/// builds take malloc, which checks every use after free; the raw pointer
/// then sits just before the 64-byte aligned address. Null when there is no
/// memory.
#if defined(__SANITIZE_ADDRESS__)
void *tryAlignedBlock(size_t bytes) {
  void *raw = std::malloc(bytes + kBufferAlignment + sizeof(void *));
  if (!raw) return nullptr;
  uintptr_t p = (reinterpret_cast<uintptr_t>(raw) + sizeof(void *) + kBufferAlignment - 1) & ~uintptr_t(kBufferAlignment - 1);
  reinterpret_cast<void **>(p)[-1] = raw;
  return reinterpret_cast<void *>(p);
}
void freeBlock(void *p) {
  if (p) std::free(reinterpret_cast<void **>(p)[-1]);
}
#else
void *tryAlignedBlock(size_t bytes) { return hostBlocks().allocate(bytes, kBufferAlignment); }
void freeBlock(void *p) { hostBlocks().release(p); }
#endif
void *alignedBlock(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kBufferAlignment - sizeof(void *))  // never wrap to a small block
    llvm::report_bad_alloc_error("kiln: a buffer larger than the address space was requested");
  void *block = tryAlignedBlock(bytes);
  if (!block) llvm::report_bad_alloc_error("kiln: out of host memory");
  return block;
}
}  // namespace

namespace {
/// Blocks of allocateTensorMemory this large (execution arenas) are mapped
/// from the system and unmapped on release: memory a burst of concurrent
/// calls took goes back to the system afterwards. From malloc they would
/// stay in the process (glibc raises its mmap threshold after the first
/// large free, and does not trim memory below the top of its heaps).
/// AddressSanitizer builds keep malloc, which it checks.
constexpr size_t kMappedTensorBytes = size_t(1) << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapLargeBlocks = false;
#else
constexpr bool kMapLargeBlocks = true;
#endif
}  // namespace

llvm::Expected<void *> allocateTensorMemory(size_t bytes, llvm::StringRef what) {
  if (auto err = reserveTensorBytes(bytes, what)) return std::move(err);
  void *p = nullptr;
  if (kMapLargeBlocks && bytes >= kMappedTensorBytes) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  } else {
    p = std::aligned_alloc(kBufferAlignment, (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment +
                                                 (bytes ? 0 : kBufferAlignment));
  }
  if (!p) return allocationFailed(bytes, what);
  poison(p, bytes);
  return p;
}

void setTensorMemoryReclaimer(uint64_t (*reclaim)()) { gReclaimer.store(reclaim, std::memory_order_release); }

void setTensorMemoryPoison(int byte) { gPoison.store(byte >= 0 && byte <= 255 ? byte : -1, std::memory_order_relaxed); }

void releaseTensorMemory(void *p, size_t bytes) {
  if (!p) return;
  if (kMapLargeBlocks && bytes >= kMappedTensorBytes) ::munmap(p, bytes);
  else std::free(p);
  gTensorBytes.fetch_sub(bytes, std::memory_order_relaxed);
}

void *Buffer::operator new(size_t bytes) { return alignedBlock(bytes); }
void Buffer::operator delete(void *p) { freeBlock(p); }

llvm::IntrusiveRefCntPtr<Buffer> Buffer::allocate(size_t bytes) {
  auto b = tryAllocate(bytes, "a buffer");
  if (!b) llvm::report_bad_alloc_error(("kiln: " + toStatus(b.takeError()).message).c_str());
  return std::move(*b);
}

llvm::Expected<llvm::IntrusiveRefCntPtr<Buffer>> Buffer::tryAllocate(size_t bytes, llvm::StringRef what) {
  // The header lives in the block's first 64 bytes; the data follows.
  if (auto err = reserveTensorBytes(bytes, what)) return std::move(err);
  void *block = tryAlignedBlock(kBufferAlignment + (bytes ? bytes : 1));
  if (!block) return allocationFailed(bytes, what);
  Buffer *b = ::new (block) Buffer(static_cast<char *>(block) + kBufferAlignment, bytes, true, nullptr);
  poison(b->data(), bytes);
  return llvm::IntrusiveRefCntPtr<Buffer>(b);
}

llvm::Expected<TensorType> parseTensorType(llvm::StringRef text) {
  size_t x = text.rfind('x');
  llvm::StringRef dtype = x == llvm::StringRef::npos ? text : text.substr(x + 1);
  auto d = parseDType(std::string_view(dtype.data(), dtype.size()));
  if (!d) return error(ErrorCode::kInvalidArgument, "bad tensor type '%s'", text.str().c_str());
  auto shape = parseShape(x == llvm::StringRef::npos ? "" : text.substr(0, x), /*allowDynamic=*/true);
  if (!shape) return shape.takeError();
  return TensorType{*d, *shape};
}

llvm::IntrusiveRefCntPtr<Buffer> Buffer::wrap(void *data, size_t bytes,
                                              std::shared_ptr<const void> keepAlive) {
  return llvm::IntrusiveRefCntPtr<Buffer>(new Buffer(data, bytes, false, std::move(keepAlive)));
}

Buffer::~Buffer() {  // owned data shares the header's block, freed by operator delete
  if (owned_) gTensorBytes.fetch_sub(size_, std::memory_order_relaxed);
}

bool TensorType::isStatic() const {
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

std::string TensorType::str() const {
  std::string s = shapeToString(shape);
  if (!s.empty()) s += "x";
  return s + std::string(dtypeName(dtype));
}

llvm::Error checkBooleans(const Tensor &t, llvm::StringRef what) {
  if (!t.valid() || t.dtype() != DType::i1) return llvm::Error::success();
  const auto *p = static_cast<const uint8_t *>(t.rawData());
  for (int64_t e = 0, n = t.numElements(); e < n; ++e)
    if (p[e] > 1)
      return error(ErrorCode::kInvalidArgument, "%s (tensor<%s>) holds %u at element %lld: booleans must be 0 or 1",
                   what.str().c_str(), t.type().str().c_str(), unsigned(p[e]), (long long)e);
  return llvm::Error::success();
}

llvm::Expected<Tensor> Tensor::allocate(DType dtype, llvm::ArrayRef<int64_t> shape, llvm::StringRef what) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0)
      return error(ErrorCode::kInvalidArgument, "%s: dimension %zu of shape [%s] is %s; a tensor's dimensions are >= 0",
                   what.str().c_str(), d, llvm::join(llvm::map_range(shape, [](int64_t x) { return std::to_string(x); }), ", ").c_str(),
                   shape[d] == kDynamic ? "dynamic (-1)" : std::to_string(shape[d]).c_str());
  Tensor t;
  t.type_.dtype = dtype;
  t.type_.shape.assign(shape.begin(), shape.end());
  size_t bytes = t.byteSize();
  if (bytes == SIZE_MAX)
    return error(ErrorCode::kResourceExhausted, "%s (tensor<%s>) has more bytes than 64 bits can count",
                 what.str().c_str(), t.type_.str().c_str());
  auto b = Buffer::tryAllocate(bytes, (what + " (tensor<" + t.type_.str() + ">)").str());
  if (!b) return b.takeError();
  t.buffer_ = std::move(*b);
  return t;
}

Tensor Tensor::empty(DType dtype, llvm::ArrayRef<int64_t> shape) {
  auto t = allocate(dtype, shape);
  if (!t) {
    Status s = toStatus(t.takeError());
    if (s.code == ErrorCode::kInvalidArgument) throw std::invalid_argument("kiln::Tensor::empty: " + s.message);
    throw std::bad_alloc();
  }
  return std::move(*t);
}

Tensor Tensor::fromHost(DType dtype, llvm::ArrayRef<int64_t> shape, const void *data) {
  Tensor t = empty(dtype, shape);
  if (t.byteSize()) std::memcpy(t.rawData(), data, t.byteSize());
  return t;
}

Tensor Tensor::wrap(DType dtype, llvm::ArrayRef<int64_t> shape, void *data,
                    std::shared_ptr<const void> keepAlive) {
  Tensor t;
  t.type_.dtype = dtype;
  t.type_.shape.assign(shape.begin(), shape.end());
  t.buffer_ = Buffer::wrap(data, t.byteSize(), std::move(keepAlive));
  return t;
}

Shape Tensor::strides() const {
  Shape s(type_.shape.size(), 1);
  for (int64_t i = int64_t(s.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * type_.shape[i + 1];
  return s;
}

double Tensor::elementAsDouble(int64_t i) const {
  const char *p = static_cast<const char *>(rawData()) + size_t(i) * dtypeSize(dtype());
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dtype()) {
  case DType::f32: return load(float());
  case DType::f64: return load(double());
  case DType::f16: return halfToFloat(load(uint16_t()));
  case DType::bf16: return bf16ToFloat(load(uint16_t()));
  case DType::i64: return double(load(int64_t()));
  case DType::i32: return load(int32_t());
  case DType::i16: return load(int16_t());
  case DType::i8: return load(int8_t());
  case DType::u8: return load(uint8_t());
  case DType::i1: return load(uint8_t()) ? 1.0 : 0.0;
  }
  return 0;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(half);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  return uint16_t((x + 0x7fff + lsb) >> 16);
}

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
#if defined(__linux__) && !defined(MADV_COLLAPSE)
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1
#endif
}  // namespace

void Buffer::relocate(void *data, std::shared_ptr<const void> keepAlive) {
  relocatedKeepAlive_ = std::move(keepAlive);
  data_.store(data, std::memory_order_release);
}

HugePageSlabs &HugePageSlabs::shared() {
  static HugePageSlabs *slabs = new HugePageSlabs();  // never destroyed: buffers may outlive statics
  return *slabs;
}

bool HugePageSlabs::adopt(const Tensor &t) {
  Buffer *buffer = t.buffer().get();
  if (!buffer || !buffer->size() || !buffer->claimRelocation()) return false;
  size_t bytes = buffer->size();
  std::lock_guard<std::mutex> lock(mu_);
  size_t at = (used_ + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (!slab_ || at + bytes > size_) {
    size_t size = std::max(kSlabBytes, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    void *p = nullptr;
    if (posix_memalign(&p, kHugePage, size) != 0 || !p) return false;  // stays where it is
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // Before the first touch: the copies below then fault in huge pages
    // directly, where collapsing 4 KiB pages afterwards copies every byte
    // again (384 MB: 180-230 ms instead of 300-1570 ms here).
    madvise(p, size, MADV_HUGEPAGE);
#endif
    slab_ = std::shared_ptr<char>(static_cast<char *>(p), [](char *q) { std::free(q); });
    size_ = size;
    at = 0;
  }
  char *dst = slab_.get() + at;
  std::memcpy(dst, buffer->data(), bytes);
  used_ = at + bytes;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // The 2 MiB extents this copy touched (the slab is 2 MiB-aligned, so they
  // lie inside it), where a fault could not get a huge page; extents that
  // are huge already are skipped by the kernel.
  size_t begin = at / kHugePage * kHugePage, end = (used_ + kHugePage - 1) / kHugePage * kHugePage;
  if (madvise(slab_.get() + begin, end - begin, MADV_COLLAPSE) != 0)
    madvise(slab_.get() + begin, end - begin, MADV_HUGEPAGE);
#endif
  buffer->relocate(dst, std::shared_ptr<const void>(slab_, dst));
  return true;
}

}  // namespace kiln
