// The CPU lowering pipeline, stage by stage. Each stage is a textual pass
// pipeline, registered under the same name for kiln-opt so lit tests run
// exactly what the runtime runs:
//   kiln-tosa-to-linalg   TOSA (+ tensor/arith) -> linalg on tensors, fused
//   kiln-cpu-tile-vectorize  per-op tiling and vectorization (kiln-cpu-strategy)
//   kiln-bufferize        tensors -> memrefs, results -> out-params, deallocs
//   kiln-lower-to-llvm    loops -> LLVM dialect, bare-pointer ABI, kiln_entry
// and the GPU stages (gpuPipelineStages).
#pragma once

#include <string>
#include <vector>

#include "lowering/cpu/CpuStrategy.h"
#include "lowering/gpu/GpuLowering.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace kiln::lowering {

struct PipelineStage {
  std::string name;      // kiln-opt pipeline name
  std::string pipeline;  // textual pipeline on builtin.module
};
/// The stages in order, for a CPU with `tuning`.
std::vector<PipelineStage> cpuPipelineStages(const CpuTuning &tuning);

/// The stages for an NVIDIA GPU: the CPU pipeline's kiln-tosa-to-linalg and
/// kiln-bufferize, then
///   kiln-gpu-map     parallel loops -> thread blocks -> gpu.launch_func of
///                    outlined gpu.func kernels (host code keeps launches)
///   kiln-gpu-to-nvvm the kernels' gpu.modules -> LLVM dialect + NVVM
/// after which GpuLowering.h reads the launches and translates the kernels
/// to LLVM IR for NVPTX.
std::vector<PipelineStage> gpuPipelineStages(const CpuTuning &cpu, const GpuTuning &gpu);

/// Registers MLIR's passes, the passes of the rooms the stages use (guards,
/// cpu, gpu, pipelines) and the stages above as named pipelines (once).
/// lowering/graph's registerKilnPassesAndPipelines adds the graph passes.
void registerKilnStagePasses();
/// Every dialect, extension and translation kiln's pipelines touch.
void registerKilnDialects(mlir::DialectRegistry &registry);

}  // namespace kiln::lowering
