// The JIT-on-first-call compile service: specialized graph -> placement
// (JIT clusters and handwritten kernels) -> each cluster lowered and compiled
// to a host object -> objects linked -> an Executable of steps.
//
// A cluster whose compilation fails falls back to kernels for its ops (with
// a warning and a counter) and the call still succeeds when kernels exist.
//
// Thread-safety: Compiler methods may run concurrently (MLIR work is
// serialized per Program). A CompiledFunction is immutable once built; its
// Executable may run any number of times at once.
#pragma once

#include "codegen/HostCodegen.h"
#include "jit/JitEngine.h"
#include "jit/Plan.h"
#include "lowering/Partition.h"
#include "lowering/Program.h"
#include "runtime/Executable.h"
#include "runtime/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::jit {

struct CompileStats {
  lowering::StageTimes stages;  // specialize, lowering stages, translate, llvm-opt, ...
  double totalMs = 0;
  size_t objectBytes = 0;
  bool fromObject = false;      // linked from existing objects (cache), not compiled
  int jitFallbacks = 0;         // clusters that failed to compile and went to kernels
  std::vector<std::string> warnings;
};

class CompiledFunction {
public:
  using EntryFn = void (*)(void **buffers);
  std::string function;
  std::vector<TensorType> inputTypes;   // static
  std::vector<TensorType> resultTypes;  // static
  std::vector<Tensor> weights;          // the plan's kWeight values, by index
  CompileStats stats;
  ExecPlan plan;
  std::vector<llvm::SmallVector<char, 0>> objects;  // ELF objects of the JIT steps
  std::shared_ptr<Executable> executable;

  /// The entry point of plan step `step` (null for kernel steps).
  EntryFn directEntry(size_t step) const { return step < entries_.size() ? entries_[step] : nullptr; }

  /// "N ops: A JIT in K kernels, B handwritten (...)"
  const std::string &placementSummary() const { return plan.summary; }

private:
  friend class Compiler;
  std::vector<std::shared_ptr<LoadedObject>> code_;  // per object; shared with steps
  std::vector<EntryFn> entries_;                     // per plan step (null for kernels)
};

class Compiler {
public:
  static llvm::Expected<std::unique_ptr<Compiler>> create(codegen::CodegenOptions options = {});
  const codegen::TargetDescription &target() const { return codegen_->target(); }

  llvm::Expected<std::shared_ptr<CompiledFunction>>
  compile(lowering::Program &program, llvm::StringRef function,
          llvm::ArrayRef<TensorType> inputTypes, const lowering::PlacementOptions &placement = {});

  /// The same code bound to other weights (a module with the same graph and
  /// other weight values): shares the loaded code, gets its own executable.
  llvm::Expected<std::shared_ptr<CompiledFunction>> bind(const CompiledFunction &code,
                                                         std::vector<Tensor> weights);

  /// A CompiledFunction from a plan and objects compiled earlier (a cache
  /// entry): no MLIR and no LLVM code generation, only linking.
  llvm::Expected<std::shared_ptr<CompiledFunction>>
  load(llvm::StringRef function, std::vector<TensorType> inputTypes,
       std::vector<TensorType> resultTypes, std::vector<Tensor> weights, ExecPlan plan,
       std::vector<llvm::SmallVector<char, 0>> objects);

private:
  Compiler() = default;
  /// Links the objects, finds each JIT step's entry, builds the executable.
  llvm::Error link(CompiledFunction &out);
  static llvm::Error buildExecutable(CompiledFunction &out);

  std::unique_ptr<codegen::HostCodegen> codegen_;
  std::shared_ptr<JitEngine> engine_;
};

}  // namespace kiln::jit
