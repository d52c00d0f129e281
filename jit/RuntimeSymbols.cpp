#include "jit/RuntimeSymbols.h"

#include "runtime/Executor.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::jit {
namespace {
thread_local int64_t tlsFault = 0;  // first fault's site + 1
extern "C" void kiln_report_fault(int64_t site) {
  if (!tlsFault) tlsFault = site + 1;
}
/// kiln_parallel_for for generated code: a fault reported in a chunk on
/// another thread reaches the launching thread, which reports the step's
/// faults.
extern "C" void kiln_parallel_for_forwarding_faults(int64_t n, int64_t grain,
                                                   void (*fn)(void *, int64_t, int64_t), void *ctx) {
  struct Frame {
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    std::atomic<int64_t> fault{0};
  } frame{fn, ctx};
  kiln_parallel_for(
      n, grain,
      [](void *p, int64_t begin, int64_t end) {
        auto *f = static_cast<Frame *>(p);
        int64_t saved = tlsFault;  // the launching thread may run chunks too
        tlsFault = 0;
        f->fn(f->ctx, begin, end);
        if (int64_t mine = tlsFault) {
          int64_t none = 0;
          f->fault.compare_exchange_strong(none, mine);
        }
        tlsFault = saved;
      },
      &frame);
  if (int64_t f = frame.fault.load(); f && !tlsFault) tlsFault = f;
}
}  // namespace

int64_t takeFault() {
  int64_t f = tlsFault;
  tlsFault = 0;
  return f;
}

const std::vector<std::pair<const char *, void *>> &runtimeSymbols() {
  static const std::vector<std::pair<const char *, void *>> symbols = {
      // Parallel loops of generated code run on the executor's TBB arena.
      {"kiln_parallel_for", reinterpret_cast<void *>(&kiln_parallel_for_forwarding_faults)},
      // Strided memref copies that lowering leaves as calls (MLIR's C runner utils).
      {"memrefCopy", reinterpret_cast<void *>(&memrefCopy)},
      {"malloc", reinterpret_cast<void *>(&std::malloc)},
      {"free", reinterpret_cast<void *>(&std::free)},
      {"aligned_alloc", reinterpret_cast<void *>(&std::aligned_alloc)},
      // Faults of guarded divisions and index accesses (kiln-guard-traps).
      {"kiln_report_fault", reinterpret_cast<void *>(&kiln_report_fault)},
  };
  return symbols;
}

}  // namespace kiln::jit
