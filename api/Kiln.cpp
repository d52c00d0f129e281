#include "api/Kiln.h"
#include "api/Kernels.h"
#include "api/impl/ModuleImpl.h"

#include "cache/CacheKey.h"
#include "jit/CompileService.h"
#include "jit/GpuTarget.h"
#include "jit/HostTarget.h"
#include "lowering/graph/Program.h"
#include "lowering/graph/TypeIdCheck.h"
#include "runtime/Clock.h"
#include "runtime/ThreadPriority.h"
#include "runtime/Trace.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>

namespace kiln {

std::vector<AsyncValueRef<Tensor>> errorValues(size_t n, const Status &status) {
  std::vector<AsyncValueRef<Tensor>> v;
  for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) v.push_back(makeErrorValue<Tensor>(status));
  return v;
}

namespace {

cache::CacheMode toStoreMode(CacheMode m) {
  switch (m) {
  case CacheMode::kOff: return cache::CacheMode::kOff;
  case CacheMode::kReadOnly: return cache::CacheMode::kReadOnly;
  case CacheMode::kReadWrite: return cache::CacheMode::kReadWrite;
  }
  return cache::CacheMode::kOff;
}

}  // namespace

/// RuntimeOptions::maxCallsInFlight: a counting semaphore over a runtime's
/// calls, held from a call's start until every result is available.
struct CallLimiter {
  int max = 0;
  bool failWhenBusy = false;
  std::mutex mu;
  std::condition_variable freed;
  int inFlight = 0;

  /// A slot, waiting for one when the policy says so; an error when busy.
  std::optional<Status> acquire() {
    std::unique_lock<std::mutex> lock(mu);
    if (inFlight >= max && failWhenBusy)
      return Status{ErrorCode::kUnavailable,
                    "busy: " + std::to_string(inFlight) + " calls in flight, the most this runtime allows "
                    "(RuntimeOptions::maxCallsInFlight = " + std::to_string(max) +
                    "); call again when one has finished",
                    {}};
    freed.wait(lock, [&] { return inFlight < max; });
    ++inFlight;
    return std::nullopt;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      --inFlight;
    }
    freed.notify_one();
  }
  /// Releases the slot once every one of `results` is available.
  static void releaseWhenDone(const std::shared_ptr<CallLimiter> &self,
                              const std::vector<AsyncValueRef<Tensor>> &results) {
    whenAllAvailable(results, [self] { self->release(); });
  }
};

llvm::Error registerKernel(KernelDef def) { return kernels::registry().add(std::move(def)); }

// --- Runtime -----------------------------------------------------------------

llvm::Expected<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  return make(std::move(options), nullptr);
}

llvm::Expected<std::unique_ptr<Runtime>> Runtime::createWithFaults(RuntimeOptions options,
                                                                   const jit::FaultInjection &faults) {
  return make(std::move(options), &faults);
}

llvm::Expected<std::unique_ptr<Runtime>> Runtime::make(RuntimeOptions given, const jit::FaultInjection *faults) {
  if (given.threads < 0)
    return error(ErrorCode::kInvalidArgument, "RuntimeOptions.threads must be >= 0, got %d", given.threads);
  // A build whose MLIR type IDs are not libMLIR's compiles quietly worse
  // code (lowering/graph/TypeIdCheck.h): refuse to run it.
  if (const std::string &m = lowering::mlirTypeIdMismatch(); !m.empty())
    return error(ErrorCode::kInternal,
                 "this kiln build does not share MLIR's type IDs with libMLIR (%s): its generated code would "
                 "lose optimizations; a shared library of kiln must export MLIR's TypeIDResolver storage "
                 "(api/c/libkiln.map)",
                 m.c_str());
  auto options = RuntimeOptions::fromEnvironment(std::move(given));
  if (!options) return options.takeError();
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = std::move(*options);
  const RuntimeOptions &o = rt->options_;
  rt->executor_ = std::make_shared<HostExecutor>(o.threads, o.blockingThreads);

  std::shared_ptr<jit::Target> target;
  if (int gpu = o.gpuOrdinal(); gpu >= 0) {
    jit::GpuTargetOptions g;
    g.device = gpu;
    g.arch = o.gpuArch;
    g.codegen.optLevel = o.optLevel;
    g.dumpIRDir = o.dumpIRDir;
    g.dumpIRPasses = o.dumpIRPasses.value_or(false);
    // Convolutions and matrix products through cuDNN / cuBLAS unless their
    // op mode asks for generated code (`kernel` places them on the host).
    g.tuning.cudnnConv = o.placement.modeFor("tosa.conv2d") != OpMode::kJit;
    g.tuning.cublasMatmul = o.placement.modeFor("tosa.matmul") != OpMode::kJit;
    g.graphs = o.gpuGraphs.value_or(false);
    g.tf32 = o.gpuTf32.value_or(false);
    g.profile = o.gpuProfile.value_or(false);
    g.convTimed = o.gpuConvAlgo != "heuristic";
    auto t = jit::GpuTarget::create(std::move(g));
    if (!t) return withContext(t.takeError(), "device " + o.device + ": ");
    target = std::move(*t);
  } else {
    jit::HostTargetOptions host;
    host.codegen.optLevel = o.optLevel;
    host.codegen.maxVectorBits = o.maxVectorBits;
    host.vectorize = o.vectorize;
    host.prefetchBytes = o.prefetchBytes;
    host.dumpIRDir = o.dumpIRDir;
    host.dumpIRPasses = o.dumpIRPasses.value_or(false);
    host.jitSymbols = o.jitSymbols.value_or(false);
    auto t = jit::HostTarget::create(host);
    if (!t) return t.takeError();
    target = std::move(*t);
  }

  jit::CompileServiceOptions service;
  service.memoryEntries = o.memoryCacheEntries;
  service.disk.dir = o.cacheDir;
  service.disk.mode = toStoreMode(*o.cacheMode);
  service.disk.maxBytes = o.cacheMaxBytes;
  service.disk.warn = o.warnings;
  service.placement = o.placement;
  service.executor = rt->executor_;
  service.warn = o.warnings;
  service.hugePageWeights = o.hugePageWeights.value_or(true);
  if (o.memoryLimitBytes) rt->memoryLimit_ = holdTensorMemoryLimit(o.memoryLimitBytes);
  if (o.maxCallsInFlight > 0) {
    rt->calls_ = std::make_shared<CallLimiter>();
    rt->calls_->max = o.maxCallsInFlight;
    rt->calls_->failWhenBusy = o.whenBusy == RuntimeOptions::WhenBusy::kFail;
  }
  service.trace = [executor = rt->executor_] { return executor->trace(); };
  service.spawn = [executor = rt->executor_](llvm::unique_function<void()> task) {
    executor->spawnBlocking(std::move(task));
  };
  service.compileThreads = o.compileThreads > 0 ? o.compileThreads : int(std::max(1u, std::thread::hardware_concurrency()));
  if (faults) service.faults = *faults;
  rt->service_ = std::make_shared<jit::CompileService>(std::move(target), std::move(service));
  return std::move(rt);
}

Runtime::~Runtime() = default;

std::string Runtime::targetDescription() const { return service_->target().description(); }

// --- Module ------------------------------------------------------------------

Module::Module(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Module::~Module() {
  impl_->closing.cancel();  // background compiles stop between kernels
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle.wait(lock, [&] { return impl_->firstCallsInFlight == 0; });
  // Executions still running hold their code and weights themselves.
}

std::unique_ptr<Module> Runtime::wrap(std::unique_ptr<lowering::Program> program) const {
  auto impl = std::make_unique<Module::Impl>();
  impl->service = service_;
  impl->executor = executor_;
  impl->callTimeoutSeconds = options_.callTimeoutSeconds;
  impl->serialSteps = options_.serialSteps;
  impl->policy = options_.compilePolicy.value_or(RuntimeOptions::CompilePolicy::kWait);
  impl->batchRanges = options_.batchRanges.value_or(true);
  impl->hotBatchCalls = std::max(0, options_.hotBatchCalls.value_or(8));
  impl->hotShapeCalls = std::max(1, options_.hotShapeCalls.value_or(2));
  impl->warn = options_.warnings ? options_.warnings : WarningSink(warnToStderr);
  impl->calls = calls_;
  impl->program = std::move(program);
  return std::unique_ptr<Module>(new Module(std::move(impl)));
}

namespace {
/// While a profiler records: the load of a model (parse, verify, the graph
/// rewrites at load) as one compile event.
void traceLoad(HostExecutor &executor, llvm::StringRef name, Clock::time_point start,
               const lowering::Program *program) {
  std::shared_ptr<TraceRecorder> trace = executor.trace();
  if (!trace) return;
  TraceEvent e;
  e.name = "load " + name.str() + " (parse, verify, graph rewrites)";
  e.category = "compile";
  if (program) {
    e.args = {{"graph rewrites", program->graphRewrites()}};
    for (const lowering::StageTime &t : program->loadTimes())
      e.args.push_back({t.stage + " ms", llvm::formatv("{0:f1}", t.ms).str()});
  }
  trace->add(std::move(e), start, Clock::now());
}
}  // namespace

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModuleFromFile(llvm::StringRef path) {
  auto start = Clock::now();
  auto program = lowering::Program::parseFile(path);
  traceLoad(*executor_, path, start, program ? program->get() : nullptr);
  if (!program) return program.takeError();
  return wrap(std::move(*program));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModule(llvm::StringRef source, llvm::StringRef name) {
  auto start = Clock::now();
  auto program = lowering::Program::parse(source, name);
  traceLoad(*executor_, name, start, program ? program->get() : nullptr);
  if (!program) return program.takeError();
  return wrap(std::move(*program));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadProgram(std::unique_ptr<lowering::Program> program) {
  if (!program) return error(ErrorCode::kInvalidArgument, "Runtime::loadProgram: no program");
  return wrap(std::move(program));
}

llvm::Error Runtime::prewarm(Module &module, llvm::StringRef function,
                             llvm::ArrayRef<std::vector<TensorType>> signatures) {
  for (const auto &sig : signatures) {
    auto fn = module.compile(function, module.servingTypes(function, sig));
    if (!fn) return fn.takeError();
  }
  return llvm::Error::success();
}

const std::vector<FunctionSignature> &Module::functions() const { return impl_->program->functions(); }

const FunctionSignature *Module::signature(llvm::StringRef function) const {
  return impl_->program->lookup(function);
}

const FunctionSignature *Module::resolve(llvm::StringRef function) const {
  if (!function.empty()) return signature(function);
  if (const FunctionSignature *main = signature("main")) return main;
  return functions().size() == 1 ? &functions().front() : nullptr;
}

uint64_t Module::pipelineRuns() const { return impl_->program->pipelineRuns(); }
const std::string &Module::graphRewrites() const { return impl_->program->graphRewrites(); }

std::vector<std::pair<std::string, double>> Module::loadTimes() const {
  std::vector<std::pair<std::string, double>> times;
  for (const lowering::StageTime &t : impl_->program->loadTimes()) times.emplace_back(t.stage, t.ms);
  return times;
}

size_t Module::numCompiled() const {
  std::shared_lock<std::shared_mutex> lock(impl_->tableMu);
  size_t n = 0;
  for (const auto &t : impl_->tables)
    for (const auto &bucket : t.second) n += bucket.second.size();
  return n;
}

llvm::Expected<cache::CacheKeyParts> Module::cacheKey(llvm::StringRef function,
                                                      llvm::ArrayRef<TensorType> inputTypes) {
  return impl_->service->cacheKey(*impl_->program, function, inputTypes);
}

llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
Module::compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes, const CancellationToken *cancel) {
  return compile(function, inputTypes, cancel, jit::WeightMove::kInline);
}

llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
Module::compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes, const CancellationToken *cancel,
                jit::WeightMove move) {
  cache::ShapeSignature sig = cache::ShapeSignature::of(inputTypes);
  if (Impl::Compiled fn = impl_->find(function, sig)) return fn;
  auto code = impl_->service->getOrCompile(*impl_->program, function, inputTypes, cancel, jit::Tier::kCompiled, move);
  if (!code) return code.takeError();
  return impl_->insert(impl_->tables, function, sig, *code);
}

llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
Module::firstCode(const std::string &function, const std::vector<TensorType> &types, const CancellationToken *cancel,
                  std::shared_ptr<RunGate> *gate) {
  using Policy = RuntimeOptions::CompilePolicy;
  cache::ShapeSignature sig = cache::ShapeSignature::of(types);
  // The call waits for this code: its weights move into huge pages after it
  // is returned, not before (0.2-0.9 s of ResNet-50's first call).
  auto waited = [&] { return compile(function, types, cancel, jit::WeightMove::kDeferred); };
  if (impl_->policy == Policy::kWait ||
      (impl_->policy == Policy::kTiered && impl_->service->cached(*impl_->program, function, types)))
    return waited();
  auto start = Clock::now();
  auto plan = impl_->service->getOrCompile(*impl_->program, function, types, cancel, jit::Tier::kKernels);
  if (!plan) {
    if (impl_->policy == Policy::kKernelsOnly) return plan.takeError();
    llvm::consumeError(plan.takeError());  // e.g. no kernel plan for an op: wait for the compiler
    return waited();
  }
  if (impl_->policy == Policy::kKernelsOnly) return impl_->insert(impl_->tables, function, sig, *plan);
  Impl::Compiled served = impl_->insert(impl_->plans, function, sig, *plan);
  impl_->kernelPlanCalls.fetch_add(1, std::memory_order_relaxed);
  size_t event = 0;
  bool deferred = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    std::string key = function + '\0' + sig.str();
    if (impl_->background.count(key)) return served;  // another first call started it
    std::string ready = "kernel plan ready in " + llvm::formatv("{0:f1}", msSince(start)).str() + " ms";
    std::string header = "@" + function + " (" + sig.str() + "): ";
    deferred = deferShapeCompile(function, types);
    if (deferred) {
      auto [it, fresh] = impl_->deferred.try_emplace(key);
      if (fresh) {
        it->second.types = types;
        it->second.ready = ready;
        ++impl_->tiers.deferredShapes;
        impl_->anyDeferred.store(true, std::memory_order_relaxed);
      }
      if (!impl_->countDeferredCallLocked(it, header, event)) return served;
    } else {
      event = impl_->startBackgroundLocked(key, header + ready);
      *gate = std::make_shared<RunGate>();
    }
  }
  // A hot shape's code serves that shape only (the plans serve the rest):
  // it compiles below the calls' priority. The code of a signature that
  // serves every call (static shapes, batch 1 of the range code) does not,
  // but starts once this call has answered (RunGate).
  compileInBackground(function, types, event, /*hotSize=*/false, /*lowPriority=*/deferred, *gate);
  return served;
}

bool Module::deferShapeCompile(const std::string &function, llvm::ArrayRef<TensorType> types) const {
  if (impl_->hotShapeCalls <= 1) return false;
  const FunctionSignature *s = impl_->program->lookup(function);
  if (!s) return false;
  bool batchServed = impl_->batchRanges && s->batch.separable;  // dim 0: the range code's
  for (size_t i = 0; i < s->args.size() && i < types.size(); ++i)
    for (size_t d = 0; d < s->args[i].type.shape.size(); ++d)
      if (s->args[i].type.shape[d] == kDynamic && !(batchServed && d == 0)) return true;
  return false;
}

void Module::noteDeferredCall(const std::string &function, const std::string &signature) {
  std::optional<std::vector<TensorType>> types;
  size_t event = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->deferred.find(function + '\0' + signature);
    if (it == impl_->deferred.end()) return;
    types = impl_->countDeferredCallLocked(it, "@" + function + " (" + signature + "): ", event);
    if (!types) return;
  }
  compileInBackground(function, *types, event, /*hotSize=*/false, /*lowPriority=*/true);
}

void Module::compileInBackground(const std::string &function, const std::vector<TensorType> &types, size_t event,
                                 bool hotSize, bool lowPriority, std::shared_ptr<RunGate> gate) {
  // One compile at a time per module, in the order first calls asked, on a
  // thread of its own rather than the blocking pool: first calls of other
  // shapes must not queue behind compiles of seconds (their kernel plans
  // would wait), and compiles of many new shapes at once would take the
  // cores from the calls. The module's destructor waits for the thread
  // (each queued compile counts in firstCallsInFlight) and cancels the rest.
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->queue.push_back(
      {function, types, event, Clock::now(), impl_->kernelPlanCalls.load(), hotSize, hotSize || lowPriority,
       std::move(gate)});
  if (impl_->compiling) return;
  impl_->compiling = true;
  ++impl_->firstCallsInFlight;  // the thread's own: it touches the module until it has left
  std::thread([this] {
    for (;;) {
      Impl::BackgroundJob job;
      {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (impl_->queue.empty()) {
          impl_->compiling = false;
          impl_->leaveLocked();  // nothing of the module is touched after this lock is released
          return;
        }
        job = std::move(impl_->queue.front());
        impl_->queue.pop_front();
      }
      auto run = [&] {
        if (job.gate) job.gate->wait(impl_->closing);
        if (job.hotSize) finishHotSize(job.function, job.types, job.event, job.queued);
        else finishBackgroundJob(job.function, job.types, job.event, job.queued, job.callsBefore);
      };
      // Below the calls' priority on a thread of its own (a thread's
      // priority cannot be raised again; runtime/ThreadPriority.h).
      if (job.lowPriority) runAtBackgroundPriority(run);
      else run();
    }
  }).detach();
}

void Module::finishBackgroundJob(const std::string &function, const std::vector<TensorType> &types, size_t event,
                                 Clock::time_point start, uint64_t callsBefore) {
  auto done = llvm::scope_exit([this] { impl_->leave(); });
  cache::ShapeSignature sig = cache::ShapeSignature::of(types);
  auto code = compile(function, types, &impl_->closing);  // enters `tables`: later calls run it
  std::string problem = code ? "" : toStatus(code.takeError()).str();
  if (problem.empty()) impl_->swapIn(function, sig);
  uint64_t onPlan = impl_->kernelPlanCalls.load() - callsBefore + 1;
  std::string line = problem.empty() ? llvm::formatv("; compiled code from {0:f1} ms", msSince(start)).str()
                                     : "; the compile failed (" + problem + "), the kernel plan keeps serving";
  if (std::shared_ptr<TraceRecorder> trace = impl_->executor->trace()) {
    TraceEvent e;
    e.name = (problem.empty() ? "swap to compiled code @" : "compile failed behind the kernel plan @") + function;
    e.category = "compile";
    e.args = {{"signature", sig.str()}};
    trace->add(std::move(e), start, Clock::now());
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++(problem.empty() ? impl_->tiers.swaps : impl_->tiers.backgroundFailures);
  if (event < impl_->tiers.events.size())
    impl_->tiers.events[event] += line + " (" + std::to_string(onPlan) + " call(s) on the plan so far)";
  if (!problem.empty() && !impl_->closing.cancelled())
    impl_->warn("@" + function + " (" + sig.str() + "): the JIT compile behind the kernel plan failed: " + problem);
}

Module::TierStats Module::tierStats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  TierStats s = impl_->tiers;
  s.kernelPlanCalls = impl_->kernelPlanCalls.load();
  return s;
}

void Module::waitForBackgroundCompiles() {
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->idle.wait(lock, [&] {
      return impl_->tiers.swaps + impl_->tiers.backgroundFailures + impl_->tiers.rangeKept ==
             impl_->tiers.backgroundCompiles;
    });
  }
  impl_->service->waitForBackgroundJobs();
}

std::vector<AsyncValueRef<Tensor>> Module::start(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                                 bool inlineFirstStep, std::shared_ptr<CancellationToken> cancel,
                                                 std::vector<Tensor> outputs) {
  if (!impl_->calls)
    return startUnlimited(function, inputs, inlineFirstStep, std::move(cancel), std::move(outputs));
  if (std::optional<Status> busy = impl_->calls->acquire()) {
    const FunctionSignature *s = impl_->program->lookup(function);
    return errorValues(s ? s->results.size() : 1, *busy);
  }
  auto results = startUnlimited(function, inputs, inlineFirstStep, std::move(cancel), std::move(outputs));
  CallLimiter::releaseWhenDone(impl_->calls, results);
  return results;
}

std::vector<AsyncValueRef<Tensor>> Module::startUnlimited(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                                          bool inlineFirstStep,
                                                          std::shared_ptr<CancellationToken> cancel,
                                                          std::vector<Tensor> outputs,
                                                          std::vector<AsyncValueRef<Tensor>> answer) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].valid())
      return errorValues(1, Status{ErrorCode::kInvalidArgument,
                                   "@" + function.str() + ": input " + std::to_string(i) +
                                       " is an empty (default-constructed) tensor",
                                   {}});
  ExecuteOptions opts;
  opts.runFirstStepInline = inlineFirstStep;
  opts.serialSteps = impl_->serialSteps;
  if (!cancel && impl_->callTimeoutSeconds > 0) {
    cancel = std::make_shared<CancellationToken>();
    cancel->setTimeout(std::chrono::nanoseconds(int64_t(impl_->callTimeoutSeconds * 1e9)));
  }
  opts.cancel = cancel;
  opts.outputs = std::move(outputs);
  cache::ShapeSignature sig = cache::ShapeSignature::of(inputs);
  if (Impl::Compiled fn = impl_->find(function, sig))  // fast path: no MLIR, no strings, a shared lock
    return fn->executable->execute(inputs, *impl_->executor, opts);
  if (Impl::Compiled plan = impl_->findPlan(function, sig)) {  // tiered: its code compiles, or waits until hot
    impl_->kernelPlanCalls.fetch_add(1, std::memory_order_relaxed);
    if (impl_->anyDeferred.load(std::memory_order_relaxed)) noteDeferredCall(function.str(), sig.str());
    return plan->executable->execute(inputs, *impl_->executor, opts);
  }

  const FunctionSignature *s = impl_->program->lookup(function);
  size_t numResults = s ? s->results.size() : 1;
  std::vector<TensorType> types;
  for (const Tensor &t : inputs) types.push_back(t.type());
  if (s)  // cheap checks before any compile; an unknown function errors in compile()
    if (auto err = checkInputs(*s, types)) return errorValues(numResults, toStatus(std::move(err)));
  // A batch size without code of its own, of a function that computes its
  // batch item by item: calls of batch 1 (one compile serves every size).
  if (s && impl_->batchRanges && s->batch.separable)
    if (int64_t batch = rangeBatch(*s, types); batch > 1)
      return startRange(*s, inputs, batch, opts.cancel, std::move(opts.outputs));

  // First call for this signature: compile (or load from disk) on the
  // blocking pool, then run.
  std::vector<AsyncValueRef<Tensor>> results;
  for (size_t i = 0; i < numResults; ++i) results.push_back(makeUnavailable<Tensor>());
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->firstCallsInFlight;
  }
  llvm::unique_function<void()> firstCall = [this, fn = function.str(),
                                              args = std::vector<Tensor>(inputs.begin(), inputs.end()),
                                              types = std::move(types), results, opts,
                                              answer = std::move(answer)]() mutable {
    auto done = llvm::scope_exit([this] { impl_->leave(); });
    std::shared_ptr<RunGate> gate;
    auto compiled = firstCode(fn, types, opts.cancel.get(), &gate);  // the call's deadline bounds its compile too
    if (!compiled) {
      Status status = toStatus(compiled.takeError());
      for (auto &r : results) r->setError(status);
      return;
    }
    opts.runFirstStepInline = false;
    auto outs = (*compiled)->executable->execute(args, *impl_->executor, opts);
    for (size_t i = 0; i < results.size(); ++i) {
      if (i >= outs.size()) {
        results[i]->setError(Status{ErrorCode::kInternal,
                                    "@" + fn + " produced fewer results than its signature declares", {}});
        continue;
      }
      AsyncValueRef<Tensor> from = outs[i], to = results[i];
      from->andThen([from, to] {
        if (from->isError()) to->setError(from->error());
        else to->emplace(from->get());
      });
    }
    // Once the caller has its answer (the results, not `outs`: an
    // AsyncValue runs its waiters last-registered first); for an item of a
    // range call, once every item has (ResNet-50's first call at batch 15
    // ran its 14 other items beside the compile: 140 ms an item, 74 alone).
    if (gate) whenAllAvailable(answer.empty() ? results : answer, [gate] { gate->open(); });
  };
  // Under tiered policies a first call runs on a thread of its own: the
  // blocking pool may be busy for seconds with background compiles' helpers,
  // and the point of a kernel plan is not to wait for them.
  if (impl_->policy == RuntimeOptions::CompilePolicy::kWait) impl_->executor->spawnBlocking(std::move(firstCall));
  else std::thread([task = std::move(firstCall)]() mutable { task(); }).detach();
  return results;
}

std::vector<AsyncValueRef<Tensor>> Module::callAsync(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                                     std::shared_ptr<CancellationToken> cancel) {
  return start(function, inputs, /*inlineFirstStep=*/false, std::move(cancel));
}

llvm::Expected<std::vector<Tensor>> Module::call(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs) {
  return call(function, inputs, {});
}

llvm::Expected<std::vector<Tensor>> Module::call(llvm::StringRef function, llvm::ArrayRef<Tensor> inputs,
                                                 std::vector<Tensor> outputs) {
  auto futures = start(function, inputs, /*inlineFirstStep=*/true, nullptr, std::move(outputs));
  std::vector<Tensor> out;
  out.reserve(futures.size());
  for (auto &f : futures) {
    auto v = f.awaitValue();
    if (!v) return v.takeError();
    out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace kiln
