// NVIDIA GPU code generation: LLVM IR kernels -> PTX through LLVM's NVPTX
// backend for a chosen architecture (default sm_90, PTX 8.0), with CUDA's
// libdevice linked in for math functions; PTX -> cubin through the CUDA
// toolkit's `ptxas` where it is installed (else the driver JIT-compiles the
// PTX at load). Knows nothing about ops, graphs or the CUDA runtime.
//
// Thread-safety: immutable after creation; emitPTX and assemble may run on
// several threads at once (each builds its own TargetMachine / process).
#pragma once

#include "codegen/HostCodegen.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace kiln::codegen {

struct NvptxOptions {
  std::string chip = "sm_90";      // compute capability, sm_XY[a]
  std::string features = "+ptx80"; // PTX ISA version (sm_90 needs >= 7.8)
  int optLevel = 3;
  /// CUDA toolkit: nvvm/libdevice/libdevice.10.bc and bin/ptxas ("" = none;
  /// then math functions cannot be used and no cubin is made).
  std::string cudaPath = "/usr/local/cuda";
  /// Assemble PTX to a cubin with ptxas when it is found.
  bool cubin = true;
};

/// What one device module compiles to.
struct DeviceObject {
  std::string ptx;           // NUL-free text; loaders add the terminating NUL
  std::vector<char> cubin;   // empty when ptxas is absent or disabled
};

struct DeviceTimes {
  double linkMs = 0, optimizeMs = 0, emitMs = 0, assembleMs = 0;
};

class NvptxCodegen {
public:
  /// Fails when the NVPTX backend is not in this LLVM or the chip is unknown.
  static llvm::Expected<std::unique_ptr<NvptxCodegen>> create(NvptxOptions options = {});
  const NvptxOptions &options() const { return options_; }
  /// "nvptx64-nvidia-cuda sm_90 +ptx80 O3 ptxas 13.0" (for cache keys).
  std::string description() const;
  /// The ptxas used for cubins ("" = none).
  const std::string &ptxasPath() const { return ptxas_; }

  /// Links libdevice, optimizes `module` in place for the chip, emits PTX
  /// and (with ptxas) a cubin. With `dumps`, also the optimized IR.
  llvm::Expected<DeviceObject> compile(llvm::Module &module, DeviceTimes *times = nullptr,
                                       ObjectDumps *dumps = nullptr) const;
  /// `ptx` -> cubin with ptxas; errors carry ptxas' own message.
  llvm::Expected<std::vector<char>> assemble(llvm::StringRef ptx) const;

private:
  NvptxCodegen() = default;
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> makeTargetMachine() const;
  NvptxOptions options_;
  std::string libdevice_, ptxas_, ptxasVersion_;
};

}  // namespace kiln::codegen
