// Buffer, TensorType and Tensor: kiln's host tensors.
//
// Contract:
//  - Buffer is reference counted (thread-safe count, llvm::ThreadSafeRefCountedBase).
//    A buffer either owns 64-byte-aligned memory it allocated, or wraps
//    external memory (a weight blob inside an MLIR module, a user array) and
//    keeps its owner alive through `keepAlive`. External memory is aligned at
//    least to its element size.
//  - Tensor is a cheap value (dtype, shape, contiguous row-major strides,
//    buffer + byte offset). Copies share the buffer. Reading and writing the
//    same tensor from several threads needs outside synchronization.
#pragma once

#include "runtime/DType.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/IntrusiveRefCntPtr.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

using Shape = llvm::SmallVector<int64_t, 6>;
constexpr int64_t kDynamic = -1;
constexpr size_t kBufferAlignment = 64;

/// Bytes of physical memory on this machine (an upper bound for buffers).
uint64_t physicalMemoryBytes();
/// What this process may still allocate, read now: the least of physical
/// memory, the address space RLIMIT_AS leaves (ulimit -v), RLIMIT_DATA's,
/// the cgroup's memory.max less its memory.current, and what is left under
/// the tensor memory limit (setTensorMemoryLimit).
uint64_t allocatableBytes();
/// An error (kResourceExhausted, naming the size and `what`) when `bytes`
/// more cannot be allocated now (allocatableBytes).
llvm::Error checkAllocatable(uint64_t bytes, llvm::StringRef what);

/// Tensor memory: bytes of host tensor buffers and execution arenas alive
/// now, process-wide, and a limit on them (0: none). The limit is
/// process-wide: RuntimeOptions::memoryLimitBytes sets it, the smallest
/// limit any runtime asked for wins. Thread-safe.
uint64_t tensorMemoryInUse();
void setTensorMemoryLimit(uint64_t bytes);
uint64_t tensorMemoryLimit();
/// A limit held while the returned handle lives (a Runtime's): the limit in
/// force is the smallest held, or setTensorMemoryLimit's when none is.
std::shared_ptr<void> holdTensorMemoryLimit(uint64_t bytes);
/// Allocates `bytes` of tensor memory (64-byte aligned) counted against the
/// limit, or fails with kResourceExhausted naming the size and `what`
/// (under the limit, RLIMIT_AS, a cgroup's limit or plain exhaustion).
/// Release with releaseTensorMemory(p, bytes).
llvm::Expected<void *> allocateTensorMemory(size_t bytes, llvm::StringRef what);
void releaseTensorMemory(void *p, size_t bytes);
/// Memory kiln holds that no call uses (the arenas of idle pooled
/// executions) goes back when a tensor allocation would otherwise fail (the
/// limit, what the system gives): `reclaim` frees what it can and returns
/// the bytes it released; the allocation is then tried once more. One per
/// process (runtime/Executable.cpp installs its pools'); null: none.
void setTensorMemoryReclaimer(uint64_t (*reclaim)());

/// Number of elements of a static shape (1 for rank 0). Saturates: a shape
/// whose count overflows gives kSizeOverflow, never a wrapped small number.
int64_t numElements(llvm::ArrayRef<int64_t> shape);
inline constexpr int64_t kSizeOverflow = INT64_MAX;
/// "1x224x224x3" (dynamic dims print as "?"); rank 0 prints as "".
std::string shapeToString(llvm::ArrayRef<int64_t> shape);
/// Parses "1x8x8x3xf32" (TensorType::str()); "f32" is a rank-0 tensor.
llvm::Expected<struct TensorType> parseTensorType(llvm::StringRef text);
/// Parses "1x224x224x3" ("?" allowed when allowDynamic).
llvm::Expected<Shape> parseShape(llvm::StringRef text, bool allowDynamic = false);

class Buffer : public llvm::ThreadSafeRefCountedBase<Buffer> {
public:
  /// Allocates `bytes` of 64-byte-aligned, uninitialized memory; aborts
  /// (LLVM's bad-alloc handler) when none is left: for sizes kiln chose.
  static llvm::IntrusiveRefCntPtr<Buffer> allocate(size_t bytes);
  /// The same, or an error (kResourceExhausted, naming the size and `what`)
  /// when the memory cannot be had: for every size that comes from outside.
  static llvm::Expected<llvm::IntrusiveRefCntPtr<Buffer>> tryAllocate(size_t bytes, llvm::StringRef what);
  /// Wraps memory owned elsewhere; `keepAlive` is held until the buffer dies.
  static llvm::IntrusiveRefCntPtr<Buffer> wrap(void *data, size_t bytes,
                                               std::shared_ptr<const void> keepAlive);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  void *data() const { return data_.load(std::memory_order_acquire); }
  size_t size() const { return size_; }
  bool ownsMemory() const { return owned_; }
  /// For a buffer that nothing writes (a weight): `data` holds the same
  /// bytes, and later reads go there (HugePageSlabs). The old memory stays
  /// valid until the buffer dies, for calls that read it already. At most
  /// once per buffer (claimRelocation).
  void relocate(void *data, std::shared_ptr<const void> keepAlive);
  /// True for the first caller only: it may relocate the buffer.
  bool claimRelocation() { return !relocationClaimed_.exchange(true); }

  // Buffers are malloc-allocated: allocate() puts the header and the data in
  // one 64-byte-aligned block (one allocation per tensor).
  static void *operator new(size_t bytes);
  static void operator delete(void *p);

private:
  Buffer(void *data, size_t size, bool owned, std::shared_ptr<const void> keepAlive)
      : owned_(owned), data_(data), size_(size), keepAlive_(std::move(keepAlive)) {}
  bool owned_;
  std::atomic<bool> relocationClaimed_{false};
  std::atomic<void *> data_;
  size_t size_;
  std::shared_ptr<const void> keepAlive_;
  std::shared_ptr<const void> relocatedKeepAlive_;
};

/// Element type and shape of a tensor; dims may be kDynamic in signatures.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  bool isStatic() const;
  int64_t numElements() const { return kiln::numElements(shape); }
  /// Saturates like numElements (SIZE_MAX when the byte count overflows).
  size_t byteSize() const {
    size_t out;
    return __builtin_mul_overflow(size_t(numElements()), dtypeSize(dtype), &out) ? SIZE_MAX : out;
  }
  /// "1x8x8x3xf32", the MLIR spelling without "tensor<>".
  std::string str() const;
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

class Tensor {
public:
  Tensor() = default;
  /// A new tensor with uninitialized contents, or an error: a negative or
  /// dynamic dimension (kInvalidArgument), or memory that cannot be had
  /// (kResourceExhausted, naming the size and `what`).
  static llvm::Expected<Tensor> allocate(DType dtype, llvm::ArrayRef<int64_t> shape,
                                         llvm::StringRef what = "a tensor");
  /// allocate() as a C++ value: a bad shape throws std::invalid_argument
  /// and memory that cannot be had std::bad_alloc (both with allocate()'s
  /// message in what() for the first); the process is never aborted. kiln's
  /// own code uses it only for shapes it checked; sizes from a user or a
  /// model go through allocate().
  static Tensor empty(DType dtype, llvm::ArrayRef<int64_t> shape);
  /// A new tensor holding a copy of `data` (row-major, numElements*dtypeSize bytes).
  static Tensor fromHost(DType dtype, llvm::ArrayRef<int64_t> shape, const void *data);
  template <typename T>
  static Tensor fromVector(DType dtype, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<T> values) {
    return fromHost(dtype, shape, values.data());
  }
  /// A tensor over external memory, without copying (see Buffer::wrap).
  static Tensor wrap(DType dtype, llvm::ArrayRef<int64_t> shape, void *data,
                     std::shared_ptr<const void> keepAlive);

  bool valid() const { return bool(buffer_); }
  DType dtype() const { return type_.dtype; }
  llvm::ArrayRef<int64_t> shape() const { return type_.shape; }
  const TensorType &type() const { return type_; }
  /// Row-major strides in elements.
  Shape strides() const;
  int64_t rank() const { return int64_t(type_.shape.size()); }
  int64_t numElements() const { return type_.numElements(); }
  size_t byteSize() const { return type_.byteSize(); }

  void *rawData() const { return static_cast<char *>(buffer_->data()) + offset_; }
  /// Where the data starts in its buffer, in bytes: with buffer(), an
  /// identity of the data that survives Buffer::relocate (rawData() does not).
  size_t byteOffset() const { return offset_; }
  template <typename T> T *data() const { return static_cast<T *>(rawData()); }
  template <typename T> std::vector<T> toVector() const {
    std::vector<T> out(static_cast<size_t>(numElements()));
    std::memcpy(out.data(), rawData(), byteSize());
    return out;
  }
  /// Element i converted to double (any dtype); for checksums and printing.
  double elementAsDouble(int64_t i) const;
  const llvm::IntrusiveRefCntPtr<Buffer> &buffer() const { return buffer_; }
  /// The same data under another shape of as many elements: a view (no
  /// copy), sharing the buffer.
  Tensor reshaped(llvm::ArrayRef<int64_t> shape) const {
    Tensor t = *this;
    t.type_.shape.assign(shape.begin(), shape.end());
    return t;
  }

private:
  TensorType type_;
  llvm::IntrusiveRefCntPtr<Buffer> buffer_;
  size_t offset_ = 0;
};

/// Memory for long-lived tensors read on every call (weights), backed by
/// transparent huge pages where the OS allows: 2 MiB-aligned slabs, each
/// holding many tensors (64-byte aligned), marked MADV_HUGEPAGE before their
/// first touch so that copying into them faults in huge pages directly;
/// extents that did not get one are collapsed after the copy (Linux >= 6.1,
/// madvise(MADV_COLLAPSE)). Weights stream from memory on every call (~100
/// MB per ResNet-50 inference); with 4 KiB pages every 4 KiB of a filter
/// needs a TLB entry of its own and the hardware prefetchers stop at each
/// page: ResNet-50's kernels took 0.95x their time with its weights in huge
/// pages. The copy costs 1.7-2.2 ms per 2 MiB on the development VMs, where
/// every fresh huge page also faults in the host (BERT-base's 435 MB: 0.73-0.96
/// s; copying first and collapsing afterwards took 0.94-1.68 s). The compile
/// service copies ahead of calls when code is compiled ahead of them, and
/// after a first call's code is returned otherwise (calls meanwhile read the
/// old memory, at up to half speed while the copy takes a core). Thread-safe.
class HugePageSlabs {
public:
  /// Slabs of this many bytes (a bigger tensor gets a slab of its own).
  static constexpr size_t kSlabBytes = size_t(32) << 20;
  /// The process's slabs.
  static HugePageSlabs &shared();
  /// Copies `t`'s buffer into a slab and relocates the buffer there
  /// (Buffer::relocate), unless another caller claimed it first (false
  /// then, or when no memory is left for a slab). `t` must be a tensor that
  /// nothing writes.
  bool adopt(const Tensor &t);

private:
  std::mutex mu_;
  std::shared_ptr<char> slab_;
  size_t size_ = 0, used_ = 0;
};

/// Booleans (i1) are one byte holding 0 or 1: generated code reads the low
/// bit and kernels any non-zero byte, so any other byte would make them
/// disagree. An error naming `what` and the first bad element; success for
/// other dtypes. Graph calls and eager dispatch both check their inputs.
llvm::Error checkBooleans(const Tensor &t, llvm::StringRef what);

/// f16 / bf16 conversions used by tests, printing and npy I/O.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

}  // namespace kiln
