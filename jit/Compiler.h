// The JIT-on-first-call compile service: specialized graph -> lowering ->
// host object -> loaded code, as a CompiledFunction that can be called with
// tensors. Op semantics live in lowering/; this file only sequences stages.
//
// Thread-safety: Compiler::compile may run concurrently (MLIR work is
// serialized per Program). A CompiledFunction is immutable once compiled;
// its Executable may run any number of times at once.
#pragma once

#include "codegen/HostCodegen.h"
#include "jit/JitEngine.h"
#include "lowering/Program.h"
#include "runtime/Executable.h"
#include "runtime/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::jit {

struct CompileStats {
  lowering::StageTimes stages;  // specialize, each lowering stage, translate, llvm-opt, ...
  double totalMs = 0;
  size_t objectBytes = 0;
};

class CompiledFunction {
public:
  using EntryFn = void (*)(void **buffers);
  std::string function;
  std::vector<TensorType> inputTypes;   // static
  std::vector<TensorType> resultTypes;  // static
  std::vector<Tensor> weights;          // passed after the inputs
  CompileStats stats;
  llvm::SmallVector<char, 0> object;    // the ELF object, for caches
  /// One step calling the code: inputs, then weights (constants) -> outputs.
  std::shared_ptr<Executable> executable;

  EntryFn entry() const { return entry_; }

private:
  friend class Compiler;
  std::shared_ptr<LoadedObject> code_;  // shared with the executable's step
  EntryFn entry_ = nullptr;
};

class Compiler {
public:
  static llvm::Expected<std::unique_ptr<Compiler>> create(codegen::CodegenOptions options = {});
  const codegen::TargetDescription &target() const { return codegen_->target(); }

  llvm::Expected<std::shared_ptr<CompiledFunction>>
  compile(lowering::Program &program, llvm::StringRef function,
          llvm::ArrayRef<TensorType> inputTypes);

private:
  Compiler() = default;
  std::unique_ptr<codegen::HostCodegen> codegen_;
  std::shared_ptr<JitEngine> engine_;
};

}  // namespace kiln::jit
