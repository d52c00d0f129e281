#include "lowering/pipelines/Pipelines.h"
#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/guards/Passes.h"
#include "lowering/pipelines/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include <mutex>

namespace kiln::lowering {

std::vector<PipelineStage> cpuPipelineStages(const CpuTuning &tuning) {
  return {
      // include-apply-rescale: tosa.rescale lowers through tosa.apply_scale.
      // kiln-guard-traps: zero divisors and out-of-range indices become
      // reported faults, never signals or stray accesses.
      // kiln-reduction-inits: float max/min reductions from -inf/+inf (TOSA's
      // start; tosa-to-linalg takes the largest finite values).
      // kiln-fuse-elementwise: linalg-fuse-elementwise-ops with a bound on the
      // fused body (linear compile time on long chains).
      // kiln-cancel-points: while loops stop when their call is cancelled.
      // convert-elementwise-to-linalg: tosa-to-arith leaves arith ops on
      // tensors (a tensor-level tosa.apply_scale), which bufferization cannot take.
      // kiln-winograd-conv: convs on Winograd-stored filters in Winograd form
      // (before tosa-to-linalg lowers them as direct convs).
      // kiln-grouped-conv-to-linalg: kiln's grouped conv custom op as linalg.
      {"kiln-tosa-to-linalg",
       "builtin.module(func.func(kiln-winograd-conv{vector-bits=" + std::to_string(tuning.vectorBits) +
           "},kiln-grouped-conv-to-linalg,tosa-optional-decompositions),"
       "func.func(tosa-infer-shapes,tosa-make-broadcastable,tosa-to-scf),kiln-cancel-points,"
       "func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith{include-apply-rescale},tosa-to-tensor,"
       "convert-elementwise-to-linalg,kiln-reduction-inits),"
       "canonicalize,func.func(kiln-fuse-elementwise),canonicalize,cse,kiln-guard-traps)"},
      // Tiling, register blocking and vectorization per op (kiln-cpu-strategy).
      {"kiln-cpu-tile-vectorize",
       "builtin.module(kiln-cpu-strategy{" + tuning.passOptions() + "},canonicalize,cse)"},
      // allow-return-allocs-from-loops: tosa.while_loop bodies yield new buffers.
      // kiln-distinct-results: no two results share a buffer (out-params).
      // inline: the deallocation helper takes dynamic memrefs, which the
      // bare-pointer ABI of the last stage cannot express; inline it away.
      {"kiln-bufferize",
       "builtin.module(func.func(eliminate-empty-tensors),"
       "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
       "function-boundary-type-conversion=identity-layout-map},"
       "canonicalize,kiln-distinct-results,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
       "canonicalize,func.func(kiln-reshaped-out-params),buffer-deallocation-pipeline,inline,symbol-dce,canonicalize)"},
      // kiln-prefetch-streams: rows of streamed weights fetched into L2 ahead
      // of the register tiles that read them.
      // kiln-scratch-buffers: a kernel's temporaries in the scratch buffer
      // the executor plans for its step (warm memory, no malloc per call).
      {"kiln-lower-to-llvm",
       "builtin.module(func.func(kiln-prefetch-streams{distance-bytes=" + std::to_string(tuning.prefetchBytes) +
           " min-stream-bytes=" + std::to_string(tuning.l2Bytes / 2) + "}),kiln-scratch-buffers,kiln-strided-copies,kiln-outline-parallel,func.func(convert-vector-to-scf{full-unroll},convert-linalg-to-loops),lower-affine,convert-scf-to-cf,"
       "canonicalize,cse,convert-math-to-llvm,convert-math-to-libm,convert-vector-to-llvm,"
       "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
       "convert-func-to-llvm{use-bare-ptr-memref-call-conv},convert-arith-to-llvm,"
       "convert-index-to-llvm,convert-ub-to-llvm,convert-cf-to-llvm,"
       "reconcile-unrealized-casts,kiln-parallel-launchers,kiln-entry-wrapper)"},
  };
}

std::vector<PipelineStage> gpuPipelineStages(const CpuTuning &cpu, const GpuTuning &gpu) {
  std::vector<PipelineStage> cpuStages = cpuPipelineStages(cpu);
  return {
      cpuStages[0],  // kiln-tosa-to-linalg
      cpuStages[2],  // kiln-bufferize
      // Every linalg op (strided copies too) becomes parallel loops
      // (reductions stay sequential
      // inside a thread), views fold into the loads and stores, loops are flattened and tiled into blocks of threads, then
      // outlined into one kernel per loop nest (no canonicalize between
      // tiling and mapping: it merges the block and thread loops back into
      // one); gpu-launch-sink-index-
      // computations keeps constants out of the kernels' parameters.
      {"kiln-gpu-map",
       "builtin.module(kiln-strided-copies{as-linalg},kiln-gpu-library-calls{" + gpu.libraryOptions() +
           "},func.func(convert-linalg-to-parallel-loops,fold-memref-alias-ops,kiln-gpu-tile-parallel{" + gpu.passOptions() +
           "},gpu-map-parallel-loops,convert-parallel-loops-to-gpu),"
           "gpu-launch-sink-index-computations,gpu-kernel-outlining,canonicalize,cse)"},
      // Kernels take one pointer per memref (bare-pointer convention).
      {"kiln-gpu-to-nvvm",
       "builtin.module(gpu.module(lower-affine,convert-scf-to-cf,"
       "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv},canonicalize,cse,reconcile-unrealized-casts))"},
  };
}

void registerKilnStagePasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    registerKilnGuardsPasses();
    registerKilnCpuPasses();
    registerKilnGpuPasses();
    registerKilnPipelinesPasses();
    // kiln-opt's stages use the AVX-512 tuning, so that lit tests do not
    // depend on the machine.
    CpuTuning avx512 = CpuTuning::fromFeatures("+avx512f");
    std::vector<PipelineStage> stages = cpuPipelineStages(avx512);
    for (const PipelineStage &stage : gpuPipelineStages(avx512, GpuTuning()))
      if (stage.name.rfind("kiln-gpu-", 0) == 0) stages.push_back(stage);
    for (const PipelineStage &stage : stages) {
      std::string text = stage.pipeline;
      mlir::PassPipelineRegistration<>(
          stage.name, "kiln lowering stage",
          [text](mlir::OpPassManager &pm) {
            // The nested builtin.module(...) is anchored on the module itself.
            llvm::StringRef body = llvm::StringRef(text).drop_front(strlen("builtin.module("))
                                       .drop_back();
            if (failed(mlir::parsePassPipeline(body, pm)))
              llvm::report_fatal_error("kiln: bad built-in pipeline");
          });
    }
  });
}

void registerKilnDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
}

}  // namespace kiln::lowering
