// CudaDevice: one NVIDIA GPU as kiln's host runtime sees it — its primary
// context, a pool of streams, a caching device allocator, pinned host
// buffers and loaded modules. A device runtime beside the host runtime
// (runtime/), not part of it: nothing in the host runtime knows CUDA.
//
// Nothing here blocks the caller on the GPU except synchronize(): work is
// enqueued on streams, and completion is reported through host callbacks
// (CudaStream::onComplete), which run on a driver thread and must not call
// CUDA themselves.
//
// Thread-safety: every method of CudaDevice, DeviceAllocator and CudaModule
// may be called from any thread, and so may CudaStream's (the driver's
// stream calls are thread-safe; work enqueued from one thread runs in order).
#pragma once

#include "runtime/cuda/CudaDriver.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cuda {

class CudaDevice;

/// Device memory from the caching allocator; returns there when destroyed.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&o) noexcept { *this = std::move(o); }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  ~DeviceBuffer();
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != 0; }

private:
  friend class DeviceAllocator;
  class DeviceAllocator *owner_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;     // what was asked for
  size_t capacity_ = 0;  // the block's size class
};

/// Caching allocator: blocks are rounded up to a size class (512 B steps up
/// to 1 MiB, then 2 MiB steps) and kept on a free list when released, so
/// steady-state steps never call cuMemAlloc/cuMemFree (which synchronize
/// the device). When the device is out of memory, cached blocks are freed
/// and the allocation retried once; a failure then is a "resource exhausted"
/// error naming the size and what the device has free.
class DeviceAllocator {
public:
  explicit DeviceAllocator(CudaDevice &device) : device_(device) {}
  ~DeviceAllocator();
  llvm::Expected<DeviceBuffer> allocate(size_t bytes);
  /// Frees every cached block (cuMemFree); blocks in use stay.
  void trim();
  struct Stats {
    size_t inUseBytes = 0, cachedBytes = 0, peakBytes = 0;
    uint64_t driverAllocations = 0, reuses = 0;
  };
  Stats stats() const;
  /// The block size `bytes` is rounded up to.
  static size_t sizeClass(size_t bytes);

private:
  friend class DeviceBuffer;
  void release(CUdeviceptr ptr, size_t capacity);  // no CUDA call: safe in host callbacks
  CudaDevice &device_;
  mutable std::mutex mu_;
  std::multimap<size_t, CUdeviceptr> free_;
  Stats stats_;
};

/// Page-locked host memory (copies to and from it are truly asynchronous;
/// from pageable memory the driver makes device-to-host copies wait).
/// Returns to the device's cache of pinned blocks when destroyed (no CUDA
/// call: safe in host callbacks).
class PinnedBuffer {
public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer &&o) noexcept { *this = std::move(o); }
  PinnedBuffer &operator=(PinnedBuffer &&o) noexcept;
  ~PinnedBuffer();
  void *data() const { return data_; }
  size_t bytes() const { return bytes_; }

private:
  friend class CudaDevice;
  CudaDevice *owner_ = nullptr;
  void *data_ = nullptr;
  size_t bytes_ = 0, capacity_ = 0;
};

/// A stream of the device's pool, or one of its own (CudaDevice::newStream).
class CudaStream {
public:
  CudaStream() = default;
  CudaStream(const CudaStream &) = delete;
  CudaStream &operator=(const CudaStream &) = delete;
  /// A stream of its own waits for its work, then goes with its library
  /// handles; the pool's go with the device.
  ~CudaStream();
  CUstream handle() const { return stream_; }
  llvm::Error copyToDevice(CUdeviceptr dst, const void *src, size_t bytes);
  llvm::Error copyToHost(void *dst, CUdeviceptr src, size_t bytes);
  llvm::Error copyOnDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  llvm::Error zero(CUdeviceptr dst, size_t bytes);
  /// Launches `fn`; `params` points at each parameter's value (cuLaunchKernel).
  llvm::Error launch(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned sharedBytes,
                     void **params, llvm::StringRef name);
  /// Calls `done` on a driver thread once everything enqueued so far has
  /// run. `done` must not call CUDA (it may complete AsyncValues, release
  /// DeviceBuffers and schedule host work).
  llvm::Error onComplete(std::function<void()> done);
  /// Blocks until the stream is idle (tests and shutdown only).
  llvm::Error synchronize();

  /// cuDNN's and cuBLAS's handles bound to this stream, made on first use
  /// by CudaLibraries.cpp; whoever uses them holds `libraryMu` meanwhile.
  std::mutex libraryMu;
  void *cudnnHandle = nullptr, *cublasHandle = nullptr;

private:
  friend class CudaDevice;
  const Driver *driver_ = nullptr;
  CUstream stream_ = nullptr;
  bool own_ = false;  // made by newStream(): destroyed with this object
};

/// Destroys the library handles of `stream` (CudaLibraries.cpp; the device's
/// end calls it).
void destroyLibraryHandles(CudaStream &stream);

/// A loaded module (cubin or PTX) and the functions and globals in it.
class CudaModule {
public:
  ~CudaModule();
  llvm::Expected<CUfunction> function(llvm::StringRef name) const;
  /// Address and size of a __device__ global, or 0 when there is none.
  std::pair<CUdeviceptr, size_t> global(llvm::StringRef name) const;

private:
  friend class CudaDevice;
  CudaDevice *device_ = nullptr;
  CUmodule module_ = nullptr;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;        // "NVIDIA H200"
  int computeCapability = 0;  // major * 10 + minor (90 for sm_90)
  size_t totalMemory = 0;
  int multiprocessors = 0;
  int driverVersion = 0;
  /// "sm_90" (the architecture to generate code for).
  std::string arch() const { return "sm_" + std::to_string(computeCapability); }
};

class CudaDevice : public std::enable_shared_from_this<CudaDevice> {
  friend class PinnedBuffer;
public:
  /// Device `ordinal` (shared per process: opening it twice gives the same
  /// object). kUnavailable when there is no driver, no GPU or no such ordinal.
  static llvm::Expected<std::shared_ptr<CudaDevice>> open(int ordinal = 0);
  ~CudaDevice();

  const DeviceInfo &info() const { return info_; }
  const Driver &driver() const { return *driver_; }
  /// Makes the device's context current on the calling thread (cheap; call
  /// before driver calls on a thread that may not have it).
  llvm::Error makeCurrent() const;

  DeviceAllocator &allocator() { return allocator_; }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes) { return allocator_.allocate(bytes); }
  /// Pinned host memory, from a cache of blocks (size classes as device
  /// memory's).
  llvm::Expected<PinnedBuffer> allocatePinned(size_t bytes);

  /// A stream for one step: the pool's streams round-robin (work on one
  /// stream runs in order; different streams overlap).
  CudaStream &stream();
  /// A stream outside the pool, for work that must not share one (a CUDA
  /// graph's capture); it lives as long as the returned object.
  llvm::Expected<std::unique_ptr<CudaStream>> newStream();

  /// Loads a cubin (preferred when it was made for this device's
  /// architecture) or else PTX, which the driver compiles; the error
  /// carries the driver's JIT log.
  llvm::Expected<std::shared_ptr<CudaModule>> loadModule(llvm::ArrayRef<char> cubin, llvm::StringRef cubinArch,
                                                         llvm::StringRef ptx);

private:
  friend class DeviceAllocator;
  friend class CudaModule;
  CudaDevice() : allocator_(*this) {}
  const Driver *driver_ = nullptr;
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceAllocator allocator_;
  std::vector<std::unique_ptr<CudaStream>> streams_;
  void releasePinned(void *data, size_t capacity);
  std::mutex pinnedMu_;
  std::multimap<size_t, void *> pinnedFree_;
  std::atomic<size_t> nextStream_{0};
};

/// Whether a usable GPU is present (for tests that skip without one), and
/// if not, why.
bool gpuAvailable(std::string *why = nullptr);

}  // namespace kiln::cuda
