#include "runtime/Kiln.h"
#include "runtime/Clock.h"

#include "cache/CompileCache.h"
#include "jit/Compiler.h"
#include "lowering/Pipelines.h"
#include "lowering/Passes.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace kiln {
namespace {

std::vector<AsyncValueRef<Tensor>> errorValues(size_t n, std::string message) {
  std::vector<AsyncValueRef<Tensor>> v;
  for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) v.push_back(makeError<Tensor>(message));
  return v;
}
}  // namespace

// --- Runtime -----------------------------------------------------------------

llvm::Expected<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  if (options.threads < 0)
    return llvm::createStringError("RuntimeOptions.threads must be >= 0, got %d",
                                   options.threads);
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = options;
  rt->executor_ = std::make_shared<HostExecutor>(options.threads, options.blockingThreads);
  codegen::CodegenOptions cg;
  cg.optLevel = options.optLevel;
  auto compiler = jit::Compiler::create(cg);
  if (!compiler) return compiler.takeError();
  rt->compiler_ = std::move(*compiler);

  cache::DiskCacheOptions disk;
  disk.dir = options.cacheDir;
  disk.maxBytes = options.cacheMaxBytes;
  if (options.cacheMode) {
    disk.mode = *options.cacheMode;
  } else if (const char *env = std::getenv("KILN_CACHE"); env && *env) {
    auto mode = cache::parseCacheMode(env);
    if (!mode)
      return llvm::createStringError("KILN_CACHE='%s': expected off, ro or rw", env);
    disk.mode = *mode;
  }
  rt->cache_ = std::make_shared<cache::CompileCache>(options.memoryCacheEntries, std::move(disk));

  if (const char *env = std::getenv("KILN_OP_MODE"); env && *env) {
    auto parsed = lowering::parseOpModes(env);
    if (!parsed)
      return llvm::createStringError("KILN_OP_MODE: %s", llvm::toString(parsed.takeError()).c_str());
    rt->placement_ = *parsed;
  }
  for (const auto &[op, mode] : options.placement.modes) rt->placement_.modes[op] = mode;
  rt->placement_.failClustersWith.insert(options.placement.failClustersWith.begin(),
                                         options.placement.failClustersWith.end());

  const auto &t = rt->compiler_->target();
  rt->target_ = t.triple + " " + t.cpu + " " + t.features;
  std::string pipeline = "opt-level=" + std::to_string(options.optLevel) +
                         " hoist-min-elements=" + std::to_string(lowering::kDefaultHoistMinElements);
  for (const auto &stage : lowering::cpuPipelineStages())
    pipeline += std::string("\n") + stage.name + ": " + stage.pipeline;
  rt->pipelineId_ = cache::hash128Hex(pipeline);
  return std::move(rt);
}

Runtime::~Runtime() = default;

std::string Runtime::targetDescription() const {
  return compiler_->target().triple + " " + compiler_->target().cpu;
}

std::unique_ptr<Module> Runtime::makeModule(std::unique_ptr<lowering::Program> program) {
  Module::Shared shared{compiler_, executor_, cache_, target_, pipelineId_, placement_};
  return std::unique_ptr<Module>(new Module(std::move(shared), std::move(program)));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModuleFromFile(llvm::StringRef path) {
  auto program = lowering::Program::parseFile(path);
  if (!program) return program.takeError();
  return makeModule(std::move(*program));
}

llvm::Expected<std::unique_ptr<Module>> Runtime::loadModule(llvm::StringRef source,
                                                            llvm::StringRef name) {
  auto program = lowering::Program::parse(source, name);
  if (!program) return program.takeError();
  return makeModule(std::move(*program));
}

llvm::Error Runtime::prewarm(Module &module, llvm::StringRef function,
                             llvm::ArrayRef<std::vector<TensorType>> signatures) {
  for (const auto &sig : signatures) {
    auto fn = module.compile(function, sig);
    if (!fn) return fn.takeError();
  }
  return llvm::Error::success();
}

// --- Module ------------------------------------------------------------------

Module::Module(Shared shared, std::unique_ptr<lowering::Program> program)
    : shared_(std::move(shared)), program_(std::move(program)) {}

Module::~Module() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return firstCallsInFlight_ == 0; });
  // Executions still running hold their code and weights themselves.
}

const std::vector<FunctionSignature> &Module::functions() const { return program_->functions(); }

const FunctionSignature *Module::signature(llvm::StringRef function) const {
  return program_->lookup(function);
}

size_t Module::numCompiled() const {
  std::shared_lock<std::shared_mutex> lock(tableMu_);
  size_t n = 0;
  for (const auto &t : tables_)
    for (const auto &bucket : t.second.bySig) n += bucket.second.size();
  return n;
}

Module::Compiled Module::find(llvm::StringRef function, const cache::ShapeSignature &sig) const {
  std::shared_lock<std::shared_mutex> lock(tableMu_);
  auto t = tables_.find(function);
  if (t == tables_.end()) return nullptr;
  auto b = t->second.bySig.find(sig.hash());
  if (b == t->second.bySig.end()) return nullptr;
  for (const auto &[s, fn] : b->second)
    if (s == sig) return fn;
  return nullptr;
}

llvm::Expected<cache::CacheKeyParts> Module::cacheKey(llvm::StringRef function,
                                                      llvm::ArrayRef<TensorType> inputTypes) {
  std::string graphHash;
  {
    std::shared_lock<std::shared_mutex> lock(tableMu_);
    auto t = tables_.find(function);
    if (t != tables_.end()) graphHash = t->second.graphHash;
  }
  if (graphHash.empty()) {
    auto graph = program_->canonicalGraph(function);
    if (!graph) return graph.takeError();
    graphHash = cache::hash128Hex(*graph);
    std::unique_lock<std::shared_mutex> lock(tableMu_);
    tables_[function].graphHash = graphHash;
  }
  cache::CacheKeyParts key;
  key.graph = graphHash;
  key.function = function.str();
  key.signature = cache::ShapeSignature::of(inputTypes).str();
  key.target = shared_.target;
  key.pipeline = shared_.pipelineId;
  key.opModes = shared_.placement.canonical();
  key.kilnVersion = cache::kilnVersion();
  key.llvmVersion = LLVM_VERSION_STRING;
  return key;
}

llvm::Expected<Module::Compiled> Module::produce(llvm::StringRef function,
                                                 llvm::ArrayRef<TensorType> types,
                                                 const cache::CacheKeyParts &key) {
  cache::CompileCache &cc = *shared_.cache;
  auto t0 = Clock::now();
  if (auto entry = cc.disk().load(key)) {
    // Warm start: the object from disk, the weights from this module; no MLIR pass runs.
    auto weights = program_->weights(function);
    bool typesMatch = weights && entry->inputs == std::vector<TensorType>(types.begin(), types.end()) &&
                      entry->weights.size() == weights->size();
    for (size_t i = 0; typesMatch && i < weights->size(); ++i)
      typesMatch = (*weights)[i].type() == entry->weights[i];
    if (!weights) llvm::consumeError(weights.takeError());
    auto plan = jit::ExecPlan::fromJson(entry->plan);
    if (typesMatch && plan) {
      std::vector<llvm::SmallVector<char, 0>> objects;
      for (const std::string &o : entry->objects) objects.emplace_back(o.begin(), o.end());
      auto loaded = shared_.compiler->load(function, entry->inputs, entry->results, *weights,
                                           std::move(*plan), std::move(objects));
      if (loaded) {
        cc.recordDiskHit(msSince(t0));
        return Compiled(std::move(*loaded));
      }
      llvm::consumeError(loaded.takeError());  // unusable entry: compile instead
    } else if (!plan) {
      llvm::consumeError(plan.takeError());
    }
  }
  t0 = Clock::now();
  auto compiled = shared_.compiler->compile(*program_, function, types, shared_.placement);
  cc.recordCompile(msSince(t0), bool(compiled), compiled ? (*compiled)->stats.jitFallbacks : 0);
  if (!compiled) return compiled.takeError();
  for (const std::string &w : (*compiled)->stats.warnings)
    std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
  cache::CachedFunction entry;
  entry.key = key;
  entry.inputs = (*compiled)->inputTypes;
  for (const Tensor &w : (*compiled)->weights) entry.weights.push_back(w.type());
  entry.results = (*compiled)->resultTypes;
  entry.plan = (*compiled)->plan.toJson();
  for (const auto &o : (*compiled)->objects) entry.objects.emplace_back(o.begin(), o.end());
  cc.disk().store(entry);
  return Compiled(std::move(*compiled));
}

llvm::Expected<std::shared_ptr<const jit::CompiledFunction>>
Module::compile(llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes) {
  cache::ShapeSignature sig = cache::ShapeSignature::of(inputTypes);
  if (Compiled fn = find(function, sig)) return fn;
  const FunctionSignature *s = program_->lookup(function);
  if (!s) {
    std::string names;
    for (const FunctionSignature &f : program_->functions())
      names += (names.empty() ? "@" : ", @") + f.name;
    return llvm::createStringError("no public function @%s in the module (it has: %s)",
                                   function.str().c_str(), names.empty() ? "none" : names.c_str());
  }
  if (auto err = lowering::checkInputs(*s, inputTypes)) return std::move(err);
  auto key = cacheKey(function, inputTypes);
  if (!key) return key.takeError();
  auto code = shared_.cache->getOrProduce(*key, [&] { return produce(function, inputTypes, *key); });
  if (!code) return code.takeError();
  // The runtime-wide cache holds code, not weights: modules that share a
  // graph (e.g. re-trained weights) share code and each bind their own.
  auto weights = program_->weights(function);
  if (!weights) return weights.takeError();
  bool same = weights->size() == (*code)->weights.size();
  for (size_t i = 0; same && i < weights->size(); ++i)
    same = (*weights)[i].rawData() == (*code)->weights[i].rawData();
  Compiled fn = *code;
  if (!same) {
    auto bound = shared_.compiler->bind(**code, std::move(*weights));
    if (!bound) return bound.takeError();
    fn = std::move(*bound);
  }
  std::unique_lock<std::shared_mutex> lock(tableMu_);
  auto &bucket = tables_[function].bySig[sig.hash()];
  for (const auto &[s2, existing] : bucket)
    if (s2 == sig) return existing;
  bucket.push_back({sig, fn});
  return fn;
}

std::vector<AsyncValueRef<Tensor>> Module::start(llvm::StringRef function,
                                                 llvm::ArrayRef<Tensor> inputs, bool inlineFirstStep,
                                                 std::shared_ptr<CancellationToken> cancel) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].valid())
      return errorValues(1, "@" + function.str() + ": input " + std::to_string(i) +
                                " is an empty (default-constructed) tensor");
  ExecuteOptions opts;
  opts.runFirstStepInline = inlineFirstStep;
  opts.cancel = cancel;
  cache::ShapeSignature sig = cache::ShapeSignature::of(inputs);
  if (Compiled fn = find(function, sig))  // fast path: no MLIR, no strings, a shared lock
    return fn->executable->execute(inputs, *shared_.executor, opts);

  const FunctionSignature *s = program_->lookup(function);
  size_t numResults = s ? s->results.size() : 1;
  std::vector<TensorType> types;
  for (const Tensor &t : inputs) types.push_back(t.type());
  if (s)  // cheap checks before any compile; an unknown function errors in compile()
    if (auto err = lowering::checkInputs(*s, types))
      return errorValues(numResults, llvm::toString(std::move(err)));

  // First call for this signature: compile (or load from disk) on the
  // blocking pool, then run.
  std::vector<AsyncValueRef<Tensor>> results;
  for (size_t i = 0; i < numResults; ++i) results.push_back(makeUnavailable<Tensor>());
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++firstCallsInFlight_;
  }
  shared_.executor->spawnBlocking([this, fn = function.str(),
                                   args = std::vector<Tensor>(inputs.begin(), inputs.end()),
                                   types = std::move(types), results, opts]() mutable {
    auto done = llvm::make_scope_exit([this] {
      std::lock_guard<std::mutex> lock(mu_);
      --firstCallsInFlight_;
      idle_.notify_all();
    });
    auto compiled = compile(fn, types);
    if (!compiled) {
      std::string msg = llvm::toString(compiled.takeError());
      for (auto &r : results) r->setError(msg);
      return;
    }
    opts.runFirstStepInline = false;
    auto outs = (*compiled)->executable->execute(args, *shared_.executor, opts);
    for (size_t i = 0; i < results.size(); ++i) {
      if (i >= outs.size()) {
        results[i]->setError("@" + fn + " produced fewer results than its signature declares");
        continue;
      }
      AsyncValueRef<Tensor> from = outs[i], to = results[i];
      from->andThen([from, to] {
        if (from->isError()) to->setError(from->error());
        else to->emplace(from->get());
      });
    }
  });
  return results;
}

std::vector<AsyncValueRef<Tensor>> Module::callAsync(llvm::StringRef function,
                                                     llvm::ArrayRef<Tensor> inputs,
                                                     std::shared_ptr<CancellationToken> cancel) {
  return start(function, inputs, /*inlineFirstStep=*/false, std::move(cancel));
}

llvm::Expected<std::vector<Tensor>> Module::call(llvm::StringRef function,
                                                 llvm::ArrayRef<Tensor> inputs) {
  auto futures = start(function, inputs, /*inlineFirstStep=*/true, nullptr);
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
