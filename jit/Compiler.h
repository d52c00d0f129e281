// Compiler: one function at one shape signature -> a CompiledFunction.
// Specialized graph -> placement (JIT clusters and handwritten kernels) ->
// each cluster compiled by the target -> objects loaded -> an Executable of
// steps. It does not cache: the compile service (CompileService.h) decides
// when to compile, load or bind.
//
// A cluster whose compilation fails falls back to kernels for its ops (with
// a warning and a counter) and the call still succeeds when kernels exist.
// With a PlacementTuner (setPlacementTuner) and placement.measuring(), `auto`
// ops that a kernel also takes are timed both ways after the first compile,
// and the function is partitioned and compiled again when a kernel won
// (jit/PlacementTuner.h).
//
// Thread-safety: Compiler methods may run concurrently (MLIR work is
// serialized per Program). A CompiledFunction is immutable once built; its
// Executable may run any number of times at once.
#pragma once

#include "jit/Target.h"
#include "lowering/graph/Partition.h"
#include "lowering/graph/Plan.h"
#include "lowering/graph/Program.h"
#include "runtime/Executable.h"
#include "runtime/Tensor.h"

#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kiln::jit {

struct CompileStats {
  /// specialize, partition, then each lowering stage summed over the
  /// kernels compiled (they run `compileThreads` at a time), jit-load.
  lowering::StageTimes stages;
  int kernelsCompiled = 0;  // JIT clusters compiled (over every round: a fallback, a partition after measuring)
  int kernelsShared = 0;    // JIT clusters that reused an identical one's code
  int compileThreads = 1;
  double totalMs = 0;
  size_t objectBytes = 0;
  bool fromObject = false;      // linked from existing objects (cache), not compiled
  int placementsMeasured = 0;   // JIT steps whose alternative kernel was timed in this compile
  int kernelsChosen = 0;        // of those, the ops a kernel ran faster (placed on it)
  int jitFallbacks = 0;         // clusters that failed to compile and went to kernels
  std::vector<std::string> warnings;
};

/// Fault injection for tests (never part of public options or cache keys):
/// compiling a cluster that contains one of these ops fails, exercising the
/// fallback to kernels.
struct FaultInjection {
  std::set<std::string> failClustersWith;
  /// Placement by measurement decides for the kernel of these ops, and for
  /// generated code of every other op it times, whatever the timings say (to
  /// test the second partition deterministically: a matmul of 1 x 16 x 10
  /// timed 0.1 us both ways).
  std::set<std::string> kernelsWinMeasurement;
  /// Placement by measurement takes the machine as busy (true) or quiet
  /// (false) instead of asking it (PlacementTuner::otherRunnableThreads).
  std::optional<bool> machineBusy;
  /// Called on the compiling thread before each compile of JIT code by the
  /// compile service (not before kernel plans, not for disk loads): a test
  /// holds the compiler in it to see what calls do meanwhile.
  std::function<void()> beforeCompile;
};

class PlacementTuner;

class CompiledFunction {
public:
  using EntryFn = void (*)(void **buffers);
  std::string function;
  std::vector<TensorType> inputTypes;   // static
  std::vector<TensorType> resultTypes;  // static
  std::vector<Tensor> weights;          // the plan's weight values, by index
  CompileStats stats;
  lowering::ExecPlan plan;
  std::vector<llvm::SmallVector<char, 0>> objects;  // code of the JIT steps, by plan step object index
  std::shared_ptr<Executable> executable;

  /// The host entry point of plan step `step` (null for kernel steps and
  /// device code).
  EntryFn directEntry(size_t step) const { return step < launches_.size() ? launches_[step].direct : nullptr; }
  /// The value of plan value `id` when it is a weight or a constant (the same
  /// bytes on every call), else an invalid tensor.
  Tensor constantValue(int id) const;

  /// "N ops: A JIT in K kernels, B handwritten (...)"
  const std::string &placementSummary() const { return plan.summary; }

private:
  friend class Compiler;
  std::vector<Launch> launches_;  // per plan step (empty fn for kernels)
};

/// The kernel registry as the partitioner asks about it (a kernel takes an
/// op when its shape function gives the op's result types).
const lowering::KernelOracle &registryOracle();

/// Runs a task on a pool where it may block (the executor's blocking pool).
using SpawnFn = std::function<void(llvm::unique_function<void()>)>;

class Compiler {
public:
  /// With `spawn`, the JIT clusters of one function compile in parallel on
  /// up to `threads` threads (the calling one included); without, in turn.
  explicit Compiler(std::shared_ptr<Target> target, SpawnFn spawn = nullptr, int threads = 1)
      : target_(std::move(target)), spawn_(std::move(spawn)), threads_(spawn_ ? std::max(1, threads) : 1) {}
  Target &target() const { return *target_; }
  /// Where each kernel's compile is recorded (its thread, start and end),
  /// while a profiler records; null: nowhere.
  void setTrace(std::function<std::shared_ptr<TraceRecorder>()> trace) { trace_ = std::move(trace); }
  /// Placement by measurement times ops on `executor` (null: off). The
  /// same executor runs, once per executable, the host JIT steps that read
  /// only weights and constants (layout read-backs whose consumer was
  /// placed on a kernel): their results become constants of the
  /// executable instead of steps of every call (null: they stay steps).
  void setPlacementTuner(std::shared_ptr<HostExecutor> executor);
  /// The tuner setPlacementTuner made (null without one).
  PlacementTuner *placementTuner() const { return tuner_.get(); }

  llvm::Expected<std::shared_ptr<CompiledFunction>>
  compile(lowering::Program &program, llvm::StringRef function, llvm::ArrayRef<TensorType> inputTypes,
          const ops::PlacementOptions &placement, const FaultInjection &faults = {},
          const CancellationToken *cancel = nullptr);

  /// The same code bound to other weights (a module with the same graph and
  /// other weight values): shares the loaded code, gets its own executable.
  llvm::Expected<std::shared_ptr<CompiledFunction>> bind(const CompiledFunction &code,
                                                         std::vector<Tensor> weights);

  /// A CompiledFunction from a plan and objects compiled earlier (a cache
  /// entry): no MLIR and no code generation, only loading.
  llvm::Expected<std::shared_ptr<CompiledFunction>>
  load(llvm::StringRef function, std::vector<TensorType> inputTypes, std::vector<TensorType> resultTypes,
       std::vector<Tensor> weights, lowering::ExecPlan plan, std::vector<llvm::SmallVector<char, 0>> objects);

  /// Drops the packed weights that no executable reads any more, or whose
  /// weight's module is gone (at each executable built, and when the
  /// compile service's memory evicts code).
  void trimPackedWeights() const;

  /// Runs job(0..n-1) on the threads a compile's kernels use (this one and
  /// up to threads - 1 spawned tasks); returns when every job has finished.
  void runParallel(size_t n, llvm::function_ref<void(size_t)> job) const { runShared(n, threads_ - 1, job); }

  /// Weights stored in the order a kernel reads them (kernels/MatmulPanels.h):
  /// tosa.matmul's B ([N, C, W] f32) in panels, tosa.conv2d's filter
  /// ([F, KH, KW, C] f32, F a multiple of 16) as [KH*KW*C, F], or
  /// kiln.grouped_conv2d's filter in vectors of several groups
  /// (kernels::groupedConvPackedShape); packed once per weight
  /// (packedWeight) and shared by every plan that reads it (kernel plans of
  /// each new sequence length).
  enum class PackedLayout { kMatmulPanels, kConvFilter, kGroupedFilter };
  /// The packed layout kernel step `step` (inputs of `inTypes`) reads its
  /// weight operand in, if any.
  static std::optional<PackedLayout> packedLayoutOf(const lowering::PlanStep &step,
                                                    const std::vector<TensorType> &inTypes) {
    return packedLayoutOf(step.op, inTypes);
  }
  static std::optional<PackedLayout> packedLayoutOf(llvm::StringRef op, llvm::ArrayRef<TensorType> inTypes);
  /// The packed tensor's shape of a weight of `type` in `layout` (the
  /// same for all but the grouped filter); empty when it does not fit.
  static Shape packedShape(const TensorType &type, PackedLayout layout);
  /// The attribute that tells the kernel its weight operand is packed.
  static const char *packedAttr(PackedLayout layout);

private:
  /// Runs job(0..n-1) on this thread and on up to `helpers` spawned tasks;
  /// returns when every job has finished.
  void runShared(size_t n, int helpers, llvm::function_ref<void(size_t)> job) const;
  /// Loads the objects, finds each JIT step's entry, builds the executable.
  llvm::Error link(CompiledFunction &out);
  llvm::Error buildExecutable(CompiledFunction &out) const;
  /// The values that host JIT steps reading only weights and constants
  /// compute, computed now (value id -> tensor), and those steps.
  void foldWeightSteps(const CompiledFunction &out, std::map<int, Tensor> &values, std::set<size_t> &steps) const;

  std::shared_ptr<Target> target_;
  SpawnFn spawn_;
  int threads_;
  std::function<std::shared_ptr<TraceRecorder>()> trace_;
  std::shared_ptr<PlacementTuner> tuner_;
  std::shared_ptr<HostExecutor> executor_;
  /// `weight` in `layout`, packed once and shared; null when memory runs
  /// out (the kernel then packs per call) or the weight does not fit the
  /// layout.
  Tensor packedWeight(const Tensor &weight, PackedLayout layout) const;
  /// Packs every weight `out`'s kernel steps read packed, on the compile
  /// threads, ahead of buildExecutable's steps (which then find them).
  void packWeights(const CompiledFunction &out, const std::map<int, Tensor> &folded,
                   const std::set<size_t> &foldedSteps) const;
  /// Weights packed on the spawn pool while the compile that started it
  /// specializes and partitions (startPrepacking); finish() packs what is
  /// left on the calling thread too and waits. The packed tensors are held
  /// until it is destroyed (trimPackedWeights would drop them before a plan
  /// reads them); destroying it unfinished skips what has not started.
  class Prepacking {
  public:
    Prepacking() = default;
    Prepacking(Prepacking &&) = default;
    Prepacking &operator=(Prepacking &&) = default;
    ~Prepacking();
    void finish();

  private:
    friend class Compiler;
    struct State;
    std::shared_ptr<State> state_;
  };
  /// A kernel plan's packed weights are known from the loaded graph before
  /// its plan is: the large constant filters of the ops `placement` puts on
  /// kernels (conv2d, grouped conv2d, matmul with a constant B), packed the
  /// way packedWeight would for them (nothing without a spawn pool).
  Prepacking startPrepacking(lowering::Program &program, llvm::StringRef function,
                             const ops::PlacementOptions &placement) const;
  struct PackedWeight {
    llvm::IntrusiveRefCntPtr<Buffer> source;  // held: its address stays this weight's
    Tensor packed;
  };
  mutable std::mutex packedMu_;
  mutable std::map<std::tuple<const Buffer *, size_t, int>, PackedWeight> packed_;  // (buffer, byte offset, layout)
};

}  // namespace kiln::jit
