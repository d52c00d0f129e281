// HostTarget: the host CPU. Clusters go through lowering's CPU pipeline to
// LLVM IR, HostCodegen emits an object for this machine's CPU and features,
// and the ORC JitEngine links it against kiln's runtime symbols. A step calls
// the entry `void kiln_entry(void **buffers)` on an executor worker.
//
// Thread-safety: see Target.
#pragma once

#include "codegen/HostCodegen.h"
#include "jit/JitEngine.h"
#include "jit/Target.h"
#include "lowering/cpu/CpuStrategy.h"

#include <optional>

namespace kiln::jit {

struct HostTargetOptions {
  codegen::CodegenOptions codegen;
  /// Write the IR after each lowering stage into this directory ("" = off).
  std::string dumpIRDir;
  /// With dumpIRDir: also the IR after every pass (<kernel>.<n>.<stage>.passes/).
  bool dumpIRPasses = false;
  /// Per-op tiling and vectorization (kiln-cpu-strategy); false = loops.
  bool vectorize = true;
  /// Prefetch distance of streamed weight rows in bytes (CpuTuning::
  /// prefetchBytes); unset: the tuning's default.
  std::optional<int64_t> prefetchBytes;
  /// Register loaded code with perf (jitdump) and GDB (JitEngine).
  bool jitSymbols = false;
};

class HostTarget final : public Target {
public:
  static llvm::Expected<std::unique_ptr<HostTarget>> create(HostTargetOptions options = {});
  llvm::StringRef name() const override { return "host-cpu"; }
  std::string description() const override;
  std::string pipelineText() const override;
  StepKind stepKind() const override { return StepKind::kJit; }
  lowering::WeightLayouts weightLayouts(const ops::PlacementOptions &placement) const override;
  llvm::Expected<TargetObject> compile(lowering::Program &program, lowering::SpecializedFunction &cluster,
                                       lowering::StageTimes &times) override;
  std::string entrySymbol() const override;
  llvm::Expected<std::shared_ptr<LoadedCode>> load(llvm::ArrayRef<char> object, llvm::StringRef name) override;
  llvm::Expected<Launch> launch(std::shared_ptr<LoadedCode> code, llvm::StringRef symbol,
                                std::vector<std::string> faultSites) override;

  const codegen::TargetDescription &machine() const { return codegen_->target(); }

private:
  HostTarget() = default;
  HostTargetOptions options_;
  std::unique_ptr<codegen::HostCodegen> codegen_;
  std::shared_ptr<JitEngine> engine_;
  lowering::CpuTuning tuning_;
};

/// The error for a fault host code reported (jit::takeFault()), or success
/// for 0.
llvm::Error faultError(int64_t fault, llvm::ArrayRef<std::string> sites);

}  // namespace kiln::jit
