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

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "lowering/Partition.h"
#include "lowering/Program.h"
#include "runtime/AsyncValue.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <condition_variable>
#include <optional>
#include <shared_mutex>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {
namespace jit {
class Compiler;
class CompiledFunction;
}  // namespace jit
namespace cache {
class CompileCache;
}  // namespace cache

using lowering::ArgumentInfo;
using lowering::FunctionSignature;

struct RuntimeOptions {
  /// Worker threads for the executor (0 = the machine's cores).
  int threads = 0;
  /// Persistent compile cache directory ("" = $KILN_CACHE_DIR, else
  /// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).
  std::string cacheDir;
  /// off | read-only | read-write; unset = $KILN_CACHE, else read-write.
  std::optional<cache::CacheMode> cacheMode;
  /// Size cap of the disk cache (least recently used entries go first).
  uint64_t cacheMaxBytes = 2ull << 30;
  /// Compiled functions kept in memory (least recently used go first).
  size_t memoryCacheEntries = 512;
  /// Per-op placement: JIT, handwritten kernel or auto, by op name ("*" =
  /// default). Combined with $KILN_OP_MODE ("tosa.conv2d=kernel,..."), which
  /// is read first; entries here win.
  lowering::PlacementOptions placement;
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
  /// The compile cache (memory + disk) shared by this runtime's modules.
  cache::CompileCache &compileCache() const { return *cache_; }

  /// Compiles `function` of `module` for each signature (input types), so
  /// that later calls, here or in another process sharing the disk cache,
  /// start warm.
  llvm::Error prewarm(Module &module, llvm::StringRef function,
                      llvm::ArrayRef<std::vector<TensorType>> signatures);

  /// Loads MLIR (text or bytecode) from a file or from memory.
  llvm::Expected<std::unique_ptr<Module>> loadModuleFromFile(llvm::StringRef path);
  llvm::Expected<std::unique_ptr<Module>> loadModule(llvm::StringRef source,
                                                     llvm::StringRef name = "<string>");

private:
  Runtime() = default;
  std::unique_ptr<Module> makeModule(std::unique_ptr<lowering::Program> program);
  RuntimeOptions options_;
  std::shared_ptr<HostExecutor> executor_;
  std::shared_ptr<jit::Compiler> compiler_;
  std::shared_ptr<cache::CompileCache> cache_;
  std::string target_, pipelineId_;
  lowering::PlacementOptions placement_;
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
  /// vector holds a single error value. Cancelling `cancel` stops launching
  /// the call's remaining steps; their outputs become errors.
  std::vector<AsyncValueRef<Tensor>> callAsync(llvm::StringRef function,
                                               llvm::ArrayRef<Tensor> inputs,
                                               std::shared_ptr<CancellationToken> cancel = nullptr);
  /// Compiles (or finds) `function` for these input types without running it
  /// (blocks; call it from a thread that may block, not an executor worker).
  llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
  compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes);

  /// Number of distinct (function, signature) compilations so far.
  size_t numCompiled() const;

  /// The persistent-cache key of `function` at these input types.
  llvm::Expected<cache::CacheKeyParts> cacheKey(llvm::StringRef function,
                                               llvm::ArrayRef<TensorType> inputTypes);
  /// How many times MLIR pipelines ran for this module (0 on a warm start).
  uint64_t pipelineRuns() const { return program_->pipelineRuns(); }

private:
  friend class Runtime;
  using Compiled = std::shared_ptr<const jit::CompiledFunction>;
  struct Shared {  // what a Module needs of its Runtime
    std::shared_ptr<jit::Compiler> compiler;
    std::shared_ptr<HostExecutor> executor;
    std::shared_ptr<cache::CompileCache> cache;
    std::string target, pipelineId;
    lowering::PlacementOptions placement;
  };
  Module(Shared shared, std::unique_ptr<lowering::Program> program);
  std::vector<AsyncValueRef<Tensor>> start(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                           bool inlineFirstStep, std::shared_ptr<CancellationToken> cancel);
  /// Fast path: compiled code for (function, signature), or null.
  Compiled find(llvm::StringRef function, const cache::ShapeSignature &sig) const;
  llvm::Expected<Compiled> produce(llvm::StringRef function, llvm::ArrayRef<TensorType> types,
                                   const cache::CacheKeyParts &key);

  Shared shared_;
  std::unique_ptr<lowering::Program> program_;
  // (function, signature) -> code; read-mostly.
  struct FunctionTable {
    llvm::DenseMap<uint64_t, llvm::SmallVector<std::pair<cache::ShapeSignature, Compiled>, 1>> bySig;
    std::string graphHash;  // computed on first miss
  };
  mutable std::shared_mutex tableMu_;
  llvm::StringMap<FunctionTable> tables_;
  std::mutex mu_;
  std::condition_variable idle_;
  int firstCallsInFlight_ = 0;  // callAsync compiles that still use `this`
};


}  // namespace kiln
