// kiln's public C++ API.
//
//   auto rt = kiln::Runtime::create({});                 // Expected<unique_ptr<Runtime>>
//   auto m  = (*rt)->loadModuleFromFile("model.mlir");   // TOSA / linalg on tensors
//   auto y  = (*m)->call("main", {x});                   // JIT-compiles on the first call
//   auto fs = (*m)->callAsync("main", {x});              // futures; returns at once
//
// Thread-safety: Runtime and Module are thread-safe; several threads may call
// the same Module at once. The first call for a shape signature compiles
// (concurrent first calls for one signature compile once); later calls reuse
// the compiled code. A Module keeps what it needs of its Runtime alive.
#pragma once

#include "lowering/Program.h"
#include "runtime/AsyncValue.h"
#include "runtime/Executor.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringMap.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {
namespace jit {
class Compiler;
class CompiledFunction;
}  // namespace jit

using lowering::ArgumentInfo;
using lowering::FunctionSignature;

struct RuntimeOptions {
  /// Worker threads for the executor (0 = the machine's cores).
  int threads = 0;
  /// Persistent compile cache directory ("" = default; used by the cache issue).
  std::string cacheDir;
  /// LLVM optimization level for generated code (0..3).
  int optLevel = 3;
  /// Threads for blocking work (compiles, file I/O), off the compute workers.
  int blockingThreads = 2;
};

class Module;

class Runtime {
public:
  static llvm::Expected<std::unique_ptr<Runtime>> create(RuntimeOptions options = {});
  ~Runtime();
  const RuntimeOptions &options() const { return options_; }
  /// "x86_64-pc-linux-gnu znver5" — what generated code targets.
  std::string targetDescription() const;
  /// The host executor every module of this runtime runs on.
  HostExecutor &executor() const { return *executor_; }

  /// Loads MLIR (text or bytecode) from a file or from memory.
  llvm::Expected<std::unique_ptr<Module>> loadModuleFromFile(llvm::StringRef path);
  llvm::Expected<std::unique_ptr<Module>> loadModule(llvm::StringRef source,
                                                     llvm::StringRef name = "<string>");

private:
  Runtime() = default;
  RuntimeOptions options_;
  std::shared_ptr<HostExecutor> executor_;
  std::shared_ptr<jit::Compiler> compiler_;
};

class Module {
public:
  ~Module();
  const std::vector<FunctionSignature> &functions() const;
  const FunctionSignature *signature(llvm::StringRef function) const;

  /// Runs `function` and waits for its results; compiles it first if this
  /// shape signature is new.
  llvm::Expected<std::vector<Tensor>> call(llvm::StringRef function,
                                           llvm::ArrayRef<Tensor> inputs);
  /// Starts `function` and returns one future per result at once (a first
  /// call compiles on the blocking pool). Errors, including bad inputs and
  /// compile failures, arrive as error values; for an unknown function the
  /// vector holds a single error value.
  std::vector<AsyncValueRef<Tensor>> callAsync(llvm::StringRef function,
                                               llvm::ArrayRef<Tensor> inputs);
  /// Compiles (or finds) `function` for these input types without running it
  /// (blocks; call it from a thread that may block, not an executor worker).
  llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
  compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes);

  /// Number of distinct (function, signature) compilations so far.
  size_t numCompiled() const;

private:
  friend class Runtime;
  Module(std::shared_ptr<jit::Compiler> compiler, std::shared_ptr<HostExecutor> executor,
         std::unique_ptr<lowering::Program> program);
  std::vector<AsyncValueRef<Tensor>> start(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                           bool inlineFirstStep);

  struct Entry {
    std::shared_ptr<const jit::CompiledFunction> fn;
    std::string error;  // set when the compile failed
    bool done = false;
  };
  std::shared_ptr<jit::Compiler> compiler_;
  std::shared_ptr<HostExecutor> executor_;
  std::unique_ptr<lowering::Program> program_;
  mutable std::mutex mu_;
  std::condition_variable compiled_;
  int firstCallsInFlight_ = 0;  // callAsync compiles that still use `this`
  llvm::StringMap<std::shared_ptr<Entry>> entries_;
};

/// "name:1x8x8x3xf32,4xi32" — the in-memory key of one specialization.
std::string signatureKey(llvm::StringRef function, llvm::ArrayRef<TensorType> types);

}  // namespace kiln
