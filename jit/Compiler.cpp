#include "jit/Compiler.h"

#include "jit/PlacementTuner.h"
#include "jit/RuntimeSymbols.h"

#include "kernels/KernelRegistry.h"
#include "kernels/MatmulPanels.h"
#include "kernels/VectorKernels.h"
#include "runtime/Clock.h"
#include "runtime/Error.h"
#include "runtime/Executor.h"
#include "runtime/ThreadPriority.h"
#include "runtime/Trace.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace kiln::jit {
namespace {

/// The kernel registry, as the partitioner asks about it.
class RegistryOracle final : public lowering::KernelOracle {
public:
  llvm::Expected<std::string> kernelFor(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs,
                                        const ops::AttrMap &attrs,
                                        llvm::ArrayRef<TensorType> results) const override {
    auto choice = kernels::registry().select(op, inputs, attrs);
    if (!choice) return choice.takeError();
    if (choice->results != std::vector<TensorType>(results.begin(), results.end()))  // must agree with MLIR
      return error(ErrorCode::kUnsupported, "kernel shape function gives %s, the graph has %s",
                   choice->results.empty() ? "nothing" : choice->results[0].str().c_str(),
                   results.empty() ? "nothing" : results[0].str().c_str());
    return choice->name;
  }
};

/// Adds `t` to the entry of its stage in `times`, or appends it.
void addStageTime(lowering::StageTimes &times, const lowering::StageTime &t) {
  auto it = std::find_if(times.begin(), times.end(), [&](const lowering::StageTime &x) { return x.stage == t.stage; });
  if (it == times.end()) times.push_back(t);
  else it->ms += t.ms;
}

/// Plan value `id`'s data when it is fixed for every call: computed once
/// from weights (`folded`: Compiler::foldWeightSteps), else a weight or
/// constant of `out`; null otherwise.
Tensor constantData(const CompiledFunction &out, const std::map<int, Tensor> &folded, int id) {
  if (auto it = folded.find(id); it != folded.end()) return it->second;
  return out.constantValue(id);
}

/// The tosa.clamp steps on kernels that can run inside the conv kernel step
/// writing their input (kernels::kFusedClampMin): the input is an f32
/// intermediate of the clamp's type that only that step writes and only the
/// clamp reads. Conv step -> clamp step; `folded` steps take no part.
std::map<size_t, size_t> fusibleClamps(const lowering::ExecPlan &plan, const std::set<size_t> &folded) {
  using lowering::PlanStep;
  std::vector<int> uses(plan.values.size(), 0), producer(plan.values.size(), -1);
  for (int r : plan.results) ++uses[size_t(r)];
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (folded.count(s)) continue;
    for (int v : plan.steps[s].inputs) ++uses[size_t(v)];
    for (int v : plan.steps[s].outputs) producer[size_t(v)] = int(s);
  }
  std::map<size_t, size_t> fused;
  for (size_t t = 0; t < plan.steps.size(); ++t) {
    const PlanStep &clamp = plan.steps[t];
    if (folded.count(t) || clamp.kind != PlanStep::kKernel || clamp.op != "tosa.clamp" || clamp.inputs.size() != 1 ||
        clamp.outputs.size() != 1 || !clamp.attrs.has("min_val") || !clamp.attrs.has("max_val"))
      continue;
    const int v = clamp.inputs[0];
    const lowering::PlanValue &value = plan.values[size_t(v)];
    const int s = producer[size_t(v)];
    if (s < 0 || uses[size_t(v)] != 1 || value.kind != lowering::PlanValue::kIntermediate ||
        value.type.dtype != DType::f32 || value.type != plan.values[size_t(clamp.outputs[0])].type)
      continue;
    const PlanStep &conv = plan.steps[size_t(s)];
    // (One output, read once: no other clamp can claim the step.)
    if (conv.kind == PlanStep::kKernel && kernels::takesFusedClamp(conv.op) && conv.outputs.size() == 1)
      fused[size_t(s)] = t;
  }
  return fused;
}

}  // namespace

const lowering::KernelOracle &registryOracle() {
  static const RegistryOracle oracle;
  return oracle;
}

namespace {
/// Jobs 0..n-1 claimed from one counter by whichever threads work on them
/// (work sharing): a thread that comes after every job is claimed touches
/// only the counter. wait() returns once every job has finished or been
/// skipped.
struct SharedJobs {
  explicit SharedJobs(size_t n) : n(n) {}
  const size_t n;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  void work(llvm::function_ref<void(size_t)> fn) {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      fn(i);
      finished(1);
    }
  }
  /// The jobs no thread has claimed yet are never run.
  void skipUnclaimed() {
    size_t claimed = next.exchange(n + (size_t(1) << 30));
    if (claimed < n) finished(n - claimed);
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == n; });
  }

private:
  void finished(size_t jobs) {
    std::lock_guard<std::mutex> lock(mu);
    if ((done += jobs) == n) cv.notify_all();
  }
};
}  // namespace

void Compiler::runShared(size_t n, int helpers, llvm::function_ref<void(size_t)> job) const {
  // The caller and up to `helpers` tasks on the spawn pool share the jobs.
  // The caller can finish every job alone, so a busy pool never deadlocks
  // it; a helper that starts after all jobs are claimed touches only the
  // shared counter.
  auto state = std::make_shared<SharedJobs>(n);
  // A background compile (tiered execution): its helpers are threads of
  // their own at its priority, not the pool's (whose priority could not be
  // raised again afterwards).
  const bool background = inBackgroundPriority();
  if (background || spawn_)
    for (int h = 0; h < helpers && size_t(h + 1) < n; ++h) {
      auto helper = [state, job, background] {
        if (background) enterBackgroundPriority();
        state->work(job);
      };
      if (background) std::thread(std::move(helper)).detach();
      else spawn_(std::move(helper));
    }
  state->work(job);
  state->wait();
}

Tensor CompiledFunction::constantValue(int id) const {
  using lowering::PlanValue;
  if (id < 0 || size_t(id) >= plan.values.size()) return Tensor();
  const PlanValue &v = plan.values[id];
  if (v.kind == PlanValue::kWeight && v.index >= 0 && size_t(v.index) < weights.size()) return weights[v.index];
  if (v.kind == PlanValue::kConstant && v.constant.valid()) return v.constant;
  return Tensor();
}

void Compiler::setPlacementTuner(std::shared_ptr<HostExecutor> executor) {
  executor_ = executor;
  tuner_ = executor ? std::make_shared<PlacementTuner>(std::move(executor)) : nullptr;
}

void Compiler::foldWeightSteps(const CompiledFunction &out, std::map<int, Tensor> &values,
                               std::set<size_t> &steps) const {
  if (!executor_) return;
  const lowering::ExecPlan &plan = out.plan;
  std::set<int> results(plan.results.begin(), plan.results.end());
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const lowering::PlanStep &step = plan.steps[s];
    // A kernel's reshape of a weight is a view of it (no copy per call:
    // kiln-raise-linalg's gathers read an embedding table through one, at
    // 94 MB for BERT's).
    if (step.kind == lowering::PlanStep::kKernel && step.op == "tosa.reshape" && step.inputs.size() == 1 &&
        step.outputs.size() == 1 && !results.count(step.outputs[0])) {
      Tensor t = constantData(out, values, step.inputs[0]);
      const TensorType &type = plan.values[step.outputs[0]].type;
      if (t.valid() && t.dtype() == type.dtype && t.numElements() == type.numElements()) {
        values[step.outputs[0]] = t.reshaped(type.shape);
        steps.insert(s);
      }
      continue;
    }
    CompiledFunction::EntryFn entry = out.directEntry(s);
    if (step.kind != lowering::PlanStep::kJit || !entry || step.outputs.empty()) continue;
    std::vector<void *> buffers;
    size_t inBytes = 0, outBytes = 0;
    bool weightsOnly = true;
    for (int id : step.inputs) {
      Tensor t = constantData(out, values, id);
      if (!t.valid()) {
        weightsOnly = false;
        break;
      }
      inBytes += t.byteSize();
      buffers.push_back(t.rawData());
    }
    if (!weightsOnly) continue;
    for (int id : step.outputs) {
      if (results.count(id)) weightsOnly = false;  // a result is written per call
      outBytes += plan.values[id].type.byteSize();
    }
    // Layout read-backs (transpose, slice, reshape) keep the size; a step
    // that would grow its weights (a broadcast) stays a step.
    if (!weightsOnly || outBytes > 2 * inBytes + (size_t(1) << 20)) continue;
    std::vector<Tensor> outs;
    bool allocated = true;
    for (int id : step.outputs) {
      auto t = Tensor::allocate(plan.values[id].type.dtype, plan.values[id].type.shape, "a folded weight");
      if (!t) {
        llvm::consumeError(t.takeError());
        allocated = false;
        break;
      }
      outs.push_back(std::move(*t));
      buffers.push_back(outs.back().rawData());
    }
    if (!allocated) continue;
    takeFault();
    {
      HostExecutor::ParallelScope scope(*executor_);
      entry(buffers.data());
    }
    if (takeFault()) continue;  // a guarded fault: the step runs per call and reports it
    for (size_t i = 0; i < outs.size(); ++i) values[step.outputs[i]] = std::move(outs[i]);
    steps.insert(s);
  }
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::compile(lowering::Program &program, llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes,
                  const ops::PlacementOptions &placement, const FaultInjection &faults,
                  const CancellationToken *cancel) {
  const lowering::KernelOracle &oracle = registryOracle();
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  std::set<std::string> forceKernel;
  // Placement by measurement: the ops a kernel ran faster, and whether this
  // compile has measured (once: the second partition uses the results).
  bool measure = tuner_ && placement.measuring(), linked = false;
  // Ops a kernel won before (in this process, or an earlier one whose
  // decisions the compile service seeded) go on their kernels at once.
  std::map<std::string, std::string> measuredKernels;
  if (measure) measuredKernels = tuner_->kernelWins();
  double measureMs = 0;
  int measuredSteps = 0;
  // Code compiled by an earlier round, by cluster fingerprint: a partition
  // after measuring or a fallback recompiles only the clusters it changed.
  std::map<std::string, TargetObject> compiledBefore;
  // A kernel plan's filters pack while its function is specialized and
  // partitioned (the plan's packWeights then finds them packed).
  Prepacking prepack = startPrepacking(program, function, placement);
  while (true) {
    // Stage times add up over the rounds (a fallback, a partition after
    // measuring); same-named stages are merged at the end.
    if (cancel && cancel->cancelled())
      return error(ErrorCode::kCancelled, "@%s: compile stopped (%s)", function.str().c_str(), cancel->reason());
    out->stats.kernelsShared = 0;
    out->objects.clear();
    std::shared_ptr<TraceRecorder> trace = trace_ ? trace_() : nullptr;
    auto specStart = Clock::now();
    auto spec = program.specialize(function, inputTypes, out->stats.stages, target_->weightLayouts(placement));
    if (!spec) return spec.takeError();
    auto partStart = Clock::now();
    auto part = program.partition(**spec, placement, oracle, forceKernel, target_->anchorsPerCluster(),
                                  measuredKernels);
    if (!part) return part.takeError();
    out->stats.stages.push_back({"partition", msSince(partStart)});
    if (trace) {
      TraceEvent a, b;
      a.name = "specialize @" + function.str();
      a.category = b.category = "compile";
      b.name = "partition @" + function.str();
      trace->add(std::move(a), specStart, partStart);
      trace->add(std::move(b), partStart, Clock::now());
    }
    out->inputTypes = (*part)->inputTypes;
    out->resultTypes = (*part)->resultTypes;
    out->weights = (*part)->weights;
    out->plan = std::move((*part)->plan);

    // Identical clusters (same fingerprint) compile once; distinct ones in
    // parallel. Each job keeps its own stage times, merged below.
    struct Job {
      size_t step;
      std::optional<TargetObject> object;
      std::string error;
      lowering::StageTimes times;
      int objectIndex = -1;
      bool reused = false;  // the same cluster's code from an earlier round
    };
    std::vector<Job> jobs;
    std::vector<int> jobOf(out->plan.steps.size(), -1);
    std::map<std::string, int> byFingerprint;
    for (size_t i = 0; i < out->plan.steps.size(); ++i) {
      if (out->plan.steps[i].kind != lowering::PlanStep::kJit) continue;
      const std::string &fp = (*part)->clusters[i]->fingerprint;
      auto [it, inserted] = byFingerprint.try_emplace(fp, int(jobs.size()));
      if (inserted || fp.empty()) {
        it->second = int(jobs.size());
        jobs.push_back(Job{i});
      }
      jobOf[i] = it->second;
    }
    // A deadline stops the compile between kernels (one kernel's own
    // compile is not interrupted): the remaining jobs are skipped.
    std::atomic<int> skipped{0};
    auto runJob = [&](size_t j) {
      Job &job = jobs[j];
      const lowering::PlanStep &s = out->plan.steps[job.step];
      if (cancel && cancel->cancelled()) {
        job.error = cancel->reason();
        ++skipped;
        return;
      }
      for (const std::string &op : s.ops)
        if (faults.failClustersWith.count(op)) {
          job.error = "injected failure (op " + op + ")";
          return;
        }
      const std::string &fp = (*part)->clusters[job.step]->fingerprint;
      if (auto it = compiledBefore.find(fp); !fp.empty() && it != compiledBefore.end()) {
        job.object = it->second;
        job.reused = true;
        return;
      }
      std::shared_ptr<TraceRecorder> trace = trace_ ? trace_() : nullptr;
      auto start = Clock::now();
      auto object = target_->compile(program, *(*part)->clusters[job.step], job.times);
      if (trace) {  // one event per kernel, on the thread that compiled it
        auto end = Clock::now();
        TraceEvent e;
        e.name = "compile @" + (*part)->clusters[job.step]->function;
        e.category = "compile";
        e.args.push_back({"ops", llvm::join(s.ops, ", ")});
        for (const lowering::StageTime &t : job.times) e.args.push_back({"ms " + t.stage, std::to_string(t.ms)});
        trace->add(std::move(e), start, end);
        // Inside it, each stage in turn (they run one after another).
        auto at = start;
        for (const lowering::StageTime &t : job.times) {
          auto until = std::min(end, at + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double, std::milli>(t.ms)));
          TraceEvent st;
          st.name = t.stage;
          st.category = "compile";
          trace->add(std::move(st), at, until);
          at = until;
        }
      }
      if (object) job.object = std::move(*object);
      else job.error = llvm::toString(object.takeError());
    };
    int threads = std::min<int>(threads_, int(jobs.size()));
    runShared(jobs.size(), threads - 1, runJob);
    out->stats.compileThreads = std::max(1, threads);
    if (skipped.load())
      return error(ErrorCode::kCancelled, "@%s: compile stopped (%s) with %zu of %zu kernels compiled",
                   function.str().c_str(), cancel->reason(), jobs.size() - size_t(skipped.load()), jobs.size());

    std::set<std::string> failedOps;
    std::string failure;
    for (size_t i = 0; i < out->plan.steps.size(); ++i) {
      lowering::PlanStep &s = out->plan.steps[i];
      if (s.kind != lowering::PlanStep::kJit) continue;
      Job &job = jobs[size_t(jobOf[i])];
      if (!job.object) {
        failure = "@" + function.str() + ": JIT compilation of " + s.name + " (" + llvm::join(s.ops, ", ") +
                  ") failed: " + job.error;
        failedOps.insert(s.ops.begin(), s.ops.end());
        break;
      }
      if (job.objectIndex < 0) {
        job.objectIndex = int(out->objects.size());
        out->objects.push_back(job.object->bytes);
      } else {
        ++out->stats.kernelsShared;
      }
      s.target = target_->name().str();
      s.object = job.objectIndex;
      s.symbol = job.object->entry.empty() ? target_->entrySymbol() : job.object->entry;
      s.faultSites = job.object->faultSites;
      s.scratchBytes = job.object->scratchBytes;
      s.strategy = job.object->strategy;
    }
    out->stats.kernelsCompiled += int(std::count_if(jobs.begin(), jobs.end(), [](const Job &j) { return !j.reused; }));
    for (const Job &job : jobs)
      if (job.object && !(*part)->clusters[job.step]->fingerprint.empty())
        compiledBefore.emplace((*part)->clusters[job.step]->fingerprint, *job.object);
    // Stage times summed over the jobs, in the order stages first appear.
    for (const Job &job : jobs)
      for (const lowering::StageTime &t : job.times) addStageTime(out->stats.stages, t);
    if (failure.empty()) {
      if (!measure) break;
      // Time the alternatives; partition again if a kernel won.
      measure = false;
      prepack.finish();
      if (auto err = link(*out)) return std::move(err);
      linked = true;
      auto measureStart = Clock::now();
      measuredSteps = tuner_->measure(*out, *this, faults.kernelsWinMeasurement, faults.machineBusy);
      measureMs = msSince(measureStart);
      measuredKernels = tuner_->kernelWins();
      bool changes = false;
      for (const lowering::PlanStep &s : out->plan.steps)
        for (const auto &alt : s.alternatives) changes |= measuredKernels.count(alt.signature) != 0;
      if (!changes) break;
      linked = false;
      continue;
    }
    // Fall back: the failed cluster's ops go to kernels, if that changes anything.
    size_t before = forceKernel.size();
    forceKernel.insert(failedOps.begin(), failedOps.end());
    if (forceKernel.size() == before) return error(ErrorCode::kCompileFailed, "%s", failure.c_str());
    ++out->stats.jitFallbacks;
    out->stats.warnings.push_back(failure + "; its ops fall back to handwritten kernels");
  }
  for (const auto &o : out->objects) out->stats.objectBytes += o.size();
  prepack.finish();
  if (!linked)
    if (auto err = link(*out)) return std::move(err);
  if (measureMs > 0) out->stats.stages.push_back({"measure-placement", measureMs});
  lowering::StageTimes merged;  // one entry per stage over the rounds
  for (const lowering::StageTime &t : out->stats.stages) addStageTime(merged, t);
  out->stats.stages = std::move(merged);
  out->stats.placementsMeasured = measuredSteps;
  if (tuner_) {
    for (const lowering::PlanStep &s : out->plan.steps)
      out->stats.kernelsChosen += llvm::StringRef(s.reason).starts_with("measured");
    out->plan.summary += tuner_->report(out->plan);
  }
  out->stats.totalMs = msSince(t0);
  return out;
}

llvm::Error Compiler::link(CompiledFunction &out) {
  auto loadStart = Clock::now();
  std::vector<std::shared_ptr<LoadedCode>> code;
  for (size_t i = 0; i < out.objects.size(); ++i) {
    auto loaded = target_->load(out.objects[i], out.function + "." + std::to_string(i));
    if (!loaded)  // keeps the code: no GPU stays "unavailable"
      return withContext(loaded.takeError(),
                         "@" + out.function + ": loading object " + std::to_string(i) + " failed: ");
    code.push_back(std::move(*loaded));
  }
  out.launches_.assign(out.plan.steps.size(), Launch());
  for (size_t s = 0; s < out.plan.steps.size(); ++s) {
    const lowering::PlanStep &step = out.plan.steps[s];
    if (step.kind != lowering::PlanStep::kJit) continue;
    if (step.target != target_->name())
      return error(ErrorCode::kUnsupported, "@%s: step %s was compiled for target '%s', this runtime has '%s'",
                   out.function.c_str(), step.name.c_str(), step.target.c_str(), target_->name().str().c_str());
    if (step.object < 0 || step.object >= int(code.size()))
      return error(ErrorCode::kInternal, "@%s: step %s names object %d of %zu", out.function.c_str(),
                   step.name.c_str(), step.object, code.size());
    auto launch = target_->launch(code[step.object], step.symbol, step.faultSites);
    if (!launch) return withContext(launch.takeError(), "@" + out.function + ": ");
    out.launches_[s] = std::move(*launch);
  }
  out.stats.stages.push_back({"jit-load", msSince(loadStart)});
  if (std::shared_ptr<TraceRecorder> trace = trace_ ? trace_() : nullptr) {
    TraceEvent e;
    e.name = "load and link @" + out.function;
    e.category = "compile";
    e.args = {{"objects", std::to_string(out.objects.size())}};
    trace->add(std::move(e), loadStart, Clock::now());
  }
  return buildExecutable(out);
}

Shape Compiler::packedShape(const TensorType &type, PackedLayout layout) {
  if (type.dtype != DType::f32) return {};
  switch (layout) {
  case PackedLayout::kMatmulPanels:
    return type.shape.size() == 3 ? type.shape : Shape();
  case PackedLayout::kConvFilter:
    // [patch, F] rows padded to whole 16-float vectors: as a shape, F
    // rounded up to a multiple of 16 filters.
    return type.shape.size() == 4 ? Shape{kernels::convPackedFilters(type.shape[0]), type.shape[1], type.shape[2],
                                          type.shape[3]}
                                  : Shape();
  case PackedLayout::kGroupedFilter:
    return kernels::groupedConvPackedShape(type);
  }
  return {};
}

const char *Compiler::packedAttr(PackedLayout layout) {
  return layout == PackedLayout::kMatmulPanels ? kernels::kMatmulPackedB
         : layout == PackedLayout::kConvFilter ? kernels::kConvPackedFilter
                                               : kernels::kGroupedPackedFilter;
}

Tensor Compiler::packedWeight(const Tensor &weight, PackedLayout layout) const {
  // The packed tensor's shape: the weight's (the same elements in another
  // order), or the grouped filter's vectors of groups.
  const Shape shape = packedShape(weight.type(), layout);
  if (shape.empty()) return Tensor();
  const TensorType packedType{DType::f32, shape};
  auto key = std::make_tuple(weight.buffer().get(), weight.byteOffset(), int(layout));
  auto cached = [&]() -> Tensor {
    if (auto it = packed_.find(key); it != packed_.end() && it->second.packed.type() == packedType)
      return it->second.packed;
    return Tensor();
  };
  {
    std::lock_guard<std::mutex> lock(packedMu_);
    if (Tensor t = cached(); t.valid()) return t;
  }
  // Packed outside the lock: plans pack their weights in parallel
  // (packWeights); the first to finish a weight is kept.
  auto packed = Tensor::allocate(DType::f32, shape, "a weight in a kernel's packed order");
  if (!packed) {
    llvm::consumeError(packed.takeError());
    return Tensor();
  }
  llvm::ArrayRef<int64_t> s = weight.shape();
  if (layout == PackedLayout::kMatmulPanels)
    kernels::packMatmulB(weight.data<float>(), s[0], s[1], s[2], packed->data<float>());
  else if (layout == PackedLayout::kConvFilter) {
    const int64_t patch = s[1] * s[2] * s[3], F = s[0], Fp = shape[0];
    float *out = packed->data<float>();
    kernels::packConvFilter(weight.data<float>(), F, patch, out, Fp);
    // (The padding columns, past F, are zeros: the GEMM reads them.)
    if (Fp != F)
      for (int64_t q = 0; q < patch; ++q) std::memset(out + q * Fp + F, 0, size_t(Fp - F) * sizeof(float));
  }
  else
    kernels::packGroupedFilter(weight.data<float>(), s[0], s[1], s[2], s[3], s[4], shape[4], packed->data<float>());
  std::lock_guard<std::mutex> lock(packedMu_);
  if (Tensor t = cached(); t.valid()) return t;
  packed_[key] = {weight.buffer(), *packed};
  return *packed;
}

std::optional<Compiler::PackedLayout> Compiler::packedLayoutOf(llvm::StringRef op,
                                                                llvm::ArrayRef<TensorType> inTypes) {
  // A matmul on a weight reads it in the kernel's panel order, stored
  // once (not copied panel by panel on every call). So does a conv's filter.
  if (op == "tosa.matmul" && kernels::matmulReadsPanels(inTypes)) return PackedLayout::kMatmulPanels;
  if (op == "tosa.conv2d" && kernels::conv2dReadsPackedFilter(inTypes)) return PackedLayout::kConvFilter;
  if (op == "tosa.custom:kiln.grouped_conv2d" && inTypes.size() == 2 &&
      !kernels::groupedConvPackedShape(inTypes[1]).empty())
    return PackedLayout::kGroupedFilter;
  return std::nullopt;
}

struct Compiler::Prepacking::State {
  State(const Compiler *compiler, std::vector<std::pair<Tensor, PackedLayout>> todo)
      : compiler(compiler), todo(std::move(todo)), packed(this->todo.size()), jobs(this->todo.size()) {}
  const Compiler *compiler;
  const std::vector<std::pair<Tensor, PackedLayout>> todo;
  std::vector<Tensor> packed;  // by todo's index
  SharedJobs jobs;
  /// Claims and packs weights until none is left.
  void work() {
    jobs.work([&](size_t i) { packed[i] = compiler->packedWeight(todo[i].first, todo[i].second); });
  }
};

Compiler::Prepacking::~Prepacking() {
  if (!state_) return;
  // Unfinished (the compile failed): what no thread has started is skipped.
  state_->jobs.skipUnclaimed();
  state_->jobs.wait();
}

void Compiler::Prepacking::finish() {
  if (!state_) return;
  state_->work();
  state_->jobs.wait();
}

Compiler::Prepacking Compiler::startPrepacking(lowering::Program &program, llvm::StringRef function,
                                               const ops::PlacementOptions &placement) const {
  Prepacking p;
  if (!spawn_) return p;
  std::set<std::string> ops;
  for (const char *op : {"tosa.conv2d", "tosa.custom:kiln.grouped_conv2d", "tosa.matmul"})
    if (placement.modeFor(op) == ops::OpMode::kKernel) ops.insert(op);
  if (ops.empty()) return p;
  std::vector<std::pair<Tensor, PackedLayout>> todo;
  std::set<const Buffer *> seen;
  for (lowering::Program::ConstantOperand &c : program.constantOperands(function, ops)) {
    if (c.operand != 1 || !seen.insert(c.value.buffer().get()).second) continue;
    if (std::optional<PackedLayout> layout = packedLayoutOf(c.op, c.operandTypes))
      todo.emplace_back(std::move(c.value), *layout);
  }
  if (todo.empty()) return p;
  auto state = std::make_shared<Prepacking::State>(this, std::move(todo));
  // One helper: this thread has the specialization to do meanwhile.
  spawn_([state] { state->work(); });
  p.state_ = std::move(state);
  return p;
}

void Compiler::packWeights(const CompiledFunction &out, const std::map<int, Tensor> &folded,
                           const std::set<size_t> &foldedSteps) const {
  const lowering::ExecPlan &plan = out.plan;
  std::vector<std::pair<Tensor, PackedLayout>> todo;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const lowering::PlanStep &step = plan.steps[s];
    if (foldedSteps.count(s) || step.kind == lowering::PlanStep::kJit || step.inputs.size() < 2) continue;
    std::vector<TensorType> inTypes;
    for (int v : step.inputs) inTypes.push_back(plan.values[v].type);
    std::optional<PackedLayout> layout = packedLayoutOf(step, inTypes);
    if (!layout) continue;
    if (Tensor weight = constantData(out, folded, step.inputs[1]); weight.valid())
      todo.emplace_back(std::move(weight), *layout);
  }
  // Each a copy into fresh memory, as costly in page faults as in bytes
  // moved: EfficientNet-B0's kernel plan packed for 16 ms on one thread.
  if (todo.size() > 1) runParallel(todo.size(), [&](size_t i) { (void)packedWeight(todo[i].first, todo[i].second); });
}

void Compiler::trimPackedWeights() const {
  std::lock_guard<std::mutex> lock(packedMu_);
  // A packed copy no plan reads any more (only this map holds it), or of a
  // weight whose module is gone, goes.
  for (auto it = packed_.begin(); it != packed_.end();)
    it = it->second.source->UseCount() == 1 || it->second.packed.buffer()->UseCount() == 1 ? packed_.erase(it)
                                                                                          : std::next(it);
}

llvm::Error Compiler::buildExecutable(CompiledFunction &out) const {
  trimPackedWeights();
  const lowering::ExecPlan &plan = out.plan;
  using lowering::PlanValue;
  // Steps that read only weights and constants run once, here.
  std::map<int, Tensor> folded;
  std::set<size_t> foldedSteps;
  auto weightsStart = Clock::now();
  foldWeightSteps(out, folded, foldedSteps);
  packWeights(out, folded, foldedSteps);
  out.stats.stages.push_back({"weights", msSince(weightsStart)});
  // Each fused clamp gets no step, and the value between it and its conv
  // no buffer: the conv's step writes the clamp's output.
  const std::map<size_t, size_t> clampOfStep = fusibleClamps(plan, foldedSteps);
  std::set<size_t> fusedSteps;
  std::set<int> fusedValues;
  for (auto [conv, clamp] : clampOfStep) {
    fusedSteps.insert(clamp);
    fusedValues.insert(plan.steps[clamp].inputs[0]);
  }
  // A kernel's reshape of a value computed per call is a view of it: its
  // readers read the same buffer (kernel steps take their types from the
  // plan, JIT code has them built in), with no step and no copy. RegNetY-
  // 400MF's kernel plan copied 131 of them a call, its grouped convs'
  // 2.5 MB inputs among them, each into fresh memory on a first call.
  std::map<int, int> viewOf;  // reshape's output -> the value whose buffer it reads
  std::set<size_t> viewSteps;
  {
    std::set<int> results(plan.results.begin(), plan.results.end());
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const lowering::PlanStep &step = plan.steps[s];
      if (foldedSteps.count(s) || fusedSteps.count(s) || step.kind != lowering::PlanStep::kKernel ||
          step.op != "tosa.reshape" || step.inputs.size() != 1 || step.outputs.size() != 1)
        continue;
      int in = step.inputs[0], result = step.outputs[0];
      if (results.count(result) || fusedValues.count(in) ||
          plan.values[in].type.byteSize() != plan.values[result].type.byteSize())
        continue;
      auto it = viewOf.find(in);
      viewOf[result] = it == viewOf.end() ? in : it->second;
      viewSteps.insert(s);
    }
  }
  ExecutableBuilder b;
  std::vector<int> buf(plan.values.size(), -1);
  // Inputs in position order, then outputs in result order, then the rest.
  std::vector<int> inputs;
  for (size_t v = 0; v < plan.values.size(); ++v)
    if (plan.values[v].kind == PlanValue::kInput) inputs.push_back(int(v));
  std::sort(inputs.begin(), inputs.end(),
            [&](int a, int c) { return plan.values[a].index < plan.values[c].index; });
  if (inputs.size() != out.inputTypes.size())
    return error(ErrorCode::kInternal, "@%s: the plan has %zu inputs, the function %zu", out.function.c_str(),
                 inputs.size(), out.inputTypes.size());
  for (int v : inputs) buf[v] = b.addInput(plan.values[v].type);
  std::vector<std::pair<int, int>> copies;  // (value, output buffer)
  for (int r : plan.results) {
    const PlanValue &v = plan.values[r];
    if (v.kind == PlanValue::kIntermediate && buf[r] < 0) buf[r] = b.addOutput(v.type);
    else copies.push_back({r, b.addOutput(v.type)});
  }
  for (size_t v = 0; v < plan.values.size(); ++v) {
    if (buf[v] >= 0 || fusedValues.count(int(v)) || viewOf.count(int(v))) continue;
    const PlanValue &val = plan.values[v];
    if (auto it = folded.find(int(v)); it != folded.end()) {
      buf[v] = b.addConstant(it->second);
      continue;
    }
    switch (val.kind) {
    case PlanValue::kWeight:
      if (val.index < 0 || val.index >= int(out.weights.size()) || out.weights[val.index].type() != val.type)
        return error(ErrorCode::kInternal, "@%s: weight %d does not match the plan", out.function.c_str(), val.index);
      buf[v] = b.addConstant(out.weights[val.index]);
      break;
    case PlanValue::kConstant:
      if (!val.constant.valid() || val.constant.type() != val.type)
        return error(ErrorCode::kInternal, "@%s: a constant of the plan is not a tensor<%s>", out.function.c_str(),
                     val.type.str().c_str());
      buf[v] = b.addConstant(val.constant);
      break;
    case PlanValue::kIntermediate:
      buf[v] = b.addIntermediate(val.type);
      break;
    case PlanValue::kInput:
      break;
    }
  }
  for (auto [view, source] : viewOf) buf[view] = buf[source];
  auto ids = [&](const std::vector<int> &values) {
    llvm::SmallVector<int, 8> out2;
    for (int v : values) out2.push_back(buf[v]);
    return out2;
  };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (foldedSteps.count(s) || fusedSteps.count(s) || viewSteps.count(s)) continue;
    const lowering::PlanStep &step = plan.steps[s];
    auto fusedClamp = clampOfStep.find(s);
    const lowering::PlanStep *clampStep = fusedClamp == clampOfStep.end() ? nullptr : &plan.steps[fusedClamp->second];
    StepFn fn;
    std::string name;
    StepKind kind;
    llvm::SmallVector<int, 8> inputIds = ids(step.inputs);
    if (step.kind == lowering::PlanStep::kJit) {
      fn = out.launches_[s].fn;
      name = "jit:@" + out.function + "." + step.name;
      kind = StepKind::kJit;
    } else {
      std::vector<TensorType> inTypes, outTypes;
      for (int v : step.inputs) inTypes.push_back(plan.values[v].type);
      for (int v : step.outputs) outTypes.push_back(plan.values[v].type);
      // The kernel placement chose (a plan from the cache names it; this
      // process must have it too).
      auto choice = kernels::registry().select(step.op, inTypes, step.attrs);
      if (!choice)
        return error(ErrorCode::kUnsupported, "@%s: no handwritten kernel for '%s' in this process: %s",
                     out.function.c_str(), step.op.c_str(), toStatus(choice.takeError()).message.c_str());
      if (!step.kernel.empty() && choice->name != step.kernel)
        return error(ErrorCode::kUnsupported, "@%s: the plan runs kernel %s for '%s'; this process has %s",
                     out.function.c_str(), step.kernel.c_str(), step.op.c_str(), choice->name.c_str());
      const kernels::KernelDef *def = choice->def;
      ops::AttrMap attrs = step.attrs;
      if (clampStep) {
        attrs.set(kernels::kFusedClampMin, clampStep->attrs.getFloatOr("min_val", 0));
        attrs.set(kernels::kFusedClampMax, clampStep->attrs.getFloatOr("max_val", 0));
      }
      if (std::optional<PackedLayout> layout = packedLayoutOf(step, inTypes)) {  // packed by packWeights
        Tensor weight = constantData(out, folded, step.inputs[1]);
        if (Tensor packed = weight.valid() ? packedWeight(weight, *layout) : Tensor(); packed.valid()) {
          inputIds[1] = b.addConstant(packed);
          attrs.set(packedAttr(*layout), int64_t(1));
        }
      }
      fn = [def, attrs = std::move(attrs), inTypes, outTypes](const StepContext &ctx) -> llvm::Error {
        llvm::SmallVector<const void *, 8> in;
        llvm::SmallVector<void *, 4> outs;
        for (unsigned i = 0; i < ctx.numInputs(); ++i) in.push_back(ctx.in(i));
        for (unsigned i = 0; i < ctx.numOutputs(); ++i) outs.push_back(ctx.out(i));
        return def->run(kernels::KernelArgs{in, inTypes, outs, outTypes, attrs, ctx.executor()});
      };
      name = "kernel:" + choice->name;
      kind = StepKind::kKernel;
    }
    auto added = b.addStep(name, kind, std::move(fn), inputIds, ids(clampStep ? clampStep->outputs : step.outputs));
    if (!added) return added.takeError();
    if (auto err = b.setScratch(*added, size_t(step.scratchBytes))) return err;
    // Provenance: the ops' distinct locations, in order.
    std::vector<std::string> locations = step.locations;
    if (clampStep) locations.insert(locations.end(), clampStep->locations.begin(), clampStep->locations.end());
    std::string provenance;
    for (size_t i = 0; i < locations.size(); ++i)
      if (i == 0 || locations[i] != locations[i - 1]) provenance += (provenance.empty() ? "" : ", ") + locations[i];
    bool jit = step.kind == lowering::PlanStep::kJit;
    std::string strategy = jit ? step.strategy
                               : "handwritten kernel" + (step.reason.empty() ? "" : " (" + step.reason + ")") +
                                     (clampStep ? " + the tosa.clamp after it, fused" : "");
    b.describeStep(*added, step.flops, jit ? llvm::join(step.ops, ", ") : step.op + (clampStep ? ", tosa.clamp" : ""),
                   std::move(provenance), std::move(strategy));
  }
  for (auto [value, output] : copies) {
    auto added = b.addStep("copy", StepKind::kCopy, copyStep(plan.values[value].type.byteSize()),
                           {buf[value]}, {output});
    if (!added) return added.takeError();
  }
  // Steps that write nothing (a cluster of cf.assert checks) still decide the
  // call's outcome: every later step that writes a result waits for them, so
  // a failed check reaches the results.
  const auto &steps = b.stepsSoFar();
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!steps[s].outputs.empty()) continue;
    for (size_t t = s + 1; t < steps.size(); ++t)
      if (!steps[t].producesOutputs.empty())
        if (auto err = b.addControlDependency(int(s), int(t))) return err;
  }
  auto exe = b.build();
  if (!exe) return exe.takeError();
  out.executable = std::move(*exe);
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<CompiledFunction>> Compiler::bind(const CompiledFunction &code,
                                                                 std::vector<Tensor> weights) {
  if (weights.size() != code.weights.size())
    return error(ErrorCode::kInvalidArgument, "@%s: the code takes %zu weights, got %zu", code.function.c_str(),
                 code.weights.size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].type() != code.weights[i].type())
      return error(ErrorCode::kInvalidArgument, "@%s: weight %zu: the code takes tensor<%s>, got tensor<%s>",
                   code.function.c_str(), i, code.weights[i].type().str().c_str(),
                   weights[i].type().str().c_str());
  auto out = std::make_shared<CompiledFunction>();
  out->function = code.function;
  out->inputTypes = code.inputTypes;
  out->resultTypes = code.resultTypes;
  out->weights = std::move(weights);
  out->stats = code.stats;
  out->plan = code.plan;
  out->launches_ = code.launches_;
  if (auto err = buildExecutable(*out)) return std::move(err);
  return out;
}

llvm::Expected<std::shared_ptr<CompiledFunction>>
Compiler::load(llvm::StringRef function, std::vector<TensorType> inputTypes, std::vector<TensorType> resultTypes,
               std::vector<Tensor> weights, lowering::ExecPlan plan,
               std::vector<llvm::SmallVector<char, 0>> objects) {
  auto t0 = Clock::now();
  auto out = std::make_shared<CompiledFunction>();
  out->function = function.str();
  out->inputTypes = std::move(inputTypes);
  out->resultTypes = std::move(resultTypes);
  out->weights = std::move(weights);
  out->plan = std::move(plan);
  out->objects = std::move(objects);
  for (const auto &o : out->objects) out->stats.objectBytes += o.size();
  out->stats.fromObject = true;
  if (auto err = link(*out)) return std::move(err);
  out->stats.totalMs = msSince(t0);
  return out;
}

}  // namespace kiln::jit
