#include "runtime/cuda/CudaLibraries.h"
#include "runtime/Error.h"

// The legacy convolution API (descriptors, cudnnConvolutionForward) is
// marked deprecated in cuDNN 9 in favour of its graph API; it is still what
// a plain NHWC FP32 convolution needs, and its types are all kiln uses.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cublas_v2.h>
#include <cudnn.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace kiln::cuda {
namespace {

constexpr size_t kMaxConvWorkspace = size_t(1) << 30;

/// dlopen of the first of `names` that loads: the environment's path, the
/// sonames by the loader's search path, then the toolkit's lib64. `tried`
/// lists them for the error.
void *openLibrary(const char *envVar, std::initializer_list<const char *> names, std::string &tried,
                  std::string &why) {
  std::vector<std::string> candidates;
  if (const char *p = std::getenv(envVar); p && *p) {
    candidates.push_back(p);  // the user's choice, and only it
  } else {
    for (const char *n : names) candidates.push_back(n);
    for (const char *n : names) candidates.push_back(std::string("/usr/local/cuda/lib64/") + n);
  }
  for (const std::string &c : candidates) {
    if (void *h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    if (!tried.empty()) tried += ", ";
    tried += c;
    if (const char *e = dlerror(); e && why.empty()) why = e;
  }
  return nullptr;
}

#define KILN_CUDNN_FUNCTIONS(X)                                                                                  \
  X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnCreateTensorDescriptor)       \
  X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor)                 \
  X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnCreateConvolutionDescriptor)            \
  X(cudnnDestroyConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionMathType)       \
  X(cudnnGetConvolution2dForwardOutputDim) X(cudnnGetConvolutionForwardAlgorithm_v7)                          \
  X(cudnnFindConvolutionForwardAlgorithm)                                                                      \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward) X(cudnnGetVersion)

#define KILN_CUBLAS_FUNCTIONS(X)                                                                              \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasGetStatusString) X(cublasSetMathMode) \
  X(cublasSgemmStridedBatched)

struct Cudnn {
#define KILN_DECLARE(name) decltype(&::name) name = nullptr;
  KILN_CUDNN_FUNCTIONS(KILN_DECLARE)
  bool ok = false;
  std::string error;
};
struct Cublas {
  KILN_CUBLAS_FUNCTIONS(KILN_DECLARE)
#undef KILN_DECLARE
  // cublas_api.h overloads it for C++ (an older compute-type argument): the
  // exported function's own type.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void *, const void *, cudaDataType, int, long long, const void *,
                                    cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                                    long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx cublasGemmStridedBatchedEx = nullptr;
  bool ok = false;
  std::string error;
};

/// What loading one library needs: where to look, what to say when it is
/// missing, and a `resolve(handle, table)` that fills the table's pointers
/// and returns the first symbol it did not find (or null).
struct LibrarySpec {
  const char *envVar;
  std::initializer_list<const char *> names;
  const char *missing;  // "cuDNN (convolutions on the GPU)"
  const char *remedy;   // "install ...; set ...; or ..."
  const char *needed;   // "cuDNN 9"
};
template <typename Table, typename Resolve> Table loadTable(const LibrarySpec &spec, Resolve resolve) {
  Table l;
  std::string tried, why;
  void *h = openLibrary(spec.envVar, spec.names, tried, why);
  if (!h) {
    l.error = std::string(spec.missing) + " could not be loaded: tried " + tried + " (" + why + "); " + spec.remedy;
    return l;
  }
  if (const char *absent = resolve(h, l)) {
    l.error = std::string("the ") + spec.missing + " library that was loaded has no " + absent + " (" + spec.needed +
              " needed)";
    return l;
  }
  l.ok = true;
  return l;
}
#define KILN_RESOLVE(name)                                                \
  l.name = reinterpret_cast<decltype(l.name)>(dlsym(h, #name));           \
  if (!l.name) return #name;

const Cudnn &cudnnLibrary() {
  static Cudnn lib = loadTable<Cudnn>(
      {"KILN_CUDNN_LIBRARY", {"libcudnn.so.9"}, "cuDNN (convolutions on the GPU)",
       "install cuDNN 9, set KILN_CUDNN_LIBRARY to its libcudnn.so.9, or run convolutions as generated kernels "
       "(--op-mode tosa.conv2d=jit)",
       "cuDNN 9"},
      [](void *h, Cudnn &l) -> const char * {
        KILN_CUDNN_FUNCTIONS(KILN_RESOLVE)
        return nullptr;
      });
  return lib;
}

const Cublas &cublasLibrary() {
  static Cublas lib = loadTable<Cublas>(
      {"KILN_CUBLAS_LIBRARY", {"libcublas.so.13", "libcublas.so.12"}, "cuBLAS (matrix products on the GPU)",
       "install cuBLAS, set KILN_CUBLAS_LIBRARY to its libcublas.so, or run matrix products as generated kernels "
       "(--op-mode tosa.matmul=jit)",
       "CUDA 12 or 13"},
      [](void *h, Cublas &l) -> const char * {
        KILN_CUBLAS_FUNCTIONS(KILN_RESOLVE)
        KILN_RESOLVE(cublasGemmStridedBatchedEx)
        return nullptr;
      });
  return lib;
}
#undef KILN_RESOLVE

llvm::Expected<const Cudnn &> cudnn() {
  const Cudnn &l = cudnnLibrary();
  if (!l.ok) return error(ErrorCode::kUnavailable, "%s", l.error.c_str());
  return l;
}
llvm::Expected<const Cublas &> cublas() {
  const Cublas &l = cublasLibrary();
  if (!l.ok) return error(ErrorCode::kUnavailable, "%s", l.error.c_str());
  return l;
}

llvm::Error cudnnCheck(const Cudnn &l, cudnnStatus_t s, const char *call, const std::string &what) {
  if (s == CUDNN_STATUS_SUCCESS) return llvm::Error::success();
  ErrorCode code = s == CUDNN_STATUS_ALLOC_FAILED    ? ErrorCode::kResourceExhausted
                   : s == CUDNN_STATUS_BAD_PARAM || s == CUDNN_STATUS_NOT_SUPPORTED ? ErrorCode::kInvalidArgument
                                                                                   : ErrorCode::kInternal;
  return error(code, "%s failed: %s (cuDNN status %d) while %s", call, l.cudnnGetErrorString(s), int(s),
               what.c_str());
}
llvm::Error cublasCheck(const Cublas &l, cublasStatus_t s, const char *call, const std::string &what) {
  if (s == CUBLAS_STATUS_SUCCESS) return llvm::Error::success();
  ErrorCode code = s == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kResourceExhausted
                   : s == CUBLAS_STATUS_INVALID_VALUE || s == CUBLAS_STATUS_NOT_SUPPORTED ? ErrorCode::kInvalidArgument
                                                                                          : ErrorCode::kInternal;
  return error(code, "%s failed: %s (cuBLAS status %d) while %s", call, l.cublasGetStatusString(s), int(s),
               what.c_str());
}
// `what` is evaluated only when the call fails.
#define KILN_DNN(lib, call, what)                                               \
  [&]() -> llvm::Error {                                                        \
    cudnnStatus_t kilnStatus_ = lib.call;                                       \
    if (kilnStatus_ == CUDNN_STATUS_SUCCESS) return llvm::Error::success();     \
    return cudnnCheck(lib, kilnStatus_, #call, what);                           \
  }()
#define KILN_BLAS(lib, call, what)                                              \
  [&]() -> llvm::Error {                                                        \
    cublasStatus_t kilnStatus_ = lib.call;                                      \
    if (kilnStatus_ == CUBLAS_STATUS_SUCCESS) return llvm::Error::success();    \
    return cublasCheck(lib, kilnStatus_, #call, what);                          \
  }()

std::string convName(const ConvShape &c) {
  return "a " + std::to_string(c.r) + "x" + std::to_string(c.s) + " convolution of " + std::to_string(c.n) + "x" +
         std::to_string(c.h) + "x" + std::to_string(c.w) + "x" + std::to_string(c.c) + " to " + std::to_string(c.k) +
         " channels (stride " + std::to_string(c.stride[0]) + "x" + std::to_string(c.stride[1]) + ", dilation " +
         std::to_string(c.dilation[0]) + "x" + std::to_string(c.dilation[1]) + ")";
}

/// The stream's cuDNN handle (made on first use); the caller holds
/// stream.libraryMu.
llvm::Expected<cudnnHandle_t> streamCudnn(const Cudnn &l, CudaStream &stream) {
  if (stream.cudnnHandle) return static_cast<cudnnHandle_t>(stream.cudnnHandle);
  cudnnHandle_t h = nullptr;
  if (auto err = KILN_DNN(l, cudnnCreate(&h), "creating a cuDNN handle")) return std::move(err);
  if (auto err = KILN_DNN(l, cudnnSetStream(h, stream.handle()), "binding cuDNN to a stream")) {
    l.cudnnDestroy(h);
    return std::move(err);
  }
  stream.cudnnHandle = h;
  return h;
}
llvm::Expected<cublasHandle_t> streamCublas(const Cublas &l, CudaStream &stream) {
  if (stream.cublasHandle) return static_cast<cublasHandle_t>(stream.cublasHandle);
  cublasHandle_t h = nullptr;
  if (auto err = KILN_BLAS(l, cublasCreate_v2(&h), "creating a cuBLAS handle")) return std::move(err);
  // FP32 products in FP32 (the default mode uses no TF32).
  if (auto err = KILN_BLAS(l, cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "choosing FP32 math")) {
    l.cublasDestroy_v2(h);
    return std::move(err);
  }
  if (auto err = KILN_BLAS(l, cublasSetStream_v2(h, stream.handle()), "binding cuBLAS to a stream")) {
    l.cublasDestroy_v2(h);
    return std::move(err);
  }
  stream.cublasHandle = h;
  return h;
}

}  // namespace

bool cudnnAvailable(std::string *why) {
  const Cudnn &l = cudnnLibrary();
  if (!l.ok && why) *why = l.error;
  return l.ok;
}
bool cublasAvailable(std::string *why) {
  const Cublas &l = cublasLibrary();
  if (!l.ok && why) *why = l.error;
  return l.ok;
}

llvm::Error prepareLibraryHandles(CudaStream &stream, bool withCudnn, bool withCublas) {
  std::lock_guard<std::mutex> lock(stream.libraryMu);
  if (withCudnn) {
    auto lib = cudnn();
    if (!lib) return lib.takeError();
    if (auto h = streamCudnn(*lib, stream); !h) return h.takeError();
  }
  if (withCublas) {
    auto lib = cublas();
    if (!lib) return lib.takeError();
    if (auto h = streamCublas(*lib, stream); !h) return h.takeError();
  }
  return llvm::Error::success();
}

void destroyLibraryHandles(CudaStream &stream) {
  std::lock_guard<std::mutex> lock(stream.libraryMu);
  if (stream.cudnnHandle && cudnnLibrary().ok) cudnnLibrary().cudnnDestroy(static_cast<cudnnHandle_t>(stream.cudnnHandle));
  if (stream.cublasHandle && cublasLibrary().ok)
    cublasLibrary().cublasDestroy_v2(static_cast<cublasHandle_t>(stream.cublasHandle));
  stream.cudnnHandle = stream.cublasHandle = nullptr;
}

// ---------------------------------------------------------------------------
// Convolutions.

struct GpuConv::Descriptors {
  const Cudnn *lib = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  ~Descriptors() {
    if (!lib) return;
    if (x) lib->cudnnDestroyTensorDescriptor(x);
    if (y) lib->cudnnDestroyTensorDescriptor(y);
    if (w) lib->cudnnDestroyFilterDescriptor(w);
    if (conv) lib->cudnnDestroyConvolutionDescriptor(conv);
  }
};

GpuConv::~GpuConv() = default;

llvm::Expected<std::unique_ptr<GpuConv>> GpuConv::create(CudaDevice &device, const ConvShape &s, ConvChoice how) {
  auto lib = cudnn();
  if (!lib) return lib.takeError();
  const Cudnn &l = *lib;
  std::string what = "setting up " + convName(s);
  if (s.n < 1 || s.h < 1 || s.w < 1 || s.c < 1 || s.k < 1 || s.r < 1 || s.s < 1 || s.p < 1 || s.q < 1 ||
      s.stride[0] < 1 || s.stride[1] < 1 || s.dilation[0] < 1 || s.dilation[1] < 1)
    return error(ErrorCode::kInvalidArgument, "%s: a size is not positive", what.c_str());
  std::unique_ptr<GpuConv> c(new GpuConv());
  c->shape_ = s;
  c->d_ = std::make_unique<Descriptors>();
  Descriptors &d = *c->d_;
  d.lib = &l;
  if (auto err = KILN_DNN(l, cudnnCreateTensorDescriptor(&d.x), what)) return std::move(err);
  if (auto err = KILN_DNN(l, cudnnCreateTensorDescriptor(&d.y), what)) return std::move(err);
  if (auto err = KILN_DNN(l, cudnnCreateFilterDescriptor(&d.w), what)) return std::move(err);
  if (auto err = KILN_DNN(l, cudnnCreateConvolutionDescriptor(&d.conv), what)) return std::move(err);
  // Packed NHWC only: cuDNN 9's convolutions have no FP32 algorithm for a
  // strided NHWC input (seen on an H200).
  cudnnDataType_t data = s.half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  if (auto err = KILN_DNN(l, cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, data, s.n, s.c, s.h, s.w), what))
    return std::move(err);
  if (auto err = KILN_DNN(l, cudnnSetFilter4dDescriptor(d.w, data, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.s), what))
    return std::move(err);
  if (auto err = KILN_DNN(l,
                          cudnnSetConvolution2dDescriptor(d.conv, 0, 0, s.stride[0], s.stride[1], s.dilation[0],
                                                          s.dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                          what))
    return std::move(err);
  if (auto err = KILN_DNN(l, cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH), what)) return std::move(err);
  int n = 0, k = 0, p = 0, q = 0;
  if (auto err = KILN_DNN(l, cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &k, &p, &q), what))
    return std::move(err);
  if (n != s.n || k != s.k || p != s.p || q != s.q)
    return error(ErrorCode::kInternal, "%s: cuDNN makes a %dx%dx%dx%d output where the plan has %dx%dx%dx%d",
                 what.c_str(), n, p, q, k, s.n, s.p, s.q, s.k);
  if (auto err = KILN_DNN(l, cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, data, s.n, s.k, s.p, s.q), what))
    return std::move(err);

  if (auto err = device.makeCurrent()) return std::move(err);
  CudaStream &stream = device.stream();
  std::lock_guard<std::mutex> lock(stream.libraryMu);
  auto handle = streamCudnn(l, stream);
  if (!handle) return handle.takeError();
  // Tuning knobs (ConvChoice; docs/gpu.md).
  const bool find = how.timed, tf32 = how.tf32;
  // FP16 data: tensor cores, accumulating in FP32 (the descriptor's compute
  // type); FP32 data: FMA math unless TF32 is allowed.
  bool tensorCores = tf32 || s.half;
  if (tensorCores)
    if (auto err = KILN_DNN(l, cudnnSetConvolutionMathType(d.conv, s.half ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH),
                            what))
      return std::move(err);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  if (auto err = find ? KILN_DNN(l,
                                 cudnnFindConvolutionForwardAlgorithm(*handle, d.x, d.w, d.conv, d.y,
                                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                                 "timing the algorithms of " + convName(s))
                      : KILN_DNN(l,
                                 cudnnGetConvolutionForwardAlgorithm_v7(*handle, d.x, d.w, d.conv, d.y,
                                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                                        perf),
                                 "choosing an algorithm for " + convName(s)))
    return std::move(err);
  // The heuristics' (or the timings') order, first one that runs in FP32
  // math (or TF32 when allowed) within the workspace limit.
  for (int i = 0; i < returned; ++i) {
    bool tensorOps =
        perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (perf[i].status != CUDNN_STATUS_SUCCESS || (tensorOps && !tensorCores)) continue;
    if (l.cudnnSetConvolutionMathType(d.conv, perf[i].mathType) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (l.cudnnGetConvolutionForwardWorkspaceSize(*handle, d.x, d.w, d.conv, d.y, perf[i].algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kMaxConvWorkspace)
      continue;
    d.algo = perf[i].algo;
    c->algorithm_ = int(perf[i].algo);
    c->workspaceBytes_ = bytes;
    return std::move(c);
  }
  return error(ErrorCode::kInvalidArgument, "cuDNN has no %s algorithm for %s within a %zu MiB workspace (%d candidates)",
               s.half ? "FP16" : "FP32", convName(s).c_str(), kMaxConvWorkspace >> 20, returned);
}

llvm::Error GpuConv::enqueue(CudaStream &stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr workspace,
                             size_t workspaceBytes) const {
  const Descriptors &d = *d_;
  const Cudnn &l = *d.lib;
  if (workspaceBytes < workspaceBytes_)
    return error(ErrorCode::kInternal, "%s needs a %zu-byte workspace, given %zu", convName(shape_).c_str(),
                 workspaceBytes_, workspaceBytes);
  float alpha = 1.0f, beta = shape_.accumulate ? 1.0f : 0.0f;
  std::lock_guard<std::mutex> lock(stream.libraryMu);
  auto handle = streamCudnn(l, stream);
  if (!handle) return handle.takeError();
  return KILN_DNN(l,
                  cudnnConvolutionForward(*handle, &alpha, d.x, reinterpret_cast<const void *>(x), d.w,
                                          reinterpret_cast<const void *>(w), d.conv, d.algo,
                                          reinterpret_cast<void *>(workspace), workspaceBytes_, &beta, d.y,
                                          reinterpret_cast<void *>(y)),
                  "running " + convName(shape_));
}

// ---------------------------------------------------------------------------
// Matrix products.

llvm::Expected<std::unique_ptr<GpuGemm>> GpuGemm::create(CudaDevice &device, const GemmShape &s) {
  auto lib = cublas();
  if (!lib) return lib.takeError();
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    return error(ErrorCode::kInvalidArgument, "a matrix product of %d x (%dx%d by %dx%d) has a size that is not positive",
                 s.batch, s.m, s.k, s.k, s.n);
  // Make the stream's handle now, so that the first call does not.
  if (auto err = device.makeCurrent()) return std::move(err);
  CudaStream &stream = device.stream();
  {
    std::lock_guard<std::mutex> lock(stream.libraryMu);
    auto handle = streamCublas(*lib, stream);
    if (!handle) return handle.takeError();
  }
  std::unique_ptr<GpuGemm> g(new GpuGemm());
  g->shape_ = s;
  return std::move(g);
}

llvm::Error GpuGemm::enqueue(CudaStream &stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) const {
  const Cublas &l = cublasLibrary();
  const GemmShape &s = shape_;
  float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  std::lock_guard<std::mutex> lock(stream.libraryMu);
  auto handle = streamCublas(l, stream);
  if (!handle) return handle.takeError();
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first.
  long long strideA = s.broadcastA ? 0 : (long long)s.m * s.k, strideB = s.broadcastB ? 0 : (long long)s.k * s.n;
  auto what = [&] {  // only when a call fails
    return "running a" + std::string(s.half ? "n FP16" : "") + " matrix product of " + std::to_string(s.batch) +
           " x (" + std::to_string(s.m) + "x" + std::to_string(s.k) + " by " + std::to_string(s.k) + "x" +
           std::to_string(s.n) + ")";
  };
  if (s.half)
    return KILN_BLAS(l,
                     cublasGemmStridedBatchedEx(*handle, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha,
                                                reinterpret_cast<const void *>(b), CUDA_R_16F, s.n, strideB,
                                                reinterpret_cast<const void *>(a), CUDA_R_16F, s.k, strideA, &beta,
                                                reinterpret_cast<void *>(c), CUDA_R_16F, s.n, (long long)s.m * s.n,
                                                s.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     what());
  return KILN_BLAS(l,
                   cublasSgemmStridedBatched(*handle, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha,
                                             reinterpret_cast<const float *>(b), s.n, strideB,
                                             reinterpret_cast<const float *>(a), s.k, strideA, &beta,
                                             reinterpret_cast<float *>(c), s.n, (long long)s.m * s.n, s.batch),
                   what());
}

}  // namespace kiln::cuda
#pragma GCC diagnostic pop
