#include "jit/CompileService.h"
#include "runtime/Trace.h"

#include "llvm/Support/FormatVariadic.h"

#include "jit/PlacementTuner.h"
#include "jit/PlanJson.h"
#include "runtime/Clock.h"
#include "runtime/Error.h"
#include "runtime/ThreadPriority.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit {
namespace {

/// Why a cache entry's plan cannot serve a call of `sig` with `inputs` and
/// `weights` (its checksum protects against corruption, not against an
/// entry edited and re-summed), or "" when it agrees with them.
std::string planDisagreement(const lowering::ExecPlan &plan, const FunctionSignature &sig,
                             llvm::ArrayRef<TensorType> inputs, llvm::ArrayRef<Tensor> weights,
                             llvm::ArrayRef<TensorType> results) {
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const lowering::PlanValue &pv = plan.values[v];
    if (pv.kind == lowering::PlanValue::kInput &&
        (pv.index < 0 || size_t(pv.index) >= inputs.size() || pv.type != inputs[pv.index]))
      return "its plan's input " + std::to_string(pv.index) + " is tensor<" + pv.type.str() + ">, the call's " +
             (pv.index >= 0 && size_t(pv.index) < inputs.size() ? "tensor<" + inputs[pv.index].str() + ">" : "nothing");
    if (pv.kind == lowering::PlanValue::kWeight &&
        (pv.index < 0 || size_t(pv.index) >= weights.size() || pv.type != weights[pv.index].type()))
      return "its plan's weight " + std::to_string(pv.index) + " (tensor<" + pv.type.str() +
             ">) is not the module's";
  }
  if (plan.results.size() != results.size() || results.size() != sig.results.size())
    return "it has " + std::to_string(plan.results.size()) + " results, @" + sig.name + " returns " +
           std::to_string(sig.results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    int id = plan.results[i];
    if (id < 0 || size_t(id) >= plan.values.size() || plan.values[id].type != results[i])
      return "its plan's result " + std::to_string(i) + " is not its declared tensor<" + results[i].str() + ">";
    const TensorType &declared = sig.results[i];
    bool ok = declared.dtype == results[i].dtype && declared.shape.size() == results[i].shape.size();
    for (size_t d = 0; ok && d < declared.shape.size(); ++d)
      ok = declared.shape[d] == kDynamic || declared.shape[d] == results[i].shape[d];
    if (!ok)
      return "its result " + std::to_string(i) + " is tensor<" + results[i].str() + ">, @" + sig.name +
             " returns tensor<" + declared.str() + ">";
  }
  return "";
}

}  // namespace

CompileService::CompileService(std::shared_ptr<Target> target, CompileServiceOptions options)
    : target_(std::move(target)), options_(std::move(options)),
      compiler_(target_, options_.spawn, options_.compileThreads),
      disk_(cache::DiskCache::open(options_.disk)), memory_(options_.memoryEntries) {
  compiler_.setTrace(options_.trace);
  compiler_.setPlacementTuner(options_.executor);
  targetText_ = target_->description();
  pipelineId_ = cache::hash128Hex(target_->name().str() + "\n" + target_->pipelineText());
  kernelPlacement_ = options_.placement;
  kernelPlacement_.modes = {{"*", ops::OpMode::kKernel}};
  kernelPlacement_.measure = false;
  loadPlacement();
}

cache::CacheKeyParts CompileService::placementKey() const {
  cache::CacheKeyParts key;
  key.graph = cache::hash128Hex("kiln placement decisions");
  key.function = "kiln.placement";
  key.target = targetText_;
  key.pipeline = pipelineId_;
  key.kilnVersion = cache::kilnVersion();
  key.llvmVersion = LLVM_VERSION_STRING;
  return key;
}

void CompileService::loadPlacement() {
  PlacementTuner *tuner = compiler_.placementTuner();
  if (!tuner || disk_->mode() == cache::CacheMode::kOff) return;
  std::optional<cache::CachedFunction> record = disk_->load(placementKey(), /*counted=*/false);
  if (!record) return;
  auto seeded = tuner->seed(record->plan);
  if (!seeded) {
    std::string why = toStatus(seeded.takeError()).message;
    disk_->remove(placementKey(), why);
    if (options_.warn) options_.warn("compile cache: placement decisions ignored (" + why + ")");
  }
}

void CompileService::storePlacement() {
  PlacementTuner *tuner = compiler_.placementTuner();
  if (!tuner || disk_->mode() != cache::CacheMode::kReadWrite || !options_.faults.kernelsWinMeasurement.empty() ||
      tuner->takeNewDecisions() == 0)
    return;
  // What other processes wrote meanwhile joins this one's decisions.
  if (std::optional<cache::CachedFunction> record = disk_->load(placementKey(), /*counted=*/false)) {
    if (auto seeded = tuner->seed(record->plan); !seeded) llvm::consumeError(seeded.takeError());
  }
  cache::CachedFunction entry;
  entry.key = placementKey();
  entry.plan = tuner->toJson();
  disk_->store(entry, /*counted=*/false);
}

CompileService::~CompileService() { waitForBackgroundJobs(); }

void CompileService::waitForBackgroundJobs() {
  std::unique_lock<std::mutex> lock(mu_);
  backgroundIdle_.wait(lock, [&] { return backgroundJobs_ == 0; });
}

CompileServiceStats CompileService::stats() const {
  CompileServiceStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.evictions = memory_.evictions();
  s.disk = disk_->stats();
  return s;
}

llvm::Expected<cache::CacheKeyParts> CompileService::cacheKey(lowering::Program &program,
                                                              llvm::StringRef function,
                                                              llvm::ArrayRef<TensorType> inputTypes,
                                                              Tier tier) {
  auto graph = program.canonicalGraph(function);
  if (!graph) return graph.takeError();
  cache::CacheKeyParts key;
  key.graph = cache::hash128Hex(*graph);
  key.function = function.str();
  key.signature = cache::ShapeSignature::of(inputTypes).str();
  key.target = targetText_;
  key.pipeline = pipelineId_;
  key.opModes = placementFor(tier).canonical();
  key.kilnVersion = cache::kilnVersion();
  key.llvmVersion = LLVM_VERSION_STRING;
  return key;
}

llvm::Expected<CompileService::Compiled> CompileService::getOrCompile(lowering::Program &program,
                                                                      llvm::StringRef function,
                                                                      llvm::ArrayRef<TensorType> inputTypes,
                                                                      const CancellationToken *cancel, Tier tier,
                                                                      WeightMove move) {
  const FunctionSignature *sig = program.lookup(function);
  if (!sig) return noSuchFunction(function, program.functions());
  if (auto err = checkInputs(*sig, inputTypes)) return std::move(err);
  auto lookupStart = Clock::now();
  auto key = cacheKey(program, function, inputTypes, tier);
  if (!key) return key.takeError();
  std::string digest = key->digest();

  // Memory, else single flight: the first caller produces, the others wait
  // for it (counted as memory hits, as the producer's result serves them).
  Compiled code;
  AsyncValueRef<Compiled> pending;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    code = memory_.get(digest);
    if (!code) {
      auto [it, inserted] = inFlight_.try_emplace(digest);
      if (inserted) it->second = makeUnavailable<Compiled>();
      producer = inserted;
      pending = it->second;
    }
    ++(producer ? stats_.memoryMisses : stats_.memoryHits);
  }
  if (std::shared_ptr<TraceRecorder> trace = options_.trace ? options_.trace() : nullptr) {
    TraceEvent e;  // the key and the memory cache's answer
    e.name = "cache lookup @" + function.str();
    e.category = "compile";
    e.args = {{"signature", key->signature},
              {"memory", code ? "hit" : producer ? "miss" : "miss (another call is compiling it)"}};
    trace->add(std::move(e), lookupStart, Clock::now());
  }
  if (producer) {
    auto produced = produce(program, function, inputTypes, *key, cancel, tier, move);
    std::lock_guard<std::mutex> lock(mu_);
    inFlight_.erase(digest);
    if (!produced) {  // not cached: a later call retries
      Status status = toStatus(produced.takeError());
      pending->setError(status);
      return makeError(std::move(status));
    }
    code = *produced;
    uint64_t evicted = memory_.evictions();
    memory_.put(digest, code);
    // Packed matmul weights only evicted code read go with it (else they
    // would stay until the next executable is built).
    if (memory_.evictions() != evicted) compiler_.trimPackedWeights();
    pending->emplace(code);
  } else if (!code) {
    auto v = pending.awaitValue();
    if (!v) return v.takeError();
    code = *v;
  }

  // The cache holds code, not weights: modules that share a graph (e.g.
  // re-trained weights) share code and each bind their own.
  auto weights = program.weights(function, target().weightLayouts(placementFor(tier)));
  if (!weights) return weights.takeError();
  bool same = weights->size() == code->weights.size();
  for (size_t i = 0; same && i < weights->size(); ++i)
    same = (*weights)[i].rawData() == code->weights[i].rawData();
  if (same) return code;
  auto bound = compiler_.bind(*code, std::move(*weights));
  if (!bound) return bound.takeError();
  if (tier == Tier::kCompiled) hugePageWeights(**bound, move);
  return Compiled(std::move(*bound));
}

bool CompileService::cached(lowering::Program &program, llvm::StringRef function,
                            llvm::ArrayRef<TensorType> inputTypes, Tier tier) {
  auto key = cacheKey(program, function, inputTypes, tier);
  if (!key) {
    llvm::consumeError(key.takeError());
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (memory_.contains(key->digest())) return true;
  }
  return disk_->contains(*key);
}

llvm::Expected<CompileService::Compiled> CompileService::produce(lowering::Program &program,
                                                                 llvm::StringRef function,
                                                                 llvm::ArrayRef<TensorType> types,
                                                                 const cache::CacheKeyParts &key,
                                                                 const CancellationToken *cancel, Tier tier,
                                                                 WeightMove move) {
  const ops::PlacementOptions &placement = placementFor(tier);
  auto t0 = Clock::now();
  if (auto entry = disk_->load(key)) {
    // Warm start: the objects from disk, the weights from this program; no MLIR pass runs.
    auto weights = program.weights(function, target().weightLayouts(placement));
    bool typesMatch = weights && entry->inputs == std::vector<TensorType>(types.begin(), types.end()) &&
                      entry->weights.size() == weights->size();
    for (size_t i = 0; typesMatch && i < weights->size(); ++i)
      typesMatch = (*weights)[i].type() == entry->weights[i];
    auto plan = planFromJson(entry->plan);
    std::string problem;
    if (!weights) problem = toStatus(weights.takeError()).str();
    else if (!plan) problem = toStatus(plan.takeError()).str();
    else if (!typesMatch) problem = "its types do not match the module";
    else if (const FunctionSignature *sig = program.lookup(function))
      problem = planDisagreement(*plan, *sig, types, *weights, entry->results);
    if (problem.empty()) {
      std::vector<llvm::SmallVector<char, 0>> objects;
      for (const std::string &o : entry->objects) objects.emplace_back(o.begin(), o.end());
      auto loaded = compiler_.load(function, entry->inputs, entry->results, *weights, std::move(*plan),
                                   std::move(objects));
      if (loaded) {
        if (tier == Tier::kCompiled) hugePageWeights(**loaded, move);
        if (std::shared_ptr<TraceRecorder> trace = options_.trace ? options_.trace() : nullptr) {
          TraceEvent e;
          e.name = "load @" + function.str() + " from the disk cache";
          e.category = "compile";
          e.args = {{"signature", key.signature}, {"objects", std::to_string(entry->objects.size())}};
          trace->add(std::move(e), t0, Clock::now());
        }
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.diskHits;
        stats_.diskLoadMs += msSince(t0);
        return Compiled(std::move(*loaded));
      }
      problem = toStatus(loaded.takeError()).str();
    }
    // An entry that cannot serve its key goes: it would fail every later run.
    disk_->remove(key, "it cannot serve @" + function.str() + " (" + key.signature + "): " + problem);
    if (options_.warn)
      options_.warn("compile cache entry for @" + function.str() + " (" + key.signature +
                    ") cannot be used (" + problem + "); compiling instead");
  }
  if (tier == Tier::kCompiled && options_.faults.beforeCompile) options_.faults.beforeCompile();
  t0 = Clock::now();
  auto compiled = compiler_.compile(program, function, types, placement, options_.faults, cancel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiles;
    stats_.kernelPlans += tier == Tier::kKernels;
    stats_.compileMs += msSince(t0);
    stats_.compileFailures += !compiled;
    if (compiled) stats_.jitFallbacks += uint64_t((*compiled)->stats.jitFallbacks);
  }
  if (!compiled) return compiled.takeError();
  // Kernel plans serve first calls: no copy of the weights into huge
  // pages on their path (ResNet-50's 100 MB: 0.2-2 s).
  if (tier == Tier::kCompiled) hugePageWeights(**compiled, move);
  if (std::shared_ptr<TraceRecorder> trace = options_.trace ? options_.trace() : nullptr) {
    const CompileStats &st = (*compiled)->stats;
    TraceEvent e;
    e.name = "compile @" + function.str();
    e.category = "compile";
    e.args = {{"signature", key.signature},
              {"kernels compiled", std::to_string(st.kernelsCompiled)},
              {"kernels shared", std::to_string(st.kernelsShared)},
              {"threads", std::to_string(st.compileThreads)}};
    for (const lowering::StageTime &t : st.stages)
      e.args.push_back({"ms " + t.stage, llvm::formatv("{0:f1}", t.ms).str()});
    trace->add(std::move(e), t0, Clock::now());
  }
  if (options_.warn)
    for (const std::string &w : (*compiled)->stats.warnings) options_.warn(w);
  Compiled code(std::move(*compiled));
  if (disk_->mode() != cache::CacheMode::kReadWrite) return code;  // no plan to encode (10 ms for BERT's)
  if (code->stats.placementsMeasured > 0) storePlacement();
  // A kernel plan serves a call that waits for it: the entry is encoded and
  // written (fsync'ed) in a job of its own that the service's destructor
  // waits for, below the calls' priority: at theirs, encoding RegNetY-400MF's
  // plan (333 KB of JSON, ~20 ms) took a core from the first call it serves.
  if (tier == Tier::kKernels && options_.spawn) {
    spawnTracked([this, code, key] { runAtBackgroundPriority([&] { storeOnDisk(*code, key); }); });
    return code;
  }
  storeOnDisk(*code, key);
  return code;
}

void CompileService::storeOnDisk(const CompiledFunction &code, const cache::CacheKeyParts &key) {
  cache::CachedFunction entry;
  entry.key = key;
  entry.inputs = code.inputTypes;
  for (const Tensor &w : code.weights) entry.weights.push_back(w.type());
  entry.results = code.resultTypes;
  entry.plan = planToJson(code.plan);
  for (const auto &o : code.objects) entry.objects.emplace_back(o.begin(), o.end());
  disk_->store(entry);
}

/// Copies each tensor of `weights` into huge pages (HugePageSlabs::adopt);
/// the bytes moved (tensors another caller moved first do not count).
static size_t moveIntoHugePages(llvm::ArrayRef<Tensor> weights) {
  size_t moved = 0;
  for (const Tensor &w : weights)
    if (HugePageSlabs::shared().adopt(w)) moved += w.byteSize();
  return moved;
}

void CompileService::hugePageWeights(CompiledFunction &code, WeightMove move) {
  if (!options_.hugePageWeights) return;
  std::vector<Tensor> big;
  for (const Tensor &w : code.weights)
    if (w.byteSize() >= kHugePageWeightBytes) big.push_back(w);
  if (big.empty()) return;
  if (move == WeightMove::kInline || !options_.spawn) {
    auto t0 = Clock::now();
    if (moveIntoHugePages(big)) code.stats.stages.push_back({"huge-pages", msSince(t0)});
    return;
  }
  // Deferred: the tensors keep their buffers alive; calls read wherever a
  // buffer is when they read it (Buffer::relocate keeps the old memory).
  spawnTracked([this, big = std::move(big)] {
    auto t0 = Clock::now();
    size_t moved = moveIntoHugePages(big);
    if (std::shared_ptr<TraceRecorder> trace = options_.trace ? options_.trace() : nullptr; trace && moved) {
      TraceEvent e;
      e.name = "weights into huge pages";
      e.category = "compile";
      e.args = {{"bytes", std::to_string(moved)}};
      trace->add(std::move(e), t0, Clock::now());
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.hugePageBytes += moved;
    stats_.hugePageMs += msSince(t0);
  });
}

void CompileService::spawnTracked(llvm::unique_function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++backgroundJobs_;
  }
  options_.spawn([this, job = std::move(job)]() mutable {
    job();
    std::lock_guard<std::mutex> lock(mu_);
    if (--backgroundJobs_ == 0) backgroundIdle_.notify_all();
  });
}

}  // namespace kiln::jit
