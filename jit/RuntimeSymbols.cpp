#include "jit/RuntimeSymbols.h"

#include "runtime/Executable.h"
#include "runtime/Executor.h"

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
/// Buffers generated code allocates (memref.alloc -> malloc/free) come from
/// here: blocks of 64 KiB and more are kept for reuse by size instead of
/// going back to the system, so a steady stream of calls does not mmap,
/// fault in and zero its intermediate buffers on every call. Each block has
/// a 64-byte header in front (the returned pointer stays 64-byte aligned).
class JitAllocator {
public:
  void *allocate(size_t bytes, size_t align) {
    if (align > kHeader) return allocateAligned(bytes, align);
    size_t cls = bytes >= kLargeBlock ? roundUp(bytes, 4096) : 0;
    if (cls) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        void *raw = it->second.back();
        it->second.pop_back();
        cached_ -= cls;
        return static_cast<char *>(raw) + kHeader;
      }
    }
    size_t total = roundUp((cls ? cls : bytes) + kHeader, kHeader);
    void *raw = std::aligned_alloc(kHeader, total);
    if (!raw) return nullptr;
    auto *h = static_cast<Header *>(raw);
    h->magic = kMagic;
    h->sizeClass = cls;
    h->raw = raw;
    return static_cast<char *>(raw) + kHeader;
  }

  void release(void *p) {
    if (!p) return;
    auto *h = reinterpret_cast<Header *>(static_cast<char *>(p) - kHeader);
    if (h->magic != kMagic) {  // never ours: nothing generated frees foreign memory
      std::abort();
    }
    if (h->sizeClass) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + h->sizeClass <= kMaxCached) {
        free_[h->sizeClass].push_back(h->raw);
        cached_ += h->sizeClass;
        return;
      }
    }
    h->magic = 0;
    std::free(h->raw);
  }

private:
  struct Header {
    uint64_t magic;
    size_t sizeClass;  // 0: not cached
    void *raw;         // what std::aligned_alloc returned
  };
  static constexpr size_t kHeader = 64;
  static constexpr uint64_t kMagic = 0x6b696c6e6a697431ull;  // "kilnjit1"
  static constexpr size_t kLargeBlock = 64 * 1024;
  static constexpr size_t kMaxCached = size_t(1) << 30;
  static size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

  void *allocateAligned(size_t bytes, size_t align) {
    size_t total = roundUp(bytes + align + kHeader, align);
    void *raw = std::aligned_alloc(align, total);
    if (!raw) return nullptr;
    char *user = static_cast<char *>(raw) + roundUp(kHeader, align);
    auto *h = reinterpret_cast<Header *>(user - kHeader);
    h->magic = kMagic;
    h->sizeClass = 0;
    h->raw = raw;
    return user;
  }

  std::mutex mu_;
  std::map<size_t, std::vector<void *>> free_;
  size_t cached_ = 0;
};

JitAllocator &jitAllocator() {
  static JitAllocator *a = new JitAllocator();  // never destroyed: code may free at exit
  return *a;
}
extern "C" void *kiln_jit_malloc(size_t bytes) { return jitAllocator().allocate(bytes, 16); }
extern "C" void *kiln_jit_aligned_alloc(size_t align, size_t bytes) { return jitAllocator().allocate(bytes, align); }
extern "C" void kiln_jit_free(void *p) { jitAllocator().release(p); }

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
  return jitAllocator().allocate(size_t(std::max<int64_t>(bytes, 1)), 64);
}
extern "C" void kiln_scratch_release(void *p) {
  if (p && p == tlsScratch.given) {
    tlsScratch.given = nullptr;
    return;
  }
  jitAllocator().release(p);
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
      // Buffers of generated code, reused across calls (JitAllocator).
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
