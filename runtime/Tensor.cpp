#include "runtime/Tensor.h"
#include "runtime/Error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cstdlib>
#include <unistd.h>
#include <sys/mman.h>

namespace kiln {

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = [] {
    long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size) : uint64_t(1) << 40;
  }();
  return bytes;
}

llvm::Error checkAllocatable(uint64_t bytes, llvm::StringRef what) {
  if (bytes <= physicalMemoryBytes()) return llvm::Error::success();
  if (bytes >= uint64_t(kSizeOverflow))
    return error(ErrorCode::kResourceExhausted, "%s has more bytes than 64 bits can count", what.str().c_str());
  return error(ErrorCode::kResourceExhausted, "%s needs %llu bytes, more than this machine's %llu bytes of memory",
                                 what.str().c_str(), (unsigned long long)bytes,
                                 (unsigned long long)physicalMemoryBytes());
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
/// malloc (thread-cached, fast for small blocks) with manual 64-byte
/// alignment; the raw pointer sits just before the aligned address.
void *alignedBlock(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kBufferAlignment - sizeof(void *))  // never wrap to a small block
    llvm::report_bad_alloc_error("kiln: a buffer larger than the address space was requested");
  void *raw = std::malloc(bytes + kBufferAlignment + sizeof(void *));
  if (!raw) llvm::report_bad_alloc_error("kiln: out of host memory");
  uintptr_t p = (reinterpret_cast<uintptr_t>(raw) + sizeof(void *) + kBufferAlignment - 1) & ~uintptr_t(kBufferAlignment - 1);
  reinterpret_cast<void **>(p)[-1] = raw;
  return reinterpret_cast<void *>(p);
}
void freeBlock(void *p) {
  if (p) std::free(reinterpret_cast<void **>(p)[-1]);
}
}  // namespace

void *Buffer::operator new(size_t bytes) { return alignedBlock(bytes); }
void Buffer::operator delete(void *p) { freeBlock(p); }

llvm::IntrusiveRefCntPtr<Buffer> Buffer::allocate(size_t bytes) {
  // The header lives in the block's first 64 bytes; the data follows.
  void *block = alignedBlock(bytes > SIZE_MAX - kBufferAlignment ? SIZE_MAX : kBufferAlignment + (bytes ? bytes : 1));
  Buffer *b = ::new (block) Buffer(static_cast<char *>(block) + kBufferAlignment, bytes, true, nullptr);
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

Buffer::~Buffer() = default;  // owned data shares the header's block, freed by operator delete

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

Tensor Tensor::empty(DType dtype, llvm::ArrayRef<int64_t> shape) {
  Tensor t;
  t.type_.dtype = dtype;
  t.type_.shape.assign(shape.begin(), shape.end());
  t.buffer_ = Buffer::allocate(t.byteSize());
  return t;
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
