// The CPU lowering pipeline, stage by stage. Each stage is a textual pass
// pipeline, registered under the same name for kiln-opt so lit tests run
// exactly what the runtime runs:
//   kiln-tosa-to-linalg   TOSA (+ tensor/arith) -> linalg on tensors, fused
//   kiln-bufferize        tensors -> memrefs, results -> out-params, deallocs
//   kiln-lower-to-llvm    loops -> LLVM dialect, bare-pointer ABI, kiln_entry
#pragma once

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace kiln::lowering {

struct PipelineStage {
  const char *name;      // kiln-opt pipeline name
  const char *pipeline;  // textual pipeline on builtin.module
};
/// The stages in order.
llvm::ArrayRef<PipelineStage> cpuPipelineStages();

/// Registers MLIR's passes, kiln's passes and the pipelines above (once).
void registerKilnPassesAndPipelines();
/// Every dialect, extension and translation kiln's pipelines touch.
void registerKilnDialects(mlir::DialectRegistry &registry);

}  // namespace kiln::lowering
