// GpuTarget: an NVIDIA GPU. Clusters go through lowering's GPU pipeline
// (linalg -> parallel loops -> thread blocks -> gpu kernels -> NVVM),
// codegen's NVPTX backend makes PTX (and a cubin where ptxas exists), and
// the object — PTX, cubin and the launch plan (lowering/gpu/GpuLowering.h) — is
// what the compile cache stores. Compiling needs no GPU; loading and
// running need the CUDA device runtime (runtime/cuda) and a GPU, and fail
// with an "unavailable" error naming what is missing.
//
// A step copies its inputs to device memory, replays the plan's launches on
// a stream of the device, copies its outputs back and finishes through a
// host callback (StepContext::defer): no executor worker waits for the GPU.
//
// Thread-safety: see Target.
#pragma once

#include "codegen/NvptxCodegen.h"
#include "jit/Target.h"
#include "lowering/gpu/GpuLowering.h"

namespace kiln::jit {

struct GpuTargetOptions {
  int device = 0;             // CUDA device ordinal
  /// Architecture to generate code for ("" = the device's when a GPU is
  /// present, else sm_90); overrides codegen.chip.
  std::string arch;
  codegen::NvptxOptions codegen;
  lowering::GpuTuning tuning;
  /// Write the IR after each lowering stage into this directory ("" = off).
  std::string dumpIRDir;
  /// With dumpIRDir: also the IR after every pass.
  bool dumpIRPasses = false;
  /// Replay each plan as one CUDA graph, captured on its first run, instead
  /// of launching its kernels one by one (RuntimeOptions::gpuGraphs;
  /// docs/gpu.md).
  bool graphs = false;
  /// cuDNN convolutions: algorithms timed once, else the heuristics' pick;
  /// TF32 tensor cores for FP32 (RuntimeOptions::gpuConvAlgo, gpuTf32).
  bool convTimed = true;
  bool tf32 = false;
  /// Every launch timed with CUDA events, totals on stderr when the code is
  /// unloaded (RuntimeOptions::gpuProfile).
  bool profile = false;
};

class GpuTarget final : public Target {
public:
  /// Needs no GPU (compiling works anywhere the NVPTX backend exists).
  static llvm::Expected<std::unique_ptr<GpuTarget>> create(GpuTargetOptions options = {});
  llvm::StringRef name() const override { return "cuda"; }
  std::string description() const override;
  std::string pipelineText() const override;
  StepKind stepKind() const override { return StepKind::kJit; }
  /// Whole connected JIT subgraphs per step: their intermediates never
  /// leave the device.
  int64_t anchorsPerCluster() const override { return 0; }
  llvm::Expected<TargetObject> compile(lowering::Program &program, lowering::SpecializedFunction &cluster,
                                       lowering::StageTimes &times) override;
  std::string entrySymbol() const override { return "kiln_gpu_plan"; }
  llvm::Expected<std::shared_ptr<LoadedCode>> load(llvm::ArrayRef<char> object, llvm::StringRef name) override;
  llvm::Expected<Launch> launch(std::shared_ptr<LoadedCode> code, llvm::StringRef symbol,
                                std::vector<std::string> faultSites) override;

  const codegen::NvptxCodegen &codegen() const { return *codegen_; }

private:
  GpuTarget() = default;
  GpuTargetOptions options_;
  std::unique_ptr<codegen::NvptxCodegen> codegen_;
};

/// What GpuTarget::compile produces, in a form that round-trips through
/// bytes (the TargetObject and the disk cache).
struct GpuObject {
  std::string arch;  // the chip the code was made for, e.g. sm_90
  std::string ptx;
  std::vector<char> cubin;  // empty without ptxas
  lowering::GpuPlan plan;
  llvm::SmallVector<char, 0> serialize() const;
  static llvm::Expected<GpuObject> parse(llvm::ArrayRef<char> bytes);
};

}  // namespace kiln::jit
