#include "jit/PlacementTuner.h"

#include "jit/Compiler.h"
#include "jit/RuntimeSymbols.h"
#include "kernels/KernelRegistry.h"
#include "lowering/graph/GraphBuilder.h"
#include "lowering/graph/Partition.h"
#include "runtime/Clock.h"
#include "runtime/Error.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <cstring>
#include <limits>

namespace kiln::jit {
namespace {

/// A kernel must beat the op alone on JIT by this factor, and by this many
/// ms a call: a kernel step costs a dispatch of its own and breaks the
/// op's fusion with its neighbours (they become steps of their own), which
/// the op-alone timing does not see; EfficientNet-B0's squeeze-and-excite
/// convs (1x1 maps) won by 0.3 us and split 18 fused clusters.
constexpr double kKernelMargin = 0.9;
constexpr double kKernelMinSavingMs = 0.005;

/// Runs that add up to this many ms are enough for a best-of (2 of 25 ms
/// and more: a batch of 32 images ran each of ResNet-50's convs ~40 ms,
/// and measuring its placement took 15.7 s of a 19.3 s first call).
constexpr double kEnoughMs = 50;
/// The alternating rounds of kernel and op alone stop after this many ms
/// (at least one round; four where the op is fast).
constexpr double kAlternationMs = 300;

/// The best of at least 3 runs after a warm-up (2 when they already add up
/// to kEnoughMs), and of more while they add up to less than 2 ms (at most
/// 50).
double bestMs(llvm::function_ref<void()> run, bool warmUp = true) {
  if (warmUp) run();
  double best = std::numeric_limits<double>::infinity(), total = 0;
  for (int reps = 0; reps < (total >= kEnoughMs ? 2 : 3) || (total < 2.0 && reps < 50); ++reps) {
    auto t = Clock::now();
    run();
    double ms = msSince(t);
    best = std::min(best, ms);
    total += ms;
  }
  return best;
}

/// Samples of the machine's load taken around one op's timings: busy when
/// a thread of another process wants a core (kiln's executor takes them
/// all); the op's decision counts as timed on a busy machine when at least
/// two and more than half of its samples were (a short-lived daemon is one
/// sample). On a quiet 2-vCPU VM 0-3 of ~90 samples of MobileNetV2's
/// measurement saw another thread; beside one or two spinning processes,
/// every one.
struct LoadSamples {
  std::optional<bool> forced;  // tests
  int taken = 0, busy = 0;
  void sample() {
    ++taken;
    busy += forced ? *forced : PlacementTuner::otherRunnableThreads() > 0;
  }
  bool wasBusy() const { return busy >= 2 && 2 * busy > taken; }
};

/// Timings share the machine's cores: one at a time in the process.
std::mutex &timingMutex() {
  static std::mutex mu;
  return mu;
}

Tensor zeros(const TensorType &type) {
  Tensor t = Tensor::empty(type.dtype, type.shape);
  std::memset(t.rawData(), 0, t.byteSize());
  return t;
}

/// The host JIT steps of a compiled function, ready to run in turn on
/// zero-filled operands (weights and constants as compiled).
class StepRunner {
public:
  /// Step `step` of `fn`, or (step < 0) every JIT step of it.
  llvm::Error prepare(const CompiledFunction &fn, int step) {
    for (size_t s = 0; s < fn.plan.steps.size(); ++s) {
      if ((step >= 0 && int(s) != step) || fn.plan.steps[s].kind != lowering::PlanStep::kJit) continue;
      CompiledFunction::EntryFn entry = fn.directEntry(s);
      if (!entry) return error(ErrorCode::kInternal, "step %zu has no host entry", s);
      const lowering::PlanStep &ps = fn.plan.steps[s];
      // Of a whole function (an op alone): a step that reads only weights
      // and constants is not part of the op's time. Broader than what the
      // executable folds (Compiler::foldWeightSteps keeps a step that grows
      // its weights per call): in the model such work sits in the op's own
      // fused step.
      if (step < 0 && llvm::all_of(ps.inputs, [&](int id) { return fn.constantValue(id).valid(); })) continue;
      Call call{entry, {}};
      for (int id : ps.inputs) {
        Tensor constant = fn.constantValue(id);
        call.buffers.push_back(constant.valid() ? constant.rawData() : own(fn.plan.values[id].type));
      }
      for (int id : ps.outputs) call.buffers.push_back(own(fn.plan.values[id].type));
      calls_.push_back(std::move(call));
    }
    return llvm::Error::success();
  }
  void operator()() {
    for (Call &c : calls_) c.entry(c.buffers.data());
    takeFault();  // zeros may trip a guarded division; the time still counts
  }

private:
  void *own(const TensorType &type) {
    keep_.push_back(zeros(type));
    return keep_.back().rawData();
  }
  struct Call {
    CompiledFunction::EntryFn entry;
    std::vector<void *> buffers;
  };
  std::vector<Call> calls_;
  std::vector<Tensor> keep_;
};

/// The kernel of `alt` on zero-filled operands; a weight operand the plan
/// would store packed for it (Compiler::packedLayoutOf) in that form, as
/// the plan's step runs it (packing per call would count against it).
class KernelRunner {
public:
  KernelRunner(const kernels::KernelDef &def, const lowering::PlanStep::Alternative &alt, HostExecutor &executor)
      : def_(def), alt_(alt), attrs_(alt.attrs), executor_(executor) {
    std::optional<Compiler::PackedLayout> layout;
    if (alt.constantInputs.size() > 1 && alt.constantInputs[1]) layout = Compiler::packedLayoutOf(alt.op, alt.inputs);
    for (size_t i = 0; i < alt.inputs.size(); ++i) {
      Shape packed = i == 1 && layout ? Compiler::packedShape(alt.inputs[i], *layout) : Shape();
      in_.push_back(zeros(packed.empty() ? alt.inputs[i] : TensorType{alt.inputs[i].dtype, packed}));
      if (!packed.empty()) attrs_.set(Compiler::packedAttr(*layout), int64_t(1));
    }
    for (const TensorType &t : alt.results) out_.push_back(zeros(t));
    for (const Tensor &t : in_) inPtrs_.push_back(t.rawData());
    for (const Tensor &t : out_) outPtrs_.push_back(t.rawData());
  }
  void operator()() {
    if (llvm::Error err = def_.run(
            kernels::KernelArgs{inPtrs_, alt_.inputs, outPtrs_, alt_.results, attrs_, executor_}))
      failure_ = toStatus(std::move(err)).message;
  }
  /// Why a run failed ("" when none did).
  const std::string &failure() const { return failure_; }

private:
  const kernels::KernelDef &def_;
  const lowering::PlanStep::Alternative &alt_;
  ops::AttrMap attrs_;
  HostExecutor &executor_;
  std::vector<Tensor> in_, out_;
  std::vector<const void *> inPtrs_;
  std::vector<void *> outPtrs_;
  std::string failure_;
};

/// A tensor of `type` with varied small values: a constant that no fold
/// can treat as special (a splat or zeros would be).
Tensor varied(const TensorType &type) {
  Tensor t = Tensor::empty(type.dtype, type.shape);
  if (type.dtype == DType::f32) {
    float *p = t.data<float>();
    for (int64_t i = 0; i < t.numElements(); ++i) p[i] = float(i % 13 - 6) * 0.01f;
  } else {
    auto *p = static_cast<uint8_t *>(t.rawData());
    for (size_t i = 0; i < t.byteSize(); ++i) p[i] = uint8_t(i % 7);
  }
  return t;
}

/// The op of `alt` alone, compiled with JIT placement. Its inputs that the
/// model computes from weights only are constants here too: the op alone
/// gets the weight layouts and packing the model's code gets (as function
/// arguments, a filter would be read in the graph's layout on every call).
llvm::Expected<std::shared_ptr<CompiledFunction>> compileAlone(const lowering::PlanStep::Alternative &alt,
                                                               Compiler &compiler) {
  lowering::GraphBuilder g("main", "measure:" + alt.op);
  std::vector<lowering::GraphBuilder::Value> args;
  std::vector<TensorType> argTypes;
  for (size_t i = 0; i < alt.inputs.size(); ++i) {
    const TensorType &t = alt.inputs[i];
    if (i < alt.constantInputs.size() && alt.constantInputs[i]) {
      auto c = g.constant(varied(t));
      if (!c) return c.takeError();
      args.push_back(*c);
    } else {
      args.push_back(g.argument(t));
      argTypes.push_back(t);
    }
  }
  auto outs = g.op(alt.op, args, alt.attrs, alt.results);
  if (!outs) return outs.takeError();
  auto program = g.finish(*outs);
  if (!program) return program.takeError();
  ops::PlacementOptions jitOnly;
  jitOnly.modes["*"] = ops::OpMode::kJit;
  jitOnly.measure = false;
  return compiler.compile(**program, "main", argTypes, jitOnly);
}

}  // namespace

namespace {
/// "1.234 ms", or "5.1 us" under 0.1 ms.
std::string time(double ms) {
  return ms < 0.1 ? llvm::formatv("{0:F1} us", ms * 1e3).str() : llvm::formatv("{0:F3} ms", ms).str();
}
}  // namespace

std::string PlacementMeasurement::reason() const {
  return "measured: kernel " + time(kernelMs) + " < JIT " + time(aloneMs) + " alone";
}

std::string PlacementMeasurement::str() const {
  std::string s = "JIT " + time(stepMs) + " (" + step + ", with its fused ops)";
  if (aloneMs >= 0) s += ", " + time(aloneMs) + " alone";
  return s + " vs " + kernel + " " + time(kernelMs) + " -> " + (kernelWins ? "kernel" : "JIT") +
         (earlier ? " (measured by an earlier process)" : "") +
         (busy ? " (timed while the machine was busy: a later process times it again)" : "");
}

int PlacementTuner::otherRunnableThreads() {
  std::FILE *f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  char line[256];
  long running = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "procs_running %ld", &running) == 1) break;
  std::fclose(f);
  if (running < 0) return 0;
  // Less this process's own (the caller, workers still spinning).
  long own = 0;
  if (DIR *tasks = opendir("/proc/self/task")) {
    while (dirent *t = readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      char path[320], stat[512];
      std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", t->d_name);
      std::FILE *sf = std::fopen(path, "r");
      if (!sf) continue;
      size_t n = std::fread(stat, 1, sizeof stat - 1, sf);
      std::fclose(sf);
      stat[n] = 0;
      // "tid (comm) S ...": the state follows the last ')'.
      const char *close = std::strrchr(stat, ')');
      own += close && close[1] == ' ' && close[2] == 'R';
    }
    closedir(tasks);
  }
  return int(std::max<long>(0, running - own));
}

bool PlacementTuner::kernelBeatsAlone(double kernelMs, double aloneMs) {
  return kernelMs < kKernelMargin * aloneMs && aloneMs - kernelMs >= kKernelMinSavingMs;
}

namespace {
/// The kernel against the op alone on JIT, in alternating rounds (the
/// machine's speed drifts): the best of each into `m`. Holds the timing
/// lock. False when the kernel failed.
template <typename Alone> bool alternate(KernelRunner &runKernel, Alone &runAlone, PlacementMeasurement &m,
                                         HostExecutor &executor, bool warmKernel, LoadSamples &load) {
  std::lock_guard<std::mutex> timing(timingMutex());
  HostExecutor::ParallelScope scope(executor);
  load.sample();
  m.aloneMs = m.aloneMs >= 0 ? std::min(m.aloneMs, bestMs(runAlone)) : bestMs(runAlone);
  if (warmKernel) runKernel();  // its buffers are new: warm them before the rounds
  auto rounds = Clock::now();
  for (int round = 0; round < 4 && (round == 0 || msSince(rounds) < kAlternationMs); ++round) {
    load.sample();
    m.kernelMs = std::min(m.kernelMs, bestMs(runKernel, false));
    load.sample();
    m.aloneMs = std::min(m.aloneMs, bestMs(runAlone, false));
  }
  load.sample();
  return runKernel.failure().empty();
}
}  // namespace

int PlacementTuner::measure(const CompiledFunction &fn, Compiler &compiler, const std::set<std::string> &kernelsWin,
                            std::optional<bool> busy) {
  int timed = 0;
  auto decide = [&](const lowering::PlanStep::Alternative &alt, PlacementMeasurement m, const LoadSamples &load) {
    if (!kernelsWin.empty()) {  // injected for tests: these ops' kernels win, every other op's lose
      m.kernelWins = kernelsWin.count(alt.op) > 0;
      if (m.kernelWins && m.aloneMs < 0) m.aloneMs = m.stepMs;
    }
    m.busy = load.wasBusy();
    ++timed;
    std::lock_guard<std::mutex> lock(mu_);
    newDecisions_ += decided_.emplace(alt.signature, std::move(m)).second;
  };
  // Ops whose kernel beat their fused step: the op alone on JIT decides.
  struct Close {
    const lowering::PlanStep::Alternative *alt;
    const kernels::KernelDef *kernel;
    PlacementMeasurement m;
    LoadSamples load;
    std::shared_ptr<CompiledFunction> alone;
  };
  std::vector<Close> close;
  std::set<std::string> seen;  // signatures this call measures (one step each)

  // 1. Each step as compiled against its kernel.
  for (size_t s = 0; s < fn.plan.steps.size(); ++s) {
    const lowering::PlanStep &step = fn.plan.steps[s];
    if (step.kind != lowering::PlanStep::kJit || step.alternatives.size() != 1 || !fn.directEntry(s)) continue;
    // Control flow runs as long as its data says: on zeros, maybe forever.
    if (llvm::any_of(step.ops, [](const std::string &op) { return op == "tosa.while_loop" || op == "tosa.cond_if"; }))
      continue;
    const lowering::PlanStep::Alternative &alt = step.alternatives[0];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (decided_.count(alt.signature) || !seen.insert(alt.signature).second) continue;
    }
    LoadSamples load;
    load.forced = busy;
    PlacementMeasurement m;
    m.op = alt.op;
    m.kernel = alt.kernel;
    m.step = step.name + ", " + std::to_string(step.ops.size()) + (step.ops.size() == 1 ? " op" : " ops");
    bool measured = false;
    auto choice = kernels::registry().select(alt.op, alt.inputs, alt.attrs);
    StepRunner runStep;
    llvm::Error prepared = runStep.prepare(fn, int(s));
    // The kernel must agree with the plan on the op's types (it writes its
    // outputs by its own shape function).
    if (choice && choice->name == alt.kernel && choice->results == alt.results && !prepared) {
      KernelRunner runKernel(*choice->def, alt, *executor_);
      {
        std::lock_guard<std::mutex> timing(timingMutex());
        HostExecutor::ParallelScope scope(*executor_);
        load.sample();
        m.stepMs = bestMs(runStep);
        load.sample();
        // The first run decides when the kernel is clearly slower.
        runKernel();
        auto t = Clock::now();
        runKernel();
        double first = msSince(t);
        m.kernelMs = first >= 2 * m.stepMs ? first : std::min(first, bestMs(runKernel, false));
        measured = runKernel.failure().empty();  // a kernel that fails does not win
      }
      if (measured && m.kernelMs < m.stepMs) {
        if (alt.aloneInStep) {  // the step is the op alone: no compile of its own
          m.aloneMs = m.stepMs;
          measured = alternate(runKernel, runStep, m, *executor_, /*warmKernel=*/false, load);
          m.kernelWins = measured && kernelBeatsAlone(m.kernelMs, m.aloneMs);
        } else {
          close.push_back(Close{&alt, choice->def, std::move(m), load, nullptr});
          measured = false;  // decided below
        }
      }
    }
    if (!choice) llvm::consumeError(choice.takeError());
    if (prepared) llvm::consumeError(std::move(prepared));
    if (measured) decide(alt, std::move(m), load);  // else not measurable: stays on JIT, asked again next time
  }
  if (close.empty()) return timed;

  // 2. The close ops compiled alone, all at once (on the compiler's threads:
  // each is a compile of its own, ~0.1 s).
  compiler.runParallel(close.size(), [&](size_t i) {
    auto alone = compileAlone(*close[i].alt, compiler);
    if (alone) close[i].alone = std::move(*alone);
    else llvm::consumeError(alone.takeError());  // the op alone cannot be timed: JIT keeps it
  });

  // 3. Each kernel against its op alone, timed in alternation (the
  // machine's speed drifts).
  for (Close &c : close) {
    PlacementMeasurement &m = c.m;
    bool measured = true;  // an op alone that cannot run keeps JIT (m.aloneMs < 0)
    StepRunner runAlone;
    if (c.alone) {
      if (llvm::Error err = runAlone.prepare(*c.alone, -1)) {
        llvm::consumeError(std::move(err));
      } else {
        KernelRunner runKernel(*c.kernel, *c.alt, *executor_);
        measured = alternate(runKernel, runAlone, m, *executor_, /*warmKernel=*/true, c.load);
      }
    }
    m.kernelWins = measured && m.aloneMs >= 0 && kernelBeatsAlone(m.kernelMs, m.aloneMs);
    if (measured) decide(*c.alt, std::move(m), c.load);
  }
  return timed;
}

std::string PlacementTuner::toJson() const {
  nlohmann::json decisions = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto &[signature, m] : decided_)
      decisions.push_back({{"signature", signature},
                           {"op", m.op},
                           {"kernel", m.kernel},
                           {"step", m.step},
                           {"step_ms", m.stepMs},
                           {"kernel_ms", m.kernelMs},
                           {"alone_ms", m.aloneMs},
                           {"kernel_wins", m.kernelWins},
                           {"busy", m.busy}});
  }
  return nlohmann::json{{"version", 1}, {"decisions", std::move(decisions)}}.dump();
}

llvm::Expected<size_t> PlacementTuner::seed(llvm::StringRef json) {
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("decisions") || !doc["decisions"].is_array())
    return error(ErrorCode::kInvalidArgument, "placement decisions: not kiln's JSON form");
  if (!doc.contains("version") || doc["version"] != 1)
    return error(ErrorCode::kInvalidArgument, "placement decisions: not version 1");
  auto text = [](const nlohmann::json &e, const char *key, size_t max, std::string &out) {
    if (!e.contains(key) || !e[key].is_string()) return false;
    out = e[key].get<std::string>();
    return !out.empty() && out.size() <= max;
  };
  auto number = [](const nlohmann::json &e, const char *key, double &out) {
    if (!e.contains(key) || !e[key].is_number()) return false;
    out = e[key].get<double>();
    return std::isfinite(out) && out >= -1 && out < 1e7;
  };
  size_t added = 0, read = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const nlohmann::json &e : doc["decisions"]) {
    if (++read > kMaxSeeded) break;
    if (!e.is_object()) continue;
    std::string signature;
    PlacementMeasurement m;
    if (!text(e, "signature", 1 << 16, signature) || !text(e, "op", 256, m.op) ||
        !text(e, "kernel", 256, m.kernel) || !text(e, "step", 256, m.step) || !number(e, "step_ms", m.stepMs) ||
        !number(e, "kernel_ms", m.kernelMs) || !number(e, "alone_ms", m.aloneMs) || !e.contains("kernel_wins") ||
        !e["kernel_wins"].is_boolean())
      continue;
    m.kernelWins = e["kernel_wins"].get<bool>();
    // The rule measure() decides by: a record that says otherwise is not one.
    if (m.kernelWins != (m.aloneMs >= 0 && kernelBeatsAlone(m.kernelMs, m.aloneMs))) continue;
    // Timed on a busy machine: this process times the op again. (Records
    // without the field were written before it: taken.)
    if (e.contains("busy") && (!e["busy"].is_boolean() || e["busy"].get<bool>())) continue;
    m.earlier = true;
    auto [it, inserted] = decided_.emplace(std::move(signature), m);
    // A quiet decision of another process replaces one timed here on a busy machine.
    if (!inserted && it->second.busy) it->second = std::move(m), inserted = true;
    added += inserted;
  }
  return added;
}

size_t PlacementTuner::takeNewDecisions() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(newDecisions_, 0);
}

std::map<std::string, std::string> PlacementTuner::kernelWins() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto &[signature, m] : decided_)
    if (m.kernelWins) out.emplace(signature, m.reason());
  return out;
}

std::string PlacementTuner::report(const lowering::ExecPlan &plan) const {
  std::map<std::string, int> uses;  // by signature, in signature order
  for (const lowering::PlanStep &step : plan.steps) {
    if (step.kind == lowering::PlanStep::kJit) {
      for (const auto &alt : step.alternatives) ++uses[alt.signature];
    } else if (llvm::StringRef(step.reason).starts_with("measured")) {
      std::vector<TensorType> in, out;
      for (int v : step.inputs) in.push_back(plan.values[v].type);
      for (int v : step.outputs) out.push_back(plan.values[v].type);
      ++uses[lowering::opSignature(step.op, in, step.attrs, out)];
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string text;
  for (const auto &[signature, n] : uses) {
    auto it = decided_.find(signature);
    if (it == decided_.end()) continue;
    // The signature without its attributes (the types tell uses apart well enough to read).
    llvm::StringRef shown = llvm::StringRef(signature).split(" {").first;
    text += "\n  measured " + shown.str() + (n > 1 ? " (x" + std::to_string(n) + ")" : "") + ": " + it->second.str();
  }
  return text;
}

}  // namespace kiln::jit
