// GpuLowering: what the GPU target runs for one cluster, read off the
// cluster after the GPU pipeline (Pipelines.h, gpuPipelineStages).
//
// The pipeline leaves a host function that only launches kernels (and may
// allocate temporaries, copy buffers, reshape views and read small
// constants) and gpu.modules with the kernels in LLVM dialect.
// readGpuLowering (called by Program::lowerToGpu after the stages) turns
// that into
//   - one LLVM IR module with every kernel (for codegen's NVPTX backend),
//     named kiln_<cluster>_k<i>, and the device side of fault reporting;
//   - a GpuPlan: the launches in order, over numbered buffers, that a
//     device runtime replays on a stream without any host code.
// Host code the plan cannot express is an error naming the op and where.
#pragma once

#include "lowering/ir/StageTimes.h"
#include "runtime/Error.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::lowering {

/// GPU code generation settings (see gpuPipelineStages).
struct GpuTuning {
  int64_t blockSize = 256;  // threads per block of elementwise/parallel loops
  /// Convolutions through cuDNN and matrix products through cuBLAS (else
  /// generated kernels): kiln-gpu-library-calls.
  bool cudnnConv = true, cublasMatmul = true;
  std::string passOptions() const { return "block-size=" + std::to_string(blockSize); }
  std::string libraryOptions() const {
    return std::string("conv=") + (cudnnConv ? "true" : "false") + " matmul=" + (cublasMatmul ? "true" : "false");
  }
};

/// One kernel parameter: a buffer's device address or a scalar's bytes.
struct GpuKernelArg {
  enum class Kind : uint8_t { kBuffer, kScalar };
  Kind kind = Kind::kBuffer;
  int buffer = -1;     // kBuffer: GpuPlan buffer id
  uint64_t bits = 0;   // kScalar: the value, little-endian in `bytes` bytes
  uint8_t bytes = 0;   // kScalar: 1, 2, 4 or 8
};

/// Attributes of the calls kiln-gpu-library-calls makes: the library
/// operation (GpuLaunch::kConv2dNhwcFhwc, kMatmul) and its parameters.
inline constexpr llvm::StringLiteral kGpuLibraryAttr = "kiln.gpu_library";
inline constexpr llvm::StringLiteral kGpuParamsAttr = "kiln.gpu_params";

/// One operation of the plan, in stream order.
struct GpuLaunch {
  enum class Kind : uint8_t { kKernel, kCopy, kLibrary };
  /// kLibrary operations (`kernel` holds the name), their `params` and `args`:
  ///   conv2d_nhwc_fhwc: N,H,W,C, K,R,S, P,Q, stride h,w, dilation h,w,
  ///                     element type; input [N,H,W,C], filter [K,R,S,C],
  ///                     output [N,P,Q,K] (accumulated into: it holds the
  ///                     bias); cuDNN
  ///   matmul:           batch, M, N, K, element type; A [batch,M,K],
  ///                     B [batch,K,N], C [batch,M,N] accumulated into; cuBLAS
  /// Element types (the last parameter): kF32, kF16 (FP16 buffers, FP32
  /// accumulation).
  static constexpr const char *kConv2dNhwcFhwc = "conv2d_nhwc_fhwc";
  static constexpr const char *kMatmul = "matmul";
  static constexpr size_t kConvParams = 14, kMatmulParams = 5;
  static constexpr int64_t kF32 = 0, kF16 = 1;
  /// Bytes of a library call's element type, 0 for an unknown one.
  static uint64_t elementBytes(int64_t type) { return type == kF32 ? 4 : type == kF16 ? 2 : 0; }
  Kind kind = Kind::kKernel;
  std::string kernel;                    // kKernel: symbol in the device module; kLibrary: the operation
  std::array<uint32_t, 3> grid{1, 1, 1}; // kKernel: blocks
  std::array<uint32_t, 3> block{1, 1, 1};// kKernel: threads per block
  uint32_t sharedBytes = 0;              // kKernel: dynamic shared memory
  std::vector<GpuKernelArg> args;        // kKernel; kLibrary: its buffers
  std::vector<int64_t> params;           // kLibrary
  int src = -1, dst = -1;                // kCopy: buffer ids
  uint64_t bytes = 0;                    // kCopy
};

/// Buffers are numbered: the cluster's arguments first (inputs, weights,
/// outputs: 0..numArguments-1), then temporaries, then constants.
struct GpuPlan {
  uint32_t numArguments = 0;
  std::vector<uint64_t> argumentBytes;          // bytes of each argument buffer
  std::vector<uint64_t> temporaries;            // bytes of each temporary
  std::vector<std::vector<char>> constants;     // contents, uploaded once at load
  std::vector<GpuLaunch> launches;
  std::vector<std::string> faultSites;          // kiln-guard-traps' messages by site id
  /// Device global (i64) a kernel's fault stores its site id + 1 into; 0 = none.
  static constexpr const char *kFaultWord = "kiln_fault_word";

  int firstTemporary() const { return int(numArguments); }
  int firstConstant() const { return int(numArguments + temporaries.size()); }
  int numBuffers() const { return firstConstant() + int(constants.size()); }
};

/// The kernels as one LLVM IR module for NVPTX, and the launch plan.
struct GpuLowered {
  std::unique_ptr<llvm::Module> device;
  GpuPlan plan;
};

/// Runs `body` with MLIR's diagnostics captured into the error it returns
/// on failure (Program's diagnose: its message says `what` failed).
using DiagnoseFn = std::function<llvm::Error(ErrorCode code, llvm::StringRef what,
                                             std::function<mlir::LogicalResult()> body)>;

/// Reads the launches and kernels off `module` (the cluster `function`
/// after the GPU pipeline stages): an `unsupported` error names host code
/// the plan cannot express; the kernels' translation to LLVM IR adds a
/// "translate" stage to `times`.
llvm::Expected<GpuLowered> readGpuLowering(mlir::ModuleOp module, llvm::StringRef function,
                                           llvm::LLVMContext &llvmContext, const DiagnoseFn &diagnose,
                                           StageTimes &times);

}  // namespace kiln::lowering
