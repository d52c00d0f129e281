// Program: an imported MLIR module (TOSA and/or linalg on tensors) and the
// CPU lowering of its functions.
//
//   Program::parse        parse (text or bytecode) + verify + dialect check
//   Program::specialize   one function at one static shape signature, with
//                         large constants hoisted out as weights
//   Program::lowerToLLVMIR the specialized function through the CPU pipeline
//                         into an llvm::Module exposing `kiln_entry`
//
// Thread-safety: all methods may be called from several threads. Each Program
// owns its own (threaded) MLIRContext; work on its module is serialized by an
// internal lock, and lowerings of specialized functions run concurrently once
// one lowering through the same pipeline has succeeded (Impl::LoweringLock).
#pragma once

#include "lowering/cpu/CpuStrategy.h"
#include "lowering/gpu/GpuLowering.h"
#include "lowering/ir/Conventions.h"
#include "lowering/ir/StageTimes.h"
#include "runtime/Signature.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm
namespace mlir {
class MLIRContext;
class ModuleOp;
}  // namespace mlir

namespace kiln::ops {
struct PlacementOptions;
}

namespace kiln::lowering {

struct PartitionedFunction;
class KernelOracle;


using kiln::ArgumentInfo;
using kiln::FunctionSignature;

/// Layouts weights are stored in, chosen once when they are hoisted (at load
/// or first specialization), never per call.
struct WeightLayouts {
  /// Constant tosa.conv2d filters (f32, used only as filters) stored HWCF,
  /// the layout kiln-cpu-strategy's convolutions read; the graph transposes
  /// them back to FHWC, which cancels against the strategy's own transpose.
  bool convFiltersHWCF = false;
  /// Constant filters of 3x3 stride-1 f32 tosa.conv2d ops with enough
  /// output tiles stored Winograd-transformed (G g G^T, [a, a, C, F] for
  /// F(m x m, 3 x 3), a = m + 2); the graph reads them back through
  /// `tosa.custom kiln.winograd_filter`, which kiln-winograd-conv folds
  /// into the conv's Winograd form (lowering/cpu/WinogradConv.cpp).
  bool convWinograd = false;
  /// Constant weights whose rows generated code walks down, column block by
  /// column block, stored with their rows padded so that consecutive rows do
  /// not start a multiple of 256 bytes apart (rowPaddingOf): tosa.matmul's B
  /// operands (padMatmulWeights) and the conv filters stored HWCF
  /// (padFilterRows). The graph reads them back through tosa.slice, which
  /// generated code folds into its loads. Rows a power of two of cache lines
  /// apart all fall into a few L1 sets, and the block of a weight that a
  /// register tile reuses across rows no longer fits: BERT's 768x3072 weight
  /// (12 KiB rows) ran at 22% of peak on AVX2, 61% padded.
  bool padMatmulWeights = false;
  bool padFilterRows = false;
  /// With convFiltersHWCF: filters of convs that stream their filter
  /// (streamingFilterBlock for `tuning`) stored in panels [F/fc, KH, KW, C,
  /// fc], one contiguous block per parallel block of the conv strategy
  /// (which reads it there, kiln-cpu-strategy), and read back by the graph
  /// as FHWC through tosa.transpose + tosa.reshape, which the strategy folds
  /// away.
  bool panelStreamingFilters = false;
  /// With padMatmulWeights: tosa.matmul B operands that generated code
  /// streams from memory (matmulPanelWidth for `tuning`: bigger than L2)
  /// stored in panels [N/w, K, w] of one register tile's w columns (each
  /// tile's k block of B one contiguous run), read back by the graph as
  /// [1, K, N] through tosa.transpose + tosa.reshape, which the matmul
  /// strategy folds into its reads (kiln-cpu-strategy).
  bool panelMatmulWeights = false;
  CpuTuning tuning;
  /// Every layout above off: weights stored as the model has them (a
  /// kernel plan's, and the cache key's graph).
  bool plain() const {
    return !convFiltersHWCF && !convWinograd && !padMatmulWeights && !padFilterRows && !panelStreamingFilters &&
           !panelMatmulWeights;
  }
};
/// Elements added to each row of `n` f32 elements (see
/// WeightLayouts::padMatmulWeights): one cache line when rows are a multiple of
/// 256 bytes long, so that they are an odd number of lines apart; else 0.
inline int64_t rowPaddingOf(int64_t n) { return n > 0 && n % 64 == 0 ? 16 : 0; }

/// A function specialized to one shape signature; owns its MLIR module.
class SpecializedFunction {
public:
  ~SpecializedFunction();
  std::string function;                // original name
  std::vector<TensorType> inputTypes;  // static
  std::vector<TensorType> resultTypes; // static
  std::vector<Tensor> weights;         // hoisted constants, passed after the inputs
  /// The specialized graph as MLIR text (weights elided), e.g. for cache keys.
  std::string printGraph() const;
  /// Set on partitioned clusters: a hash of the cluster's full text (generic
  /// form, no locations). Two clusters of one program with equal
  /// fingerprints compile to the same code.
  std::string fingerprint;

  struct Impl;  // defined in ProgramImpl.h
private:
  friend class Program;
  std::unique_ptr<Impl> impl;
};

class Program {
public:
  /// Parses MLIR text or bytecode. `bufferName` names the source in errors.
  static llvm::Expected<std::unique_ptr<Program>> parse(llvm::StringRef source,
                                                        llvm::StringRef bufferName);
  static llvm::Expected<std::unique_ptr<Program>> parseFile(llvm::StringRef path);
  ~Program();

  /// Public functions, in module order.
  const std::vector<FunctionSignature> &functions() const;
  const FunctionSignature *lookup(llvm::StringRef name) const;
  /// What the graph rewrites run at load (transpose propagation, constant
  /// folding) changed: "558 -> 352 ops in 41.2 ms (tosa.sub 53 -> 0, ...)".
  const std::string &graphRewrites() const;
  /// Where the load's time went: read (parseFile), literals (big hex
  /// literals decoded), parse, verify, then each load-time graph rewrite.
  const StageTimes &loadTimes() const;

  /// Specializes `function` to static `inputs` (which must match its signature).
  llvm::Expected<std::unique_ptr<SpecializedFunction>>
  specialize(llvm::StringRef function, llvm::ArrayRef<TensorType> inputs, StageTimes &times,
             const WeightLayouts &layouts = {});

  /// The hoisted weights of `function`, in the order compiled code takes
  /// them, found without running any pass (for code from a cache).
  llvm::Expected<std::vector<Tensor>> weights(llvm::StringRef function, const WeightLayouts &layouts = {});
  /// A large constant operand of an op of `function` as loaded (before
  /// specialization): the tensor weight hoisting will bind for it (the same
  /// buffer `weights` returns), with the op and its operands' types.
  struct ConstantOperand {
    std::string op;  // "tosa.conv2d", or "tosa.custom:<name>" for a tosa.custom
    std::vector<TensorType> operandTypes;
    unsigned operand = 0;
    Tensor value;
  };
  /// The large constant operands of `function`'s ops named in `ops`: what a
  /// compiler can prepare (kernels' packed filters) while the function is
  /// specialized and partitioned. Operands whose types are not tensors kiln
  /// handles are left out.
  std::vector<ConstantOperand> constantOperands(llvm::StringRef function, const std::set<std::string> &ops);
  /// `function` and its callees as kiln compiles them, in MLIR's generic
  /// form without locations, with weight values left out: two modules with
  /// the same text here get the same code (the cache key's graph part).
  llvm::Expected<std::string> canonicalGraph(llvm::StringRef function);
  /// Places every op of `fn` on JIT or a kernel and outlines JIT clusters
  /// of at most `anchorsPerCluster` anchor ops each (0 = no limit; see
  /// Partition.h); consumes `fn`'s MLIR. `measuredKernels`: signatures of
  /// `auto` ops a kernel ran faster, with the figures (placement by
  /// measurement).
  llvm::Expected<std::unique_ptr<PartitionedFunction>>
  partition(SpecializedFunction &fn, const ops::PlacementOptions &options, const KernelOracle &kernels,
            const std::set<std::string> &forceKernel, int64_t anchorsPerCluster = 1,
            const std::map<std::string, std::string> &measuredKernels = {});

  /// How many times MLIR pipelines ran (specializations + lowerings).
  uint64_t pipelineRuns() const;

  /// What the runtime must know about code lowerToLLVMIR made.
  struct CodeFacts {
    std::vector<std::string> faultSites;  // kiln-guard-traps' messages, by site id
    int64_t scratchBytes = 0;             // the scratch buffer it acquires (kiln-scratch-buffers)
    std::string strategy;                 // what kiln-cpu-strategy made of its ops (kStrategyAttr)
  };
  /// Runs the CPU pipeline on `fn` (consuming its MLIR) and translates to
  /// LLVM IR; with `dumpDir`, writes the IR after each stage there (and with
  /// `dumpEveryPass` after each pass, through MLIR's IR-printing
  /// instrumentation). What the runtime needs to run the code goes to `facts`.
  llvm::Expected<std::unique_ptr<llvm::Module>>
  lowerToLLVMIR(SpecializedFunction &fn, const CpuTuning &tuning, llvm::LLVMContext &llvmContext, StageTimes &times,
                llvm::StringRef dumpDir = "", CodeFacts *facts = nullptr, bool dumpEveryPass = false);

  /// Runs the GPU pipeline on `fn` (consuming its MLIR): the kernels as one
  /// LLVM IR module for NVPTX and the launch plan (see GpuLowering.h). With
  /// `dumpDir`, writes the IR after each stage there.
  using GpuLowered = lowering::GpuLowered;
  llvm::Expected<GpuLowered> lowerToGpu(SpecializedFunction &fn, const CpuTuning &cpu, const GpuTuning &gpu,
                                        llvm::LLVMContext &llvmContext, StageTimes &times,
                                        llvm::StringRef dumpDir = "", bool dumpEveryPass = false);

  /// Rejects dialects kiln does not lower; exposed for tests.
  static const std::vector<std::string> &supportedDialects();

private:
  friend class GraphBuilder;
  Program();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

}  // namespace kiln::lowering
