// kiln's public C++ API.
//
//   auto rt = kiln::Runtime::create({});                 // Expected<unique_ptr<Runtime>>
//   auto m  = (*rt)->loadModuleFromFile("model.mlir");   // TOSA / linalg on tensors
//   auto y  = (*m)->call("main", {x});                   // JIT-compiles on the first call
//   auto fs = (*m)->callAsync("main", {x});              // futures; returns at once
//
// This header exposes tensors, futures, options and errors; nothing of MLIR,
// the compile cache or the JIT. Introspection (compiled code, plans, cache
// keys and statistics) is reached through the opaque types declared below;
// include jit/CompileService.h or cache/CacheKey.h to look inside them.
//
// Thread-safety: Runtime and Module are thread-safe; several threads may call
// the same Module at once. The first call for a shape signature compiles
// (concurrent first calls for one signature compile once); later calls reuse
// the compiled code. A Module keeps what it needs of its Runtime alive.
#pragma once

#include "api/Options.h"
#include "runtime/AsyncValue.h"
#include "runtime/Error.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/Signature.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kiln {
namespace jit {
class CompileService;
class CompiledFunction;
struct FaultInjection;
enum class WeightMove;
}  // namespace jit
namespace cache {
struct CacheKeyParts;
}  // namespace cache
namespace lowering {
class Program;
}  // namespace lowering

class Module;
struct CallLimiter;

class Runtime {
public:
  /// Options are completed from the environment (RuntimeOptions::fromEnvironment).
  static llvm::Expected<std::unique_ptr<Runtime>> create(RuntimeOptions options = {});
  ~Runtime();
  /// The resolved options (environment applied).
  const RuntimeOptions &options() const { return options_; }
  /// "x86_64-pc-linux-gnu znver5 +avx2,..." — what generated code targets.
  std::string targetDescription() const;
  /// The host executor every module of this runtime runs on.
  HostExecutor &executor() const { return *executor_; }
  /// The compile service (memory + disk cache, compiler, target) shared by
  /// this runtime's modules; for introspection (jit/CompileService.h).
  jit::CompileService &compileService() const { return *service_; }

  /// Compiles `function` of `module` for each signature (input types), so
  /// that later calls, here or in another process sharing the disk cache,
  /// start warm.
  llvm::Error prewarm(Module &module, llvm::StringRef function,
                      llvm::ArrayRef<std::vector<TensorType>> signatures);

  /// Loads MLIR (text or bytecode) from a file or from memory.
  llvm::Expected<std::unique_ptr<Module>> loadModuleFromFile(llvm::StringRef path);
  llvm::Expected<std::unique_ptr<Module>> loadModule(llvm::StringRef source,
                                                     llvm::StringRef name = "<string>");

  /// A module from a program built in memory (lowering/graph/GraphBuilder.h):
  /// no MLIR text in between.
  llvm::Expected<std::unique_ptr<Module>> loadProgram(std::unique_ptr<lowering::Program> program);

  /// For tests: a runtime whose compiles fail as `faults` says.
  static llvm::Expected<std::unique_ptr<Runtime>> createWithFaults(RuntimeOptions options,
                                                                   const jit::FaultInjection &faults);

private:
  friend class Module;
  Runtime() = default;
  static llvm::Expected<std::unique_ptr<Runtime>> make(RuntimeOptions options, const jit::FaultInjection *faults);
  std::unique_ptr<Module> wrap(std::unique_ptr<lowering::Program> program) const;
  RuntimeOptions options_;
  std::shared_ptr<HostExecutor> executor_;
  std::shared_ptr<jit::CompileService> service_;
  std::shared_ptr<void> memoryLimit_;  // this runtime's share of the tensor memory limit (TensorMemoryLimit)
  std::shared_ptr<CallLimiter> calls_;  // RuntimeOptions::maxCallsInFlight (null: no limit)
};

class Module {
public:
  ~Module();
  const std::vector<FunctionSignature> &functions() const;
  const FunctionSignature *signature(llvm::StringRef function) const;
  /// The function a caller means: `function` when it is given; when it is
  /// empty, @main, or the module's only function (an ONNX import's
  /// @main_graph). Null when there is none.
  const FunctionSignature *resolve(llvm::StringRef function) const;

  /// Runs `function` and waits for its results; compiles it first if this
  /// shape signature is new.
  llvm::Expected<std::vector<Tensor>> call(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs);
  /// The same, with the results written into `outputs` (as ONNX Runtime's
  /// IoBinding): one entry per result, a tensor of the result's type (the
  /// caller's memory through Tensor::wrap; not overlapping an input) or an
  /// invalid Tensor for a new one. Returns the results (the given tensors
  /// where given).
  llvm::Expected<std::vector<Tensor>> call(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                           std::vector<Tensor> outputs);
  /// Starts `function` and returns one future per result at once (a first
  /// call compiles on the blocking pool). Errors, including bad inputs and
  /// compile failures, arrive as error values; for an unknown function the
  /// vector holds a single error value. Cancelling `cancel` stops launching
  /// the call's remaining steps; their outputs become errors.
  std::vector<AsyncValueRef<Tensor>> callAsync(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                               std::shared_ptr<CancellationToken> cancel = nullptr);
  /// Compiles (or finds) `function` for these input types without running it
  /// (blocks; call it from a thread that may block, not an executor worker).
  /// A `cancel` past its deadline stops the compile between kernels
  /// (kCancelled).
  llvm::Expected<std::shared_ptr<const jit::CompiledFunction>> compile(llvm::StringRef function,
                                                                      llvm::ArrayRef<TensorType> inputTypes,
                                                                      const CancellationToken *cancel = nullptr);

  /// The input types whose code serves a call of `function` at `types`:
  /// with range code (RuntimeOptions::batchRanges) for a batch-separable
  /// function, the same types at batch 1; else `types` themselves.
  /// Runtime::prewarm compiles these.
  std::vector<TensorType> servingTypes(llvm::StringRef function, std::vector<TensorType> types) const;

  /// Number of distinct (function, signature) compilations so far (kernel
  /// plans of tiered execution not counted).
  size_t numCompiled() const;

  /// How tiered execution (RuntimeOptions::compilePolicy) served calls.
  struct TierStats {
    uint64_t kernelPlanCalls = 0;     // calls run on a kernel plan while JIT code compiled
    uint64_t backgroundCompiles = 0;  // JIT compiles started behind a kernel plan
    uint64_t swaps = 0;               // signatures switched from a kernel plan to compiled code
    uint64_t backgroundFailures = 0;  // compiles that failed (the kernel plan keeps serving)
    /// Range code (RuntimeOptions::batchRanges): calls run as calls of
    /// batch 1, batch sizes called often enough to get code of their own
    /// compiled in the background (counted in backgroundCompiles; those that
    /// took over count in swaps), and those whose own code measured no
    /// faster, so that the batch-1 code keeps serving them.
    uint64_t rangeCalls = 0;
    uint64_t hotSizeCompiles = 0;
    uint64_t rangeKept = 0;
    /// Shapes of a function's dynamic dimensions (other than a batch the
    /// range code serves) whose compile waits until they are hot
    /// (RuntimeOptions::hotShapeCalls): signatures that ran on a kernel plan
    /// with their compile deferred, and those that became hot and compiled.
    uint64_t deferredShapes = 0;
    uint64_t hotShapeCompiles = 0;
    /// One line per background compile, e.g. "@main (5x64xf32): kernel plan
    /// ready in 3.1 ms; compiled code from 412.3 ms (2 calls on the plan)".
    std::vector<std::string> events;
  };
  TierStats tierStats() const;
  /// Blocks until every background compile tiered calls or hot batch sizes
  /// started has finished (swapped, kept the range code, or failed), and
  /// the runtime's weights have moved into huge pages where a first call
  /// left that to the background (RuntimeOptions::hugePageWeights) and
  /// kernel plans have been written to the disk cache. Call it from a
  /// thread that may block.
  void waitForBackgroundCompiles();
  /// The persistent-cache key of `function` at these input types
  /// (cache/CacheKey.h).
  llvm::Expected<cache::CacheKeyParts> cacheKey(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes);
  /// How many times MLIR pipelines ran for this module (0 on a warm start).
  uint64_t pipelineRuns() const;
  /// What the graph rewrites run when the module was loaded changed, e.g.
  /// "558 -> 352 ops in 41.2 ms (tosa.sub 53 -> 0, tosa.transpose 102 -> 0)".
  const std::string &graphRewrites() const;
  /// Where the load's time went, ms by phase: read, literals, parse,
  /// verify, then each graph rewrite ("fold-constants", ...).
  std::vector<std::pair<std::string, double>> loadTimes() const;

private:
  friend class Runtime;
  struct Impl;
  explicit Module(std::unique_ptr<Impl> impl);
  std::vector<AsyncValueRef<Tensor>> start(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                           bool inlineFirstStep, std::shared_ptr<CancellationToken> cancel,
                                           std::vector<Tensor> outputs = {});
  /// Opened when a first call on a kernel plan has answered: the compile
  /// behind the plan waits for it (ModuleImpl.h).
  struct RunGate;
  /// The code a call of a signature without compiled code runs first,
  /// as RuntimeOptions::compilePolicy says. Where that is a kernel plan
  /// whose compile it queued, `gate` gets the gate to open once the call
  /// has answered.
  llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
  firstCode(const std::string &function, const std::vector<TensorType> &types, const CancellationToken *cancel,
            std::shared_ptr<RunGate> *gate);
  /// compile(), with the weights' move into huge pages done as `move` says
  /// (deferred where a call waits for the code).
  llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
  compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes, const CancellationToken *cancel,
          jit::WeightMove move);
  /// Under kTiered: whether a first call of `function` at `types` defers
  /// its compile until the shape is hot (RuntimeOptions::hotShapeCalls).
  bool deferShapeCompile(const std::string &function, llvm::ArrayRef<TensorType> types) const;
  /// A call on the kernel plan of a deferred shape: counted; queues the
  /// shape's compile once it is hot.
  void noteDeferredCall(const std::string &function, const std::string &signature);
  /// Compiles `function` at `types` on the module's background thread,
  /// then switches calls to it; completes tier event `event`. Hot batch
  /// sizes and `lowPriority` compiles (hot shapes of dynamic dims) run at
  /// background priority (runtime/ThreadPriority.h). With `gate`, the
  /// compile starts once it is open.
  void compileInBackground(const std::string &function, const std::vector<TensorType> &types, size_t event,
                           bool hotSize = false, bool lowPriority = false, std::shared_ptr<RunGate> gate = nullptr);
  /// One background compile: the swap, its tier event, the trace.
  void finishBackgroundJob(const std::string &function, const std::vector<TensorType> &types, size_t event,
                           std::chrono::steady_clock::time_point start, uint64_t callsBefore);
  /// Range code (BatchRange.cpp): the batch of a call of `s` at `types`
  /// (its batched inputs' dim 0 when they agree), else 0 (or -1 when `s`
  /// has no batched input). Split when > 1.
  static int64_t rangeBatch(const FunctionSignature &s, llvm::ArrayRef<TensorType> types);
  /// Runs a call of batch `batch` as calls of batch 1, each on its slice of
  /// the inputs and outputs; `counted` = false for the measurements that
  /// decide whether a hot size's own code takes over.
  struct RangeCall;
  std::vector<AsyncValueRef<Tensor>> startRange(const FunctionSignature &s, llvm::ArrayRef<Tensor> inputs,
                                                int64_t batch, std::shared_ptr<CancellationToken> cancel,
                                                std::vector<Tensor> outputs, bool counted = true);
  void runItem(const std::shared_ptr<RangeCall> &call, int64_t item);
  void itemDone(const std::shared_ptr<RangeCall> &call, int64_t item, std::vector<AsyncValueRef<Tensor>> results);
  void finishRange(const std::shared_ptr<RangeCall> &call);
  /// A hot batch size's own code, compiled in the background: takes over
  /// from the range code if it measures faster.
  void finishHotSize(const std::string &function, const std::vector<TensorType> &types, size_t event,
                     std::chrono::steady_clock::time_point start);
  /// `answer`: the results whose arrival opens the gate of the compile a
  /// first call on a kernel plan queued (default: the call's own; an item
  /// of a range call passes the whole call's, so the compile waits for
  /// every item).
  std::vector<AsyncValueRef<Tensor>> startUnlimited(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                                    bool inlineFirstStep,
                                                    std::shared_ptr<CancellationToken> cancel,
                                                    std::vector<Tensor> outputs,
                                                    std::vector<AsyncValueRef<Tensor>> answer = {});
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
