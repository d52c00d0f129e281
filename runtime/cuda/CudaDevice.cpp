#include "runtime/cuda/CudaDevice.h"
#include "runtime/Error.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Format.h"

#include <cstring>

namespace kiln::cuda {

namespace {
constexpr int kStreams = 4;
std::string mib(size_t bytes) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}
}  // namespace

// ---------------------------------------------------------------------------
// Device memory.

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  if (this != &o) {
    if (owner_ && ptr_) owner_->release(ptr_, capacity_);
    owner_ = o.owner_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    capacity_ = o.capacity_;
    o.owner_ = nullptr;
    o.ptr_ = 0;
    o.bytes_ = o.capacity_ = 0;
  }
  return *this;
}
DeviceBuffer::~DeviceBuffer() {
  if (owner_ && ptr_) owner_->release(ptr_, capacity_);
}

size_t DeviceAllocator::sizeClass(size_t bytes) {
  if (bytes == 0) bytes = 1;
  constexpr size_t kSmall = 512, kLarge = 2 << 20, kSmallLimit = 1 << 20;
  size_t unit = bytes <= kSmallLimit ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

llvm::Expected<DeviceBuffer> DeviceAllocator::allocate(size_t bytes) {
  if (bytes > (size_t(1) << 50))
    return error(ErrorCode::kResourceExhausted, "a device buffer of %zu bytes is larger than any GPU", bytes);
  size_t capacity = sizeClass(bytes);
  DeviceBuffer b;
  b.owner_ = this;
  b.bytes_ = bytes;
  b.capacity_ = capacity;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      b.ptr_ = it->second;
      free_.erase(it);
      stats_.cachedBytes -= capacity;
      stats_.inUseBytes += capacity;
      stats_.peakBytes = std::max(stats_.peakBytes, stats_.inUseBytes);
      ++stats_.reuses;
      return std::move(b);
    }
  }
  const Driver &d = device_.driver();
  if (auto err = device_.makeCurrent()) return std::move(err);
  CUresult r = d.cuMemAlloc(&b.ptr_, capacity);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    trim();
    r = d.cuMemAlloc(&b.ptr_, capacity);
  }
  if (r != CUDA_SUCCESS) {
    b.owner_ = nullptr;
    b.ptr_ = 0;
    size_t freeBytes = 0, total = 0;
    d.cuMemGetInfo(&freeBytes, &total);
    return error(r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
                 "cuMemAlloc of %s on GPU %d (%s) failed: %s; the device has %s free of %s", mib(capacity).c_str(),
                 device_.info().ordinal, device_.info().name.c_str(), resultName(&d, r).c_str(),
                 mib(freeBytes).c_str(), mib(total).c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.inUseBytes += capacity;
  stats_.peakBytes = std::max(stats_.peakBytes, stats_.inUseBytes);
  ++stats_.driverAllocations;
  return std::move(b);
}

void DeviceAllocator::release(CUdeviceptr ptr, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(capacity, ptr);
  stats_.inUseBytes -= capacity;
  stats_.cachedBytes += capacity;
}

void DeviceAllocator::trim() {
  std::multimap<size_t, CUdeviceptr> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_);
    stats_.cachedBytes = 0;
  }
  if (blocks.empty() || device_.makeCurrent()) return;
  for (auto &[size, ptr] : blocks) device_.driver().cuMemFree(ptr);
}

DeviceAllocator::~DeviceAllocator() { trim(); }

DeviceAllocator::Stats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&o) noexcept {
  if (this != &o) {
    if (data_) owner_->releasePinned(data_, capacity_);
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    capacity_ = o.capacity_;
    o.data_ = nullptr;
    o.bytes_ = o.capacity_ = 0;
  }
  return *this;
}
PinnedBuffer::~PinnedBuffer() {
  if (data_) owner_->releasePinned(data_, capacity_);
}

// ---------------------------------------------------------------------------
// Streams.

llvm::Error CudaStream::copyToDevice(CUdeviceptr dst, const void *src, size_t bytes) {
  if (!bytes) return llvm::Error::success();
  return KILN_CU(*driver_, cuMemcpyHtoDAsync(dst, src, bytes, stream_), "copying " + mib(bytes) + " to the GPU");
}
llvm::Error CudaStream::copyToHost(void *dst, CUdeviceptr src, size_t bytes) {
  if (!bytes) return llvm::Error::success();
  return KILN_CU(*driver_, cuMemcpyDtoHAsync(dst, src, bytes, stream_), "copying " + mib(bytes) + " from the GPU");
}
llvm::Error CudaStream::copyOnDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (!bytes) return llvm::Error::success();
  return KILN_CU(*driver_, cuMemcpyDtoDAsync(dst, src, bytes, stream_), "copying " + mib(bytes) + " on the GPU");
}
llvm::Error CudaStream::zero(CUdeviceptr dst, size_t bytes) {
  if (!bytes) return llvm::Error::success();
  return KILN_CU(*driver_, cuMemsetD8Async(dst, 0, bytes, stream_), "clearing " + mib(bytes) + " on the GPU");
}
llvm::Error CudaStream::launch(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned sharedBytes,
                               void **params, llvm::StringRef name) {
  return KILN_CU(*driver_,
                 cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes, stream_,
                                params, nullptr),
                 "launching kernel " + name.str() + " (" + std::to_string(grid[0]) + "x" + std::to_string(grid[1]) +
                     "x" + std::to_string(grid[2]) + " blocks of " + std::to_string(block[0]) + "x" +
                     std::to_string(block[1]) + "x" + std::to_string(block[2]) + " threads)");
}

namespace {
void CUDA_CB runCallback(void *data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()> *>(data));
  (*fn)();
}
}  // namespace

llvm::Error CudaStream::onComplete(std::function<void()> done) {
  auto *fn = new std::function<void()>(std::move(done));
  CUresult r = driver_->cuLaunchHostFunc(stream_, runCallback, fn);
  if (r != CUDA_SUCCESS) {
    delete fn;
    return driver_->check(r, "cuLaunchHostFunc", "asking for a completion callback");
  }
  return llvm::Error::success();
}
llvm::Error CudaStream::synchronize() {
  return KILN_CU(*driver_, cuStreamSynchronize(stream_), "waiting for a stream");
}

// ---------------------------------------------------------------------------
// Modules.

CudaModule::~CudaModule() {
  if (module_ && !device_->makeCurrent()) device_->driver().cuModuleUnload(module_);
}
llvm::Expected<CUfunction> CudaModule::function(llvm::StringRef name) const {
  CUfunction fn = nullptr;
  if (auto err = KILN_CU(device_->driver(), cuModuleGetFunction(&fn, module_, name.str().c_str()),
                         "looking up kernel " + name.str()))
    return std::move(err);
  return fn;
}
std::pair<CUdeviceptr, size_t> CudaModule::global(llvm::StringRef name) const {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  if (device_->driver().cuModuleGetGlobal(&p, &bytes, module_, name.str().c_str()) != CUDA_SUCCESS) return {0, 0};
  return {p, bytes};
}

// ---------------------------------------------------------------------------
// The device.

llvm::Expected<std::shared_ptr<CudaDevice>> CudaDevice::open(int ordinal) {
  auto driver = Driver::get();
  if (!driver) return driver.takeError();
  const Driver &d = *driver;
  static std::mutex mu;
  static std::map<int, std::weak_ptr<CudaDevice>> opened;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = opened[ordinal].lock()) return existing;
  int count = 0;
  if (auto err = KILN_CU(d, cuDeviceGetCount(&count), "counting GPUs")) return std::move(err);
  if (ordinal < 0 || ordinal >= count)
    return error(ErrorCode::kUnavailable, "there is no GPU %d: the CUDA driver sees %d GPU%s", ordinal, count,
                 count == 1 ? "" : "s");
  std::shared_ptr<CudaDevice> dev(new CudaDevice());
  dev->driver_ = &d;
  dev->info_.ordinal = ordinal;
  dev->info_.driverVersion = d.version;
  if (auto err = KILN_CU(d, cuDeviceGet(&dev->device_, ordinal), "opening GPU " + std::to_string(ordinal)))
    return std::move(err);
  char name[256] = {};
  int major = 0, minor = 0;
  if (auto err = KILN_CU(d, cuDeviceGetName(name, sizeof name - 1, dev->device_), "reading the GPU's name"))
    return std::move(err);
  dev->info_.name = name;
  if (auto err = KILN_CU(d, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->device_),
                         "reading the GPU's compute capability"))
    return std::move(err);
  if (auto err = KILN_CU(d, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev->device_),
                         "reading the GPU's compute capability"))
    return std::move(err);
  dev->info_.computeCapability = major * 10 + minor;
  d.cuDeviceGetAttribute(&dev->info_.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev->device_);
  d.cuDeviceTotalMem(&dev->info_.totalMemory, dev->device_);
  if (auto err = KILN_CU(d, cuDevicePrimaryCtxRetain(&dev->context_, dev->device_),
                         "creating the context of GPU " + std::to_string(ordinal)))
    return std::move(err);
  if (auto err = dev->makeCurrent()) return std::move(err);
  for (int i = 0; i < kStreams; ++i) {
    auto s = std::make_unique<CudaStream>();
    s->driver_ = &d;
    if (auto err = KILN_CU(d, cuStreamCreate(&s->stream_, CU_STREAM_NON_BLOCKING), "creating a stream"))
      return std::move(err);
    dev->streams_.push_back(std::move(s));
  }
  opened[ordinal] = dev;
  return dev;
}

CudaDevice::~CudaDevice() {
  if (!context_) return;
  if (!makeCurrent()) {
    for (auto &s : streams_) {
      driver_->cuStreamSynchronize(s->stream_);
      destroyLibraryHandles(*s);
      driver_->cuStreamDestroy(s->stream_);
    }
    allocator_.trim();
    for (auto &[size, data] : pinnedFree_) driver_->cuMemFreeHost(data);
  }
  driver_->cuDevicePrimaryCtxRelease(device_);
}

llvm::Error CudaDevice::makeCurrent() const {
  CUcontext current = nullptr;
  if (driver_->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context_) return llvm::Error::success();
  return KILN_CU(*driver_, cuCtxSetCurrent(context_), "making GPU " + std::to_string(info_.ordinal) + " current");
}

llvm::Expected<PinnedBuffer> CudaDevice::allocatePinned(size_t bytes) {
  PinnedBuffer b;
  b.owner_ = this;
  b.bytes_ = bytes;
  b.capacity_ = DeviceAllocator::sizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(pinnedMu_);
    auto it = pinnedFree_.find(b.capacity_);
    if (it != pinnedFree_.end()) {
      b.data_ = it->second;
      pinnedFree_.erase(it);
      return std::move(b);
    }
  }
  if (auto err = makeCurrent()) return std::move(err);
  if (auto err = KILN_CU(*driver_, cuMemAllocHost(&b.data_, b.capacity_),
                         "allocating " + mib(bytes) + " of pinned host memory")) {
    b.data_ = nullptr;
    return std::move(err);
  }
  return std::move(b);
}

void CudaDevice::releasePinned(void *data, size_t capacity) {
  std::lock_guard<std::mutex> lock(pinnedMu_);
  pinnedFree_.emplace(capacity, data);
}

CudaStream::~CudaStream() {
  if (!own_ || !stream_) return;
  driver_->cuStreamSynchronize(stream_);
  destroyLibraryHandles(*this);
  driver_->cuStreamDestroy(stream_);
}

llvm::Expected<std::unique_ptr<CudaStream>> CudaDevice::newStream() {
  if (auto err = makeCurrent()) return std::move(err);
  auto s = std::make_unique<CudaStream>();
  s->driver_ = driver_;
  if (auto err = KILN_CU(*driver_, cuStreamCreate(&s->stream_, CU_STREAM_NON_BLOCKING), "creating a stream"))
    return std::move(err);
  s->own_ = true;
  return std::move(s);
}

CudaStream &CudaDevice::stream() {
  return *streams_[nextStream_.fetch_add(1, std::memory_order_relaxed) % streams_.size()];
}

llvm::Expected<std::shared_ptr<CudaModule>> CudaDevice::loadModule(llvm::ArrayRef<char> cubin,
                                                                   llvm::StringRef cubinArch, llvm::StringRef ptx) {
  if (auto err = makeCurrent()) return std::move(err);
  auto m = std::shared_ptr<CudaModule>(new CudaModule());
  m->device_ = this;
  if (!cubin.empty() && cubinArch == info_.arch()) {
    if (driver_->cuModuleLoadDataEx(&m->module_, cubin.data(), 0, nullptr, nullptr) == CUDA_SUCCESS) return m;
    m->module_ = nullptr;  // fall back to the PTX
  }
  if (ptx.empty())
    return error(ErrorCode::kUnavailable, "no code for %s (%s): the cubin is for %s and there is no PTX",
                 info_.name.c_str(), info_.arch().c_str(), cubinArch.str().c_str());
  std::string text = ptx.str();  // the driver wants NUL-terminated PTX
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log - 1))};
  CUresult r = driver_->cuModuleLoadDataEx(&m->module_, text.c_str(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    m->module_ = nullptr;
    return error(r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_NO_BINARY_FOR_GPU
                     ? ErrorCode::kUnavailable
                     : ErrorCode::kCompileFailed,
                 "the CUDA driver cannot load kiln's PTX on %s (%s, driver %d.%d): %s%s%s", info_.name.c_str(),
                 info_.arch().c_str(), driver_->version / 1000, driver_->version % 1000 / 10,
                 resultName(driver_, r).c_str(), *log ? ": " : "", log);
  }
  return m;
}

bool gpuAvailable(std::string *why) {
  auto dev = CudaDevice::open(0);
  if (dev) return true;
  std::string msg = llvm::toString(dev.takeError());
  if (why) *why = msg;
  return false;
}

}  // namespace kiln::cuda
