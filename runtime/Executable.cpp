#include "runtime/Executable.h"
#include "runtime/HostBlocks.h"
#include "runtime/Trace.h"
#include "runtime/Error.h"

#include "llvm/ADT/BitVector.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

namespace kiln {

void *StepContext::in(unsigned i) const { return buffers_[step_->inputs[i]]; }
void *StepContext::out(unsigned i) const { return buffers_[step_->outputs[i]]; }
unsigned StepContext::numInputs() const { return unsigned(step_->inputs.size()); }
unsigned StepContext::numOutputs() const { return unsigned(step_->outputs.size()); }
const std::string &StepContext::stepName() const { return step_->name; }
void *StepContext::scratch() const { return step_->scratch >= 0 ? buffers_[step_->scratch] : nullptr; }
size_t StepContext::scratchBytes() const { return scratch() ? exe_->buffers_[step_->scratch].bytes : 0; }
const Tensor *StepContext::constantInput(unsigned i) const {
  if (!exe_) return nullptr;
  const BufferDesc &d = exe_->buffers_[size_t(step_->inputs[i])];
  return d.kind == BufferKind::kConstant ? &d.constant : nullptr;
}

/// A deferred step: finishes when both the step function has returned and
/// the completion has been called (`count` from 2 to 0).
struct DeferredStep {
  std::shared_ptr<const Executable> exe;
  void *execution = nullptr;  // Executable::Execution
  int step = -1;
  Clock::time_point start;
  std::atomic<int> count{2};
  std::atomic<const Status *> error{nullptr};
  std::atomic<bool> completed{false};
};

StepCompletion StepContext::defer() const {
  if (!deferred_) {
    deferred_ = std::make_shared<DeferredStep>();
    deferred_->exe = exe_->shared_from_this();
    deferred_->execution = execution_;
    deferred_->step = stepId_;
  }
  StepCompletion c;
  c.state_ = deferred_;
  return c;
}

StepFn copyStep(size_t bytes) {
  return [bytes](const StepContext &ctx) {
    if (bytes) std::memcpy(ctx.out(0), ctx.in(0), bytes);
    return llvm::Error::success();
  };
}

// ---------------------------------------------------------------------------
// Per-execution state, pooled and reused.

struct Executable::Execution {
  std::shared_ptr<const Executable> exe;  // keeps the Executable alive while running
  std::unique_ptr<std::atomic<int32_t>[]> pending;
  std::unique_ptr<std::atomic<const Status *>[]> poison;
  std::vector<void *> buffers;
  void *arena = nullptr;
  size_t arenaBytes = 0;  // what `arena` holds (counted as tensor memory)
  Status arenaError;      // why the arena could not be allocated
  std::atomic<int32_t> remaining{0};
  std::vector<Tensor> inputs, outputTensors;
  std::vector<AsyncValueRef<Tensor>> outputs;
  std::shared_ptr<CancellationToken> cancel;
  HostExecutor *executor = nullptr;
  std::mutex errorMu;               // error path only
  std::deque<Status> errors;        // stable addresses for `poison`
  // ExecuteOptions::serialSteps: steps that are ready wait here, and the one
  // step running takes the next when it ends.
  bool serial = false;
  std::mutex readyMu;
  std::vector<int> ready;

  /// Serial executions: a step that became ready waits for its turn.
  void putReady(int step) {
    std::lock_guard<std::mutex> lock(readyMu);
    ready.push_back(step);
  }
  /// Serial executions: the next ready step, or -1.
  int takeReady() {
    std::lock_guard<std::mutex> lock(readyMu);
    if (ready.empty()) return -1;
    int s = ready.back();
    ready.pop_back();
    return s;
  }

  explicit Execution(const Executable &e)
      : pending(new std::atomic<int32_t>[e.steps_.size()]),
        poison(new std::atomic<const Status *>[e.steps_.size()]),
        buffers(e.buffers_.size(), nullptr) {
    if (e.stats_.arenaBytes) {
      auto a = allocateTensorMemory(e.stats_.arenaBytes, "one execution's intermediate buffers (its arena)");
      if (!a) {
        arenaError = toStatus(a.takeError());
        return;
      }
      arena = *a;
      arenaBytes = e.stats_.arenaBytes;
    }
    for (size_t b = 0; b < e.buffers_.size(); ++b) {
      const BufferDesc &d = e.buffers_[b];
      if (d.kind == BufferKind::kConstant) buffers[b] = d.constant.rawData();
      if (d.kind == BufferKind::kIntermediate) buffers[b] = static_cast<char *>(arena) + d.offset;
    }
  }
  ~Execution() { releaseTensorMemory(arena, arenaBytes); }

  const Status *recordError(Status status) {
    std::lock_guard<std::mutex> lock(errorMu);
    errors.push_back(std::move(status));
    return &errors.back();
  }
};

const CancellationToken *StepContext::cancellation() const {
  return execution_ ? static_cast<Executable::Execution *>(execution_)->cancel.get() : nullptr;
}

namespace {
/// Every live Executable, for releaseIdleExecutions. Never destroyed:
/// executables may outlive static destruction.
struct LiveExecutables {
  std::mutex mu;
  std::set<const Executable *> all;
};
LiveExecutables &liveExecutables() {
  static auto *live = new LiveExecutables();
  return *live;
}
}  // namespace

Executable::Executable() {
  static std::once_flag once;
  // Memory to give back when an allocation would fail: idle arenas, and
  // the blocks HostBlocks keeps for reuse.
  std::call_once(once, [] {
    setTensorMemoryReclaimer([]() -> uint64_t {
      uint64_t cached = hostBlocks().cachedBytes();
      hostBlocks().trim();
      return Executable::releaseIdleExecutions() + cached;
    });
  });
  std::lock_guard<std::mutex> lock(liveExecutables().mu);
  liveExecutables().all.insert(this);
}

Executable::~Executable() {
  {
    std::lock_guard<std::mutex> lock(liveExecutables().mu);
    liveExecutables().all.erase(this);
  }
  for (Execution *ex : pool_) delete ex;
}

uint64_t Executable::releaseIdleExecutions() {
  std::vector<Execution *> idle;
  {
    LiveExecutables &live = liveExecutables();
    std::lock_guard<std::mutex> lock(live.mu);
    for (const Executable *e : live.all) {
      std::lock_guard<std::mutex> pool(e->poolMu_);
      idle.insert(idle.end(), e->pool_.begin(), e->pool_.end());
      e->pool_.clear();
    }
  }
  // A pooled execution holds no reference to its executable: freeing it
  // needs no lock.
  uint64_t bytes = 0;
  for (Execution *ex : idle) {
    bytes += ex->arenaBytes;
    delete ex;
  }
  return bytes;
}

Executable::Execution *Executable::acquire(Status *why) const {
  {
    std::lock_guard<std::mutex> lock(poolMu_);
    if (!pool_.empty()) {
      Execution *ex = pool_.back();
      pool_.pop_back();
      return ex;
    }
  }
  auto *ex = new Execution(*this);
  if (ex->arenaError.message.empty()) return ex;
  *why = std::move(ex->arenaError);
  delete ex;
  return nullptr;
}

void Executable::release(Execution *ex) const {
  ex->inputs.clear();
  ex->outputTensors.clear();
  ex->outputs.clear();
  ex->cancel.reset();
  ex->errors.clear();
  ex->ready.clear();
  std::shared_ptr<const Executable> self = std::move(ex->exe);
  // After a burst of concurrent calls the pool keeps only as many
  // executions (arenas) as calls can usefully run at once; the rest return
  // their memory.
  static const size_t maxPooled = std::max(4u, std::thread::hardware_concurrency());
  bool pooled = false;
  {
    std::lock_guard<std::mutex> lock(poolMu_);
    if (pool_.size() < maxPooled) {
      pool_.push_back(ex);
      pooled = true;
    }
  }
  if (!pooled) delete ex;
  // `self` may drop the last reference here, after the pool mutex is
  // unlocked (it is a member).
}

size_t Executable::pooledExecutions() const {
  std::lock_guard<std::mutex> lock(poolMu_);
  return pool_.size();
}

std::vector<AsyncValueRef<Tensor>> Executable::execute(llvm::ArrayRef<Tensor> inputs,
                                                       HostExecutor &executor,
                                                       ExecuteOptions options) const {
  std::vector<AsyncValueRef<Tensor>> results;
  results.reserve(outputs_.size());
  auto failWith = [&](const Status &status) {
    results.clear();
    for (size_t i = 0; i < outputs_.size(); ++i) results.push_back(makeErrorValue<Tensor>(status));
    return results;
  };
  auto failAll = [&](const std::string &msg) { return failWith(Status{ErrorCode::kInvalidArgument, msg, {}}); };
  if (inputs.size() != inputs_.size())
    return failAll("executable takes " + std::to_string(inputs_.size()) + " inputs, got " +
                   std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].valid() || inputs[i].type() != buffers_[inputs_[i]].type)
      return failAll("input " + std::to_string(i) + ": expected tensor<" +
                     buffers_[inputs_[i]].type.str() + ">, got " +
                     (inputs[i].valid() ? "tensor<" + inputs[i].type().str() + ">" : "no tensor"));
  // Booleans are one byte holding 0 or 1: generated code and kernels would
  // read any other byte differently.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (auto err = checkBooleans(inputs[i], "input " + std::to_string(i)))
      return failAll(toStatus(std::move(err)).message);
  for (size_t i = 0; i < outputs_.size(); ++i) results.push_back(makeUnavailable<Tensor>());
  if (steps_.empty()) return results;

  // Memory first: outputs, then an execution (its arena); either failing
  // is this call's error (kResourceExhausted, naming the size), nothing else.
  if (!options.outputs.empty() && options.outputs.size() != outputs_.size())
    return failAll(std::to_string(options.outputs.size()) + " output tensors given for " +
                   std::to_string(outputs_.size()) + " outputs");
  auto overlaps = [](const Tensor &a, const Tensor &b) {
    auto *pa = static_cast<const char *>(a.rawData()), *pb = static_cast<const char *>(b.rawData());
    return a.byteSize() && b.byteSize() && pa < pb + b.byteSize() && pb < pa + a.byteSize();
  };
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    const Tensor &given = options.outputs[i];
    if (!given.valid()) continue;
    if (given.type() != buffers_[outputs_[i]].type)
      return failAll("output " + std::to_string(i) + ": the given tensor is tensor<" + given.type().str() +
                     ">, the result is tensor<" + buffers_[outputs_[i]].type.str() + ">");
    for (size_t j = 0; j < inputs.size(); ++j)
      if (overlaps(given, inputs[j]))
        return failAll("output " + std::to_string(i) + " overlaps input " + std::to_string(j) +
                       " (kiln reads inputs while it writes outputs: give separate memory)");
    for (size_t j = 0; j < i; ++j)
      if (options.outputs[j].valid() && overlaps(given, options.outputs[j]))
        return failAll("output " + std::to_string(i) + " overlaps output " + std::to_string(j));
  }
  std::vector<Tensor> outputTensors;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const BufferDesc &d = buffers_[outputs_[i]];
    if (i < options.outputs.size() && options.outputs[i].valid()) {
      outputTensors.push_back(options.outputs[i]);
      continue;
    }
    auto t = Tensor::allocate(d.type.dtype, d.type.shape, "output " + std::to_string(i));
    if (!t) return failWith(toStatus(t.takeError()));
    outputTensors.push_back(std::move(*t));
  }
  Status why;
  Execution *ex = acquire(&why);
  if (!ex) return failWith(std::move(why));
  ex->exe = shared_from_this();
  ex->executor = &executor;
  ex->cancel = std::move(options.cancel);
  ex->serial = options.serialSteps;
  ex->inputs.assign(inputs.begin(), inputs.end());
  for (size_t i = 0; i < inputs.size(); ++i) ex->buffers[inputs_[i]] = inputs[i].rawData();
  ex->outputTensors = std::move(outputTensors);
  for (size_t i = 0; i < outputs_.size(); ++i) ex->buffers[outputs_[i]] = ex->outputTensors[i].rawData();
  ex->outputs = results;
  for (size_t s = 0; s < steps_.size(); ++s) {
    ex->pending[s].store(steps_[s].numPredecessors, std::memory_order_relaxed);
    ex->poison[s].store(nullptr, std::memory_order_relaxed);
  }
  ex->remaining.store(int32_t(steps_.size()), std::memory_order_release);

  size_t first = 0;
  if (options.runFirstStepInline) first = 1;
  size_t started = roots_.size();
  if (ex->serial) {  // only the first root starts; the others wait their turn (taken from the back)
    ex->ready.assign(roots_.rbegin(), roots_.rend() - 1);
    started = 1;
  }
  for (size_t r = first; r < started; ++r) {
    int root = roots_[r];
    executor.spawn([this, ex, root] { runFrom(ex, root); });
  }
  if (first) runFrom(ex, roots_[0]);
  return results;
}

llvm::Expected<std::vector<Tensor>> Executable::run(llvm::ArrayRef<Tensor> inputs,
                                                    HostExecutor &executor) const {
  ExecuteOptions opts;
  opts.runFirstStepInline = true;
  auto futures = execute(inputs, executor, opts);
  std::vector<Tensor> out;
  for (auto &f : futures) {
    auto v = f.awaitValue();
    if (!v) return v.takeError();
    out.push_back(std::move(*v));
  }
  return out;
}

void Executable::runFrom(Execution *ex, int step) const {
  while (step >= 0) {
    const StepDesc &s = steps_[step];
    const Status *error = ex->poison[step].load(std::memory_order_acquire);
    if (!error && ex->cancel && ex->cancel->cancelled())
      error = ex->recordError(Status{ErrorCode::kCancelled,
                                     std::string("execution ") +
                                         (ex->cancel->deadlineExceeded() ? "stopped: deadline exceeded"
                                                                         : "cancelled") +
                                         " before step '" + s.name + "'",
                                     {}});
    int next = -1;
    if (error) {
      finishStep(ex, step, error, next);
      step = next;
      continue;
    }
    StepContext ctx(s, ex->buffers.data(), *ex->executor);
    ctx.exe_ = this;
    ctx.execution_ = ex;
    ctx.stepId_ = step;
    bool traced = ex->executor->tracing();
    Clock::time_point start = traced ? Clock::now() : Clock::time_point();
    llvm::Error err = s.fn(ctx);
    if (ctx.deferred_) {
      // The step left work running: whichever of this return and its
      // completion comes last ends it.
      DeferredStep &d = *ctx.deferred_;
      d.start = start;
      if (err) {
        const Status *expected = nullptr;
        d.error.compare_exchange_strong(expected, stepError(ex, s.name, std::move(err)));
      }
      if (d.count.fetch_sub(1, std::memory_order_acq_rel) != 1) return;  // the completion continues
      endStep(ex, step, d.error.load(std::memory_order_acquire), next, start);
      step = next;
      continue;
    }
    if (err) error = stepError(ex, s.name, std::move(err));
    endStep(ex, step, error, next, start);
    step = next;
  }
}

void Executable::endStep(Execution *ex, int step, const Status *error, int &next, Clock::time_point start) const {
  if (start != Clock::time_point())
    if (std::shared_ptr<TraceRecorder> trace = ex->executor->trace()) {
      static const char *const kinds[] = {"jit", "kernel", "copy", "other"};
      const StepDesc &s = steps_[step];
      TraceEvent e;
      e.name = s.name;
      e.category = kinds[int(s.kind)];
      e.executable = shared_from_this();
      e.step = step;
      trace->add(std::move(e), start, Clock::now());
    }
  finishStep(ex, step, error, next);
}

void StepCompletion::operator()(llvm::Error result) const {
  if (!state_ || state_->completed.exchange(true, std::memory_order_acq_rel)) {
    llvm::consumeError(std::move(result));  // called twice: a bug in the step; ignore the second
    return;
  }
  DeferredStep &d = *state_;
  auto *ex = static_cast<Executable::Execution *>(d.execution);
  const Executable &exe = *d.exe;
  if (result) {
    const Status *expected = nullptr;
    d.error.compare_exchange_strong(expected,
                                   Executable::stepError(ex, exe.steps_[d.step].name, std::move(result)));
  }
  if (d.count.fetch_sub(1, std::memory_order_acq_rel) != 1) return;  // the step function has not returned yet
  // Keep the executable alive past finishStep, which may release `ex`.
  std::shared_ptr<const Executable> keep = d.exe;
  HostExecutor *executor = ex->executor;
  int next = -1;
  exe.endStep(ex, d.step, d.error.load(std::memory_order_acquire), next, d.start);
  if (next >= 0) executor->spawn([keep, ex, next] { keep->runFrom(ex, next); });
}

const Status *Executable::stepError(Execution *ex, const std::string &name, llvm::Error err) {
  Status status = toStatus(std::move(err));
  status.message = "step '" + name + "' failed: " + status.message;
  return ex->recordError(std::move(status));
}

void Executable::finishStep(Execution *ex, int step, const Status *error, int &next) const {
  const StepDesc &s = steps_[step];
  for (int o : s.producesOutputs) {
    if (error) ex->outputs[o]->setError(*error);
    else ex->outputs[o]->emplace(ex->outputTensors[o]);
  }
  for (int succ : s.successors) {
    if (error) {
      const Status *expected = nullptr;
      ex->poison[succ].compare_exchange_strong(expected, error, std::memory_order_acq_rel);
    }
    if (ex->pending[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (next < 0) next = succ;
      else if (ex->serial) ex->putReady(succ);
      else ex->executor->spawn([this, ex, succ] { runFrom(ex, succ); });
    }
  }
  if (next < 0 && ex->serial) next = ex->takeReady();
  if (ex->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) release(ex);
}

// ---------------------------------------------------------------------------
// Building and planning.

namespace {
int addBuffer(std::vector<BufferDesc> &buffers, BufferKind kind, TensorType type) {
  BufferDesc d;
  d.kind = kind;
  d.bytes = type.byteSize();
  d.type = std::move(type);
  buffers.push_back(std::move(d));
  return int(buffers.size() - 1);
}
}  // namespace

int ExecutableBuilder::addInput(TensorType type) {
  int id = addBuffer(exe_->buffers_, BufferKind::kInput, std::move(type));
  exe_->buffers_[id].index = int(exe_->inputs_.size());
  exe_->inputs_.push_back(id);
  return id;
}
int ExecutableBuilder::addConstant(Tensor value) {
  int id = addBuffer(exe_->buffers_, BufferKind::kConstant, value.type());
  exe_->buffers_[id].constant = std::move(value);
  return id;
}
int ExecutableBuilder::addIntermediate(TensorType type) {
  return addBuffer(exe_->buffers_, BufferKind::kIntermediate, std::move(type));
}
int ExecutableBuilder::addOutput(TensorType type) {
  int id = addBuffer(exe_->buffers_, BufferKind::kOutput, std::move(type));
  exe_->buffers_[id].index = int(exe_->outputs_.size());
  exe_->outputs_.push_back(id);
  return id;
}

llvm::Error ExecutableBuilder::setScratch(int step, size_t bytes) {
  if (step < 0 || step >= int(exe_->steps_.size()))
    return error(ErrorCode::kInternal, "scratch for step %d of %zu", step, exe_->steps_.size());
  StepDesc &s = exe_->steps_[step];
  if (s.scratch >= 0) return error(ErrorCode::kInternal, "step '%s' has scratch memory already", s.name.c_str());
  if (!bytes) return llvm::Error::success();
  int id = addIntermediate(TensorType{DType::i8, Shape{int64_t(bytes)}});
  exe_->buffers_[id].producer = step;
  s.scratch = id;
  return llvm::Error::success();
}

void ExecutableBuilder::describeStep(int step, double flops, std::string ops, std::string provenance,
                                     std::string strategy) {
  if (step < 0 || step >= int(exe_->steps_.size())) return;
  exe_->steps_[step].flops = flops;
  exe_->steps_[step].ops = std::move(ops);
  exe_->steps_[step].provenance = std::move(provenance);
  exe_->steps_[step].strategy = std::move(strategy);
}

llvm::Expected<int> ExecutableBuilder::addStep(std::string name, StepKind kind, StepFn fn,
                                               llvm::ArrayRef<int> inputs,
                                               llvm::ArrayRef<int> outputs) {
  auto &buffers = exe_->buffers_;
  auto &steps = exe_->steps_;
  int id = int(steps.size());
  auto bad = [&](int b) { return b < 0 || b >= int(buffers.size()); };
  llvm::SmallVector<int, 4> preds;
  for (int b : inputs) {
    if (bad(b)) return error(ErrorCode::kInternal, "step '%s': no buffer %d", name.c_str(), b);
    BufferDesc &d = buffers[b];
    if ((d.kind == BufferKind::kIntermediate || d.kind == BufferKind::kOutput) && d.producer < 0)
      return error(ErrorCode::kInternal, "step '%s' reads buffer %d before any step writes it (add steps in topological order)",
          name.c_str(), b);
    if (d.producer >= 0 && !llvm::is_contained(preds, d.producer)) preds.push_back(d.producer);
  }
  for (int b : outputs) {
    if (bad(b)) return error(ErrorCode::kInternal, "step '%s': no buffer %d", name.c_str(), b);
    BufferDesc &d = buffers[b];
    if (d.kind == BufferKind::kInput || d.kind == BufferKind::kConstant)
      return error(ErrorCode::kInternal, "step '%s' writes buffer %d, an input or constant",
                                     name.c_str(), b);
    if (d.producer >= 0)
      return error(ErrorCode::kInternal, "step '%s' writes buffer %d, already written by step '%s'",
                                     name.c_str(), b, steps[d.producer].name.c_str());
  }
  StepDesc s;
  s.name = std::move(name);
  s.kind = kind;
  s.fn = std::move(fn);
  s.inputs.assign(inputs.begin(), inputs.end());
  s.outputs.assign(outputs.begin(), outputs.end());
  s.numPredecessors = int32_t(preds.size());
  for (int b : inputs)
    if (!llvm::is_contained(buffers[b].consumers, id)) buffers[b].consumers.push_back(id);
  for (int b : outputs) {
    buffers[b].producer = id;
    if (buffers[b].kind == BufferKind::kOutput) s.producesOutputs.push_back(buffers[b].index);
  }
  for (int p : preds) steps[p].successors.push_back(id);
  steps.push_back(std::move(s));
  return id;
}

const std::vector<StepDesc> &ExecutableBuilder::stepsSoFar() const { return exe_->steps_; }

llvm::Error ExecutableBuilder::addControlDependency(int before, int after) {
  auto &steps = exe_->steps_;
  if (before < 0 || after >= int(steps.size()) || before >= after)
    return error(ErrorCode::kInternal, "control dependency %d -> %d: need existing steps, before < after",
                                   before, after);
  if (!llvm::is_contained(steps[before].successors, after)) {
    steps[before].successors.push_back(after);
    ++steps[after].numPredecessors;
  }
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<Executable>> ExecutableBuilder::build() {
  Executable &e = *exe_;
  for (int o : e.outputs_)
    if (e.buffers_[o].producer < 0)
      return error(ErrorCode::kInternal, "output %d (tensor<%s>) is not written by any step",
                                     e.buffers_[o].index, e.buffers_[o].type.str().c_str());
  for (size_t s = 0; s < e.steps_.size(); ++s)
    if (e.steps_[s].numPredecessors == 0) e.roots_.push_back(int(s));

  // reach[s]: steps reachable from s (strict descendants). Steps are in
  // topological order, so one backward sweep computes it. It costs n^2 bits
  // and the placement below n^2 pairs: above kExactPlanSteps steps every
  // intermediate gets memory of its own instead (linear; more memory, still
  // bounded by checkAllocatable).
  constexpr size_t kExactPlanSteps = 4096;
  size_t n = e.steps_.size();
  bool share = n <= kExactPlanSteps;
  std::vector<llvm::BitVector> reach(share ? n : 0, llvm::BitVector(share ? n : 0));
  for (size_t s = share ? n : 0; s-- > 0;)
    for (int succ : e.steps_[s].successors) {
      reach[s].set(succ);
      reach[s] |= reach[succ];
    }
  // `a` is dead before `b` is written: every reader of `a` (or its writer,
  // when nothing reads it) strictly happens-before b's writer.
  auto deadBefore = [&](const BufferDesc &a, const BufferDesc &b) {
    if (!share) return false;
    if (a.consumers.empty()) return a.producer != b.producer && reach[a.producer].test(b.producer);
    for (int c : a.consumers)
      if (c == b.producer || !reach[c].test(b.producer)) return false;
    return true;
  };

  std::vector<int> order;
  for (size_t b = 0; b < e.buffers_.size(); ++b)
    if (e.buffers_[b].kind == BufferKind::kIntermediate) {
      if (e.buffers_[b].producer < 0) continue;  // never written: needs no memory
      order.push_back(int(b));
      e.stats_.intermediateBytes += e.buffers_[b].bytes;
    }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return e.buffers_[a].bytes > e.buffers_[b].bytes; });
  std::vector<int> placed;
  auto align = [](size_t x) { return (x + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; };
  int64_t end = 0;  // !share: buffers back to back
  for (int b : order) {
    BufferDesc &d = e.buffers_[b];
    if (!share) {
      d.offset = end;
      end += int64_t(align(std::max<size_t>(d.bytes, 1)));
      e.stats_.arenaBytes = size_t(end);
      continue;
    }
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of conflicting placed buffers
    for (int p : placed) {
      const BufferDesc &q = e.buffers_[p];
      if (!deadBefore(d, q) && !deadBefore(q, d)) busy.push_back({q.offset, q.offset + int64_t(align(q.bytes))});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0, size = int64_t(align(std::max<size_t>(d.bytes, 1)));
    for (auto [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    d.offset = offset;
    e.stats_.arenaBytes = std::max(e.stats_.arenaBytes, size_t(offset + size));
    placed.push_back(b);
  }
  uint64_t perExecution = e.stats_.arenaBytes;
  for (int o : e.outputs_) perExecution += e.buffers_[o].bytes;
  if (auto err = checkAllocatable(perExecution, "one execution's intermediate and output buffers"))
    return std::move(err);
  // Largest live set in step order: a buffer is live from its writer to its
  // last reader (a sweep over begin/end events).
  std::vector<int64_t> delta(n + 1, 0);
  for (int b : order) {
    const BufferDesc &d = e.buffers_[b];
    int last = d.consumers.empty() ? d.producer : *std::max_element(d.consumers.begin(), d.consumers.end());
    delta[size_t(d.producer)] += int64_t(d.bytes);
    delta[size_t(last) + 1] -= int64_t(d.bytes);
  }
  int64_t live = 0;
  for (size_t s = 0; s < n; ++s) {
    live += delta[s];
    e.stats_.largestLiveBytes = std::max(e.stats_.largestLiveBytes, size_t(live));
  }
  return std::move(exe_);
}

}  // namespace kiln
