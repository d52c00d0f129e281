#include "jit/RuntimeSymbols.h"

#include "runtime/Executor.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdlib>
#include <cstring>

namespace kiln::jit {
namespace {
thread_local int64_t tlsFault = 0;  // first fault's site + 1
extern "C" void kiln_report_fault(int64_t site) {
  if (!tlsFault) tlsFault = site + 1;
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
      {"kiln_parallel_for", reinterpret_cast<void *>(&kiln_parallel_for)},
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
