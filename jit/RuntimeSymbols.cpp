#include "jit/RuntimeSymbols.h"

#include "runtime/Executor.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdlib>
#include <cstring>

namespace kiln::jit {

const std::vector<std::pair<const char *, void *>> &runtimeSymbols() {
  static const std::vector<std::pair<const char *, void *>> symbols = {
      // Parallel loops of generated code run on the executor's TBB arena.
      {"kiln_parallel_for", reinterpret_cast<void *>(&kiln_parallel_for)},
      // Strided memref copies that lowering leaves as calls (MLIR's C runner utils).
      {"memrefCopy", reinterpret_cast<void *>(&memrefCopy)},
      {"malloc", reinterpret_cast<void *>(&std::malloc)},
      {"free", reinterpret_cast<void *>(&std::free)},
      {"aligned_alloc", reinterpret_cast<void *>(&std::aligned_alloc)},
  };
  return symbols;
}

}  // namespace kiln::jit
