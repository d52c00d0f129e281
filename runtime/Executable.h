// Executable: a DAG of steps (a call into JIT-compiled code, a handwritten
// kernel, a copy) over buffers, plus a buffer plan; executed on a HostExecutor.
//
// Scheduling: each step has an atomic count of predecessors not yet done.
// When a step finishes, each successor whose count reaches zero becomes
// ready: the first runs next on the same thread (locality), the others are
// spawned as tasks. There is no global lock; per-execution state (counters,
// buffer table, arena) comes from a pool, so steady-state steps allocate
// nothing on the heap.
//
// Buffers: inputs (the caller's tensors), constants (weights), outputs (new
// tensors returned to the caller) and intermediates. Intermediates live in
// one arena per execution; their offsets are planned so that two buffers
// share memory only when every reader of one happens-before (in the DAG) the
// writer of the other, so peak memory approaches the largest live set and
// concurrent steps never alias.
//
// Errors: a step that fails (or is cancelled) poisons its transitive
// dependents, which do not run; outputs they produce become errors carrying
// the original message and the failing step's name. Other outputs complete.
//
// Thread-safety: an Executable is immutable after build(); any number of
// executions may run at once, from any threads.
#pragma once

#include "runtime/AsyncValue.h"
#include "runtime/Executor.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/SmallVector.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

enum class BufferKind : uint8_t { kInput, kConstant, kIntermediate, kOutput };
enum class StepKind : uint8_t { kJit, kKernel, kCopy, kOther };

struct StepDesc;
struct BufferDesc;
class CancellationToken;
struct DeferredStep;
class Executable;

/// Finishes a step that called StepContext::defer(): call it exactly once,
/// from any thread, with the result of the work the step left running (a
/// device's stream, say). It never blocks; successors that become ready are
/// spawned on the executor.
class StepCompletion {
public:
  StepCompletion() = default;
  void operator()(llvm::Error result) const;
  explicit operator bool() const { return bool(state_); }

private:
  friend class StepContext;
  friend class Executable;
  std::shared_ptr<DeferredStep> state_;
};

/// What a running step sees: its buffers, in the order it declared them.
class StepContext {
public:
  void *in(unsigned i) const;
  void *out(unsigned i) const;
  unsigned numInputs() const;
  unsigned numOutputs() const;
  const std::string &stepName() const;
  HostExecutor &executor() const { return *executor_; }
  /// The value of input `i` when it is a constant (a weight bound to the
  /// executable: the same bytes on every run), else null. Device steps keep
  /// their copies of constants.
  const Tensor *constantInput(unsigned i) const;
  /// The execution's cancellation token, or null: long-running steps check
  /// it (generated loops do, through jit's kiln_cancel_requested).
  const CancellationToken *cancellation() const;
  /// The step's scratch memory (ExecutableBuilder::setScratch) for this run,
  /// or null; scratchBytes() long, aligned to kBufferAlignment.
  void *scratch() const;
  size_t scratchBytes() const;

  /// For steps whose work finishes after the step function returns (work
  /// enqueued on a device): the step is done, and its successors may run,
  /// only once the step function has returned AND the returned completion
  /// has been called. Its error is the first of the two. Once defer() is
  /// called, the completion must be called exactly once, whatever the step
  /// function returns. At most one call per step run.
  StepCompletion defer() const;

private:
  friend class Executable;
  StepContext(const StepDesc &step, void *const *buffers, HostExecutor &ex)
      : step_(&step), buffers_(buffers), executor_(&ex) {}
  const StepDesc *step_;
  void *const *buffers_;
  HostExecutor *executor_;
  // Set by Executable::runFrom so that defer() can hand out a completion.
  const Executable *exe_ = nullptr;
  void *execution_ = nullptr;  // Executable::Execution
  int stepId_ = -1;
  mutable std::shared_ptr<DeferredStep> deferred_;
};

using StepFn = std::function<llvm::Error(const StepContext &)>;

struct StepDesc {
  std::string name;
  StepKind kind = StepKind::kOther;
  StepFn fn;
  llvm::SmallVector<int, 4> inputs, outputs;  // buffer ids
  int scratch = -1;                           // buffer id of its scratch memory (-1: none)
  llvm::SmallVector<int, 4> successors;       // step ids
  int32_t numPredecessors = 0;
  llvm::SmallVector<int, 2> producesOutputs;  // output indices this step writes
  /// Arithmetic the step does per run (from its ops' shapes; 0 = unknown),
  /// for profiles: achieved GFLOP/s against the machine's peak.
  double flops = 0;
  /// What the step computes ("tosa.conv2d, tosa.clamp"), where it comes
  /// from (its ops' MLIR locations) and how (the code's strategy, or why a
  /// handwritten kernel runs it), for profiles.
  std::string ops, provenance, strategy;
};

struct BufferDesc {
  BufferKind kind;
  TensorType type;
  size_t bytes = 0;
  int index = -1;            // position among inputs / outputs
  Tensor constant;           // kConstant
  int64_t offset = -1;       // kIntermediate: offset in the arena
  int producer = -1;         // step id
  llvm::SmallVector<int, 2> consumers;
};

/// Cancels executions that were given this token, now (cancel()) or at a
/// deadline; thread-safe. Executions check it before each step, and
/// generated loops whose trip count is not known (tosa.while_loop) at each
/// iteration, so a call that never ends can still be stopped.
class CancellationToken {
public:
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  /// Cancels once `deadline` has passed (steady clock).
  void setDeadline(std::chrono::steady_clock::time_point deadline) {
    deadlineNs_.store(std::max<int64_t>(1, deadline.time_since_epoch() / std::chrono::nanoseconds(1)),
                      std::memory_order_release);
  }
  /// Cancels `timeout` from now.
  void setTimeout(std::chrono::nanoseconds timeout) { setDeadline(std::chrono::steady_clock::now() + timeout); }
  bool cancelled() const {
    if (cancelled_.load(std::memory_order_acquire)) return true;
    return deadlineExceeded();
  }
  bool deadlineExceeded() const {
    int64_t d = deadlineNs_.load(std::memory_order_acquire);
    return d && std::chrono::steady_clock::now().time_since_epoch() / std::chrono::nanoseconds(1) >= d;
  }
  /// "cancelled" or "deadline exceeded", for errors.
  const char *reason() const {
    return cancelled_.load(std::memory_order_acquire) ? "cancelled" : "deadline exceeded";
  }

private:
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> deadlineNs_{0};  // 0 = none
};

struct ExecuteOptions {
  std::shared_ptr<CancellationToken> cancel;
  /// Run the first ready step on the calling thread (lower latency for
  /// synchronous calls); the rest still go to the executor.
  bool runFirstStepInline = false;
  /// Run one step at a time, in an order the dependences allow; each step's
  /// parallel loops still use every worker. For profiling: a step's time is
  /// then its own, not shared with independent steps running beside it.
  bool serialSteps = false;
  /// Where the results go (as ONNX Runtime's IoBinding): empty, or one
  /// entry per output: a tensor of that output's type whose memory the
  /// execution writes the result into (the caller's memory, through
  /// Tensor::wrap), or an invalid Tensor for a new one. A given tensor must
  /// not overlap an input or another output (an error, not a race).
  std::vector<Tensor> outputs;
};

struct BufferPlanStats {
  size_t arenaBytes = 0;         // one execution's intermediate memory
  size_t intermediateBytes = 0;  // sum of all intermediates (no reuse)
  size_t largestLiveBytes = 0;   // lower bound: most intermediate bytes live at once in step order
};

class Executable : public std::enable_shared_from_this<Executable> {
public:
  ~Executable();
  size_t numSteps() const { return steps_.size(); }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }
  const std::vector<StepDesc> &steps() const { return steps_; }
  const std::vector<BufferDesc> &buffers() const { return buffers_; }
  const BufferPlanStats &planStats() const { return stats_; }
  const TensorType &inputType(size_t i) const { return buffers_[inputs_[i]].type; }
  const TensorType &outputType(size_t i) const { return buffers_[outputs_[i]].type; }

  /// Starts an execution; returns one future per output at once. Input
  /// type errors come back as error values.
  std::vector<AsyncValueRef<Tensor>> execute(llvm::ArrayRef<Tensor> inputs, HostExecutor &executor,
                                             ExecuteOptions options = {}) const;
  /// execute() and await every output.
  llvm::Expected<std::vector<Tensor>> run(llvm::ArrayRef<Tensor> inputs,
                                          HostExecutor &executor) const;
  /// Executions currently pooled (for tests: the pool is reused, not grown).
  size_t pooledExecutions() const;
  /// Frees the pooled executions of every Executable in the process (their
  /// arenas: a call of each shape a module ever ran keeps one); returns the
  /// arena bytes released. The tensor memory reclaimer
  /// (setTensorMemoryReclaimer): a stream of ever-new shapes under a memory
  /// limit failed once the idle arenas of earlier shapes filled it.
  static uint64_t releaseIdleExecutions();

private:
  friend class ExecutableBuilder;
  friend class StepContext;
  friend class StepCompletion;
  struct Execution;
  Executable();
  /// A pooled or new execution; null (and `why`) when its arena cannot be allocated.
  Execution *acquire(Status *why) const;
  void release(Execution *ex) const;
  void runFrom(Execution *ex, int step) const;
  void finishStep(Execution *ex, int step, const Status *error, int &next) const;
  static const Status *stepError(Execution *ex, const std::string &name, llvm::Error err);
  /// The end of step `step` of `ex` (trace event, outputs, successors).
  void endStep(Execution *ex, int step, const Status *error, int &next,
               std::chrono::steady_clock::time_point start) const;

  std::vector<StepDesc> steps_;
  std::vector<BufferDesc> buffers_;
  std::vector<int> inputs_, outputs_, roots_;
  BufferPlanStats stats_;
  mutable std::mutex poolMu_;
  mutable std::vector<Execution *> pool_;
};

class ExecutableBuilder {
public:
  int addInput(TensorType type);
  int addConstant(Tensor value);
  int addIntermediate(TensorType type);
  int addOutput(TensorType type);
  /// Adds a step reading `inputs` and writing `outputs` (buffer ids). Inputs
  /// must be graph inputs, constants or produced by earlier steps, so steps
  /// are added in a topological order. Returns the step id.
  llvm::Expected<int> addStep(std::string name, StepKind kind, StepFn fn,
                              llvm::ArrayRef<int> inputs, llvm::ArrayRef<int> outputs);
  /// Gives step `step` `bytes` of scratch memory for each run
  /// (StepContext::scratch): planned in the arena like an intermediate that
  /// the step writes and nothing reads, so it shares memory with buffers
  /// dead by then (warm in cache) and never with one live beside it.
  llvm::Error setScratch(int step, size_t bytes);
  /// Describes step `step` for profiles (see StepDesc::flops, ops,
  /// provenance, strategy).
  void describeStep(int step, double flops, std::string ops, std::string provenance, std::string strategy = "");
  /// The steps added so far.
  const std::vector<StepDesc> &stepsSoFar() const;
  /// `after` waits for `before` (both existing steps, before < after).
  llvm::Error addControlDependency(int before, int after);
  /// Checks that every output is produced and plans intermediate buffers.
  llvm::Expected<std::shared_ptr<Executable>> build();

private:
  std::shared_ptr<Executable> exe_{new Executable()};
};

/// A step function copying `bytes` from its input 0 to its output 0.
StepFn copyStep(size_t bytes);

}  // namespace kiln
