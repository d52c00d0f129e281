// PlacementTuner: placement by measurement. Where an `auto` op that a kernel
// is built around (conv, matmul, pooling) can run both as generated code and
// as a handwritten kernel, the compiler first compiles it on JIT (the plan
// step lists the kernel as its alternative, lowering/graph/Partition.h); the tuner
// then times, on the runtime's executor and with zero-filled operands:
//
//   1. the step as compiled (the op with the ops fused into its tiles) and
//      the kernel alone. A kernel slower than the whole step loses at once.
//   2. otherwise the op compiled alone on JIT (its inputs that come from
//      weights as constants, so it gets the model's weight layouts), all
//      such ops compiled at once on the compiler's threads: the kernel wins
//      when it beats that by 10% and by 5 us a call (the margins cover noise
//      and the fusion a kernel gives up: its neighbours then run as steps of
//      their own, each dispatched).
//
// The compiler then partitions again with the winners on their kernels.
// Decisions are kept by op signature for the life of the tuner (one compiler,
// so one target): each use of an op is measured once per process, by graphs
// and eager calls alike. The plan's summary records each decision with its
// figures, so it reaches the compile cache and `--explain` without
// measuring again. Decisions also outlive the process (toJson / seed: the
// compile service keeps them in the disk cache beside the code, for the
// target): a later process, or another model with the same op shapes,
// places those ops without timing them.
//
// Thread-safety: all methods are thread-safe; timings run one at a time.
#pragma once

#include "lowering/graph/Plan.h"
#include "runtime/Executor.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace kiln::jit {

class Compiler;
class CompiledFunction;

struct PlacementMeasurement {
  std::string op, kernel, step;  // the step the op was compiled into first
  double stepMs = 0;             // that step, with its fused ops
  double kernelMs = 0;           // the kernel alone
  double aloneMs = -1;           // the op alone on JIT (< 0: not needed)
  bool kernelWins = false;
  bool earlier = false;          // seeded: measured by an earlier process
  /// Timed while another process's threads wanted the machine's cores
  /// (otherRunnableThreads; this process's own calls running meanwhile, as
  /// under the tiered policy, are not seen): a parallel kernel that
  /// waits on a descheduled thread looks slower than it is. Such a decision
  /// holds for this process; it is written to disk marked so, and a later
  /// process times the op again instead of taking it.
  bool busy = false;
  /// "measured: kernel 0.91 ms < JIT 1.20 ms (op alone)": a kernel step's
  /// reason.
  std::string reason() const;
  /// "JIT 0.42 ms (cluster3, 3 ops) vs conv2d_f32_im2col_eigen 1.31 ms -> JIT"
  std::string str() const;
};

class PlacementTuner {
public:
  /// Timings run on `executor` (the runtime's: its arena runs the kernels'
  /// and generated code's parallel loops).
  explicit PlacementTuner(std::shared_ptr<HostExecutor> executor) : executor_(std::move(executor)) {}

  /// Times the alternatives of `fn`'s host JIT steps that were not measured
  /// before (a step with more than one is not measured: its time cannot be
  /// told apart; nor one with control flow, whose time depends on its
  /// data). `compiler` compiles an op alone where that is needed. Returns
  /// how many steps it timed. (Tests: a kernel of an op in `kernelsWin` wins
  /// whatever the timings.)
  /// `busy` (tests) says whether the machine is busy instead of asking it
  /// (otherRunnableThreads).
  int measure(const CompiledFunction &fn, Compiler &compiler, const std::set<std::string> &kernelsWin = {},
              std::optional<bool> busy = std::nullopt);
  /// Threads of other processes that are runnable now (Linux:
  /// /proc/stat's procs_running less this process's running threads); 0
  /// where that cannot be read.
  static int otherRunnableThreads();
  /// Whether a kernel that ran `kernelMs` wins over the op alone on JIT
  /// (`aloneMs`): by 10% and by 5 us.
  static bool kernelBeatsAlone(double kernelMs, double aloneMs);
  /// Signature -> reason, for the uses of ops a kernel won.
  std::map<std::string, std::string> kernelWins() const;
  /// One line per distinct use of an op measured in `plan` (alternatives of
  /// JIT steps and measured kernel steps): "measured tosa.conv2d x3
  /// (1x56x56x64xf32, ...): JIT 0.42 ms (...) vs ... -> JIT".
  std::string report(const lowering::ExecPlan &plan) const;

  /// Every decision, as JSON (what seed reads back).
  std::string toJson() const;
  /// Adds the decisions of `json` (toJson's form) for signatures not
  /// decided yet (or decided here on a busy machine), marked `earlier`;
  /// returns how many. Decisions timed on a busy machine are not taken
  /// (the op is timed again). Entries that are
  /// malformed, out of range or inconsistent (a kernel that wins without
  /// beating the op alone by the margins) are skipped; text that is not
  /// such JSON at all is an error. At most kMaxSeeded entries are read.
  llvm::Expected<size_t> seed(llvm::StringRef json);
  static constexpr size_t kMaxSeeded = 20000;
  /// Decisions made in this process since the last call (those worth
  /// writing out), and resets the count.
  size_t takeNewDecisions();

private:
  std::shared_ptr<HostExecutor> executor_;
  mutable std::mutex mu_;
  std::map<std::string, PlacementMeasurement> decided_;  // by signature
  size_t newDecisions_ = 0;
};

}  // namespace kiln::jit
