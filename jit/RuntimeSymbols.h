// Symbols kiln exports to JIT-compiled code, by name. Generated code calls
// them like C functions (kiln_parallel_for, memrefCopy, malloc/free).
#pragma once

#include <cstddef>
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
/// (kiln_report_fault, see lowering/guards/GuardTraps.cpp): the site id + 1, or 0
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

/// While alive, the scratch buffer generated code on this thread acquires
/// (kiln_scratch_acquire, see lowering/cpu/ScratchBuffers.cpp) is `memory`, of
/// `bytes` (the host launcher sets the step's planned one around each
/// step). The first acquire of at most `bytes` takes it; any other acquire
/// (no scope, a larger request, a second one) gets a block of its own,
/// returned at its release. Scopes nest (a step run on this thread while
/// it waits inside another step's parallel loop).
class ScratchScope {
public:
  ScratchScope(void *memory, size_t bytes);
  ~ScratchScope();
  ScratchScope(const ScratchScope &) = delete;
  ScratchScope &operator=(const ScratchScope &) = delete;

private:
  void *savedMemory_, *savedGiven_;
  size_t savedBytes_;
};
}  // namespace kiln::jit
