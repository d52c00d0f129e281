// Symbols kiln exports to JIT-compiled code, by name. Generated code calls
// them like C functions (kiln_parallel_for, memrefCopy, malloc/free).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {
class CancellationToken;
}

namespace kiln::jit {
/// (name, address) pairs; stable for the life of the process.
const std::vector<std::pair<const char *, void *>> &runtimeSymbols();

/// The fault generated code reported on this thread since the last call
/// (kiln_report_fault, see lowering/GuardTraps.cpp): the site id + 1, or 0
/// for none; clears it. Faults in parallel tiles on other threads are
/// forwarded to the thread that launched them, so the launcher sees its own
/// step's faults.
int64_t takeFault();

/// While alive, generated code on this thread sees `token` through
/// kiln_cancel_requested (the host launcher sets it around each step).
class CancelScope {
public:
  explicit CancelScope(const CancellationToken *token);
  ~CancelScope();
  CancelScope(const CancelScope &) = delete;
  CancelScope &operator=(const CancelScope &) = delete;

private:
  const CancellationToken *saved_;
};
}  // namespace kiln::jit
