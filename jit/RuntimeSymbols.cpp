#include "jit/RuntimeSymbols.h"

#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/HostBlocks.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>
#include <cstdlib>
#include <cstring>

namespace kiln::jit {
namespace {
thread_local int64_t tlsFault = 0;  // first fault's site + 1
thread_local const CancellationToken *tlsCancel = nullptr;  // the running step's call

/// Generated loops of unknown length ask this at each iteration
/// (lowering/guards/CancelPoints.cpp): non-zero = the call was cancelled or its
/// deadline passed.
extern "C" int64_t kiln_cancel_requested() { return tlsCancel && tlsCancel->cancelled() ? 1 : 0; }
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
/// Buffers generated code allocates (memref.alloc -> malloc/free) come
/// from the host's block cache (runtime/HostBlocks.h): blocks of 64 KiB and
/// more are kept for reuse by size, so a steady stream of calls does not
/// mmap, fault in and zero its intermediate buffers on every call.
extern "C" void *kiln_jit_malloc(size_t bytes) { return hostBlocks().allocate(bytes, 16); }
extern "C" void *kiln_jit_aligned_alloc(size_t align, size_t bytes) { return hostBlocks().allocate(bytes, align); }
extern "C" void kiln_jit_free(void *p) { hostBlocks().release(p); }

/// The scratch buffer of the step running on this thread (ScratchScope):
/// `memory` until a kernel takes it, then `given` until it gives it back.
thread_local struct {
  void *memory = nullptr;
  size_t bytes = 0;
  void *given = nullptr;
} tlsScratch;

/// A kernel's temporaries (lowering/cpu/ScratchBuffers.cpp): its step's planned
/// buffer when it is there and large enough, else a block of its own.
extern "C" void *kiln_scratch_acquire(int64_t bytes) {
  if (tlsScratch.memory && bytes >= 0 && size_t(bytes) <= tlsScratch.bytes) {
    tlsScratch.given = tlsScratch.memory;
    tlsScratch.memory = nullptr;
    return tlsScratch.given;
  }
  return hostBlocks().allocate(size_t(std::max<int64_t>(bytes, 1)), 64);
}
extern "C" void kiln_scratch_release(void *p) {
  if (p && p == tlsScratch.given) {
    tlsScratch.given = nullptr;
    return;
  }
  hostBlocks().release(p);
}
}  // namespace

ScratchScope::ScratchScope(void *memory, size_t bytes)
    : savedMemory_(tlsScratch.memory), savedGiven_(tlsScratch.given), savedBytes_(tlsScratch.bytes) {
  tlsScratch.memory = memory;
  tlsScratch.bytes = memory ? bytes : 0;
  tlsScratch.given = nullptr;
}
ScratchScope::~ScratchScope() {
  tlsScratch.memory = savedMemory_;
  tlsScratch.bytes = savedBytes_;
  tlsScratch.given = savedGiven_;
}

int64_t takeFault() {
  int64_t f = tlsFault;
  tlsFault = 0;
  return f;
}

CancelScope::CancelScope(const CancellationToken *token) : saved_(tlsCancel) { tlsCancel = token; }
CancelScope::~CancelScope() { tlsCancel = saved_; }

const std::vector<std::pair<const char *, void *>> &runtimeSymbols() {
  static const std::vector<std::pair<const char *, void *>> symbols = {
      // Parallel loops of generated code run on the executor's TBB arena.
      {"kiln_parallel_for", reinterpret_cast<void *>(&kiln_parallel_for_forwarding_faults)},
      // Strided memref copies that lowering leaves as calls (MLIR's C runner utils).
      {"memrefCopy", reinterpret_cast<void *>(&memrefCopy)},
      // Buffers of generated code, reused across calls (runtime/HostBlocks.h).
      {"malloc", reinterpret_cast<void *>(&kiln_jit_malloc)},
      {"free", reinterpret_cast<void *>(&kiln_jit_free)},
      {"aligned_alloc", reinterpret_cast<void *>(&kiln_jit_aligned_alloc)},
      // A kernel's temporaries in its step's planned scratch (kiln-scratch-buffers).
      {"kiln_scratch_acquire", reinterpret_cast<void *>(&kiln_scratch_acquire)},
      {"kiln_scratch_release", reinterpret_cast<void *>(&kiln_scratch_release)},
      // Faults of guarded divisions and index accesses (kiln-guard-traps).
      {"kiln_report_fault", reinterpret_cast<void *>(&kiln_report_fault)},
      // Cancellation and deadlines in loops of unknown length (kiln-cancel-points).
      {"kiln_cancel_requested", reinterpret_cast<void *>(&kiln_cancel_requested)},
  };
  return symbols;
}

}  // namespace kiln::jit
