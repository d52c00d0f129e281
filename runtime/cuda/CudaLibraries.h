// CudaLibraries: cuDNN and cuBLAS, the GPU's handwritten kernels for
// convolution and matrix products, loaded at run time like the driver
// (CudaDriver.h): kiln links neither, the same binaries run where they are
// missing, and a plan that needs one fails to load with an "unavailable"
// error naming the library, where it was looked for, and how to do without
// (`--op-mode tosa.conv2d=jit` / `tosa.matmul=jit` makes generated kernels
// instead).
//
// Where they are looked for: $KILN_CUDNN_LIBRARY / $KILN_CUBLAS_LIBRARY (a
// path: only it), else libcudnn.so.9 / libcublas.so.13 (then .12) by the
// loader's search path, else /usr/local/cuda/lib64.
//
// GpuConv and GpuGemm are one library call each, set up once for one shape
// when a plan loads (descriptors, the algorithm, the workspace it needs) and
// then enqueued on any stream of the device. The libraries' handles are one
// per stream (cuDNN's and cuBLAS's handles must not be used by two threads at
// once): a call holds its stream's handle while it enqueues.
//
// Numerics: FP32 buffers compute in FP32, no TF32 (the GPU's results stay
// within FP32 rounding of the host's) unless KILN_GPU_TF32=1; FP16 buffers
// use tensor cores and accumulate in FP32.
//
// Thread-safety: library tables are immutable once loaded; GpuConv and
// GpuGemm are immutable after create() and enqueue() may be called from any
// thread.
#pragma once

#include "runtime/cuda/CudaDevice.h"

#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <memory>

namespace kiln::cuda {

/// Whether cuDNN and cuBLAS can be loaded here (no GPU needed), and if not,
/// why; tests and `kiln --version`-style reports use it.
bool cudnnAvailable(std::string *why = nullptr);
bool cublasAvailable(std::string *why = nullptr);

/// Makes `stream`'s cuDNN (and, with `cublas`, cuBLAS) handle now, so that
/// work captured into a CUDA graph on it does not create one.
llvm::Error prepareLibraryHandles(CudaStream &stream, bool cudnn, bool cublas);

/// A 2-D convolution, NHWC input, OHWI (KRSC) filter, NHWC output, FP32
/// (or FP16 with FP32 accumulation and tensor cores when `half`), no
/// padding (the plan pads before): y = conv(x, w) + y when `accumulate`
/// (the output holds the bias already), else y = conv(x, w).
struct ConvShape {
  int n = 0, h = 0, w = 0, c = 0;  // input
  int k = 0, r = 0, s = 0;         // filter: k outputs, r x s window over c
  int p = 0, q = 0;                // output rows and columns
  std::array<int, 2> stride{1, 1}, dilation{1, 1};
  bool half = false;
  bool accumulate = true;
};

/// How a convolution's algorithm and math are chosen (RuntimeOptions'
/// gpuConvAlgo and gpuTf32).
struct ConvChoice {
  /// Each algorithm timed once on the device (cuDNN's Find; ResNet-50 on an
  /// H200 ran 1.3-1.7x faster than with the heuristics' choices), else
  /// cuDNN's heuristics.
  bool timed = true;
  /// FP32 convolutions may use TF32 tensor cores.
  bool tf32 = false;
};

class GpuConv {
public:
  /// cuDNN's descriptors for `shape` and its fastest algorithm within the
  /// workspace limit, chosen as `how` says. kUnavailable without cuDNN;
  /// kInvalidArgument for shapes cuDNN refuses (the message names the shape).
  static llvm::Expected<std::unique_ptr<GpuConv>> create(CudaDevice &device, const ConvShape &shape,
                                                         ConvChoice how = {});
  ~GpuConv();
  /// Scratch the call needs (a device buffer of at least this many bytes).
  size_t workspaceBytes() const { return workspaceBytes_; }
  /// The algorithm cuDNN chose (its enum value), for profiles.
  int algorithm() const { return algorithm_; }
  llvm::Error enqueue(CudaStream &stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr workspace,
                      size_t workspaceBytes) const;

private:
  GpuConv() = default;
  struct Descriptors;
  std::unique_ptr<Descriptors> d_;
  ConvShape shape_;
  size_t workspaceBytes_ = 0;
  int algorithm_ = 0;
};

/// `batch` row-major products C[b] (m x n) = A[b] (m x k) * B[b] (k x n)
/// (+ C[b] when `accumulate`), FP32 (or FP16 with FP32 accumulation when
/// `half`); a batch of 1 A broadcast over B's batch when `broadcastA` (and
/// likewise B).
struct GemmShape {
  int batch = 1, m = 0, n = 0, k = 0;
  bool half = false;
  bool broadcastA = false, broadcastB = false;
  bool accumulate = true;
};

class GpuGemm {
public:
  static llvm::Expected<std::unique_ptr<GpuGemm>> create(CudaDevice &device, const GemmShape &shape);
  llvm::Error enqueue(CudaStream &stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) const;

private:
  GpuGemm() = default;
  GemmShape shape_;
};

}  // namespace kiln::cuda
