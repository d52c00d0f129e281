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
  bool fromObject = false;  // linked from an existing object (cache), not compiled
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

  /// The same code bound to other weights (a module with the same graph and
  /// other weight values): shares the loaded code, gets its own executable.
  llvm::Expected<std::shared_ptr<CompiledFunction>> bind(const CompiledFunction &code,
                                                         std::vector<Tensor> weights);

  /// A CompiledFunction from an object compiled earlier (a cache entry): no
  /// MLIR and no LLVM code generation, only linking.
  llvm::Expected<std::shared_ptr<CompiledFunction>>
  load(llvm::StringRef function, std::vector<TensorType> inputTypes,
       std::vector<TensorType> resultTypes, std::vector<Tensor> weights,
       llvm::ArrayRef<char> object, llvm::StringRef entrySymbol);

private:
  Compiler() = default;
  /// Links `out->object` and builds the executable.
  llvm::Error link(CompiledFunction &out, llvm::StringRef entrySymbol);
  /// One JIT step over inputs, weights (constants) and outputs.
  static llvm::Error buildExecutable(CompiledFunction &out);
  std::unique_ptr<codegen::HostCodegen> codegen_;
  std::shared_ptr<JitEngine> engine_;
};

}  // namespace kiln::jit
