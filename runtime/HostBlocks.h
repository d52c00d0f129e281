// Host memory blocks that are kept for reuse by size: the buffers generated
// code allocates (memref.alloc -> malloc/free, jit/RuntimeSymbols.cpp) and
// the blocks of Tensor buffers (a call's outputs). Blocks of 64 KiB and more
// go back to a free list of their size class (whole pages) instead of to the
// system, so a steady stream of calls does not map, fault in and zero the
// same memory on every call (glibc trims or unmaps large blocks on free: a
// model with three 384 KiB outputs took 260 page faults a call, 0.5 ms for
// 1.2 MB). At most kMaxCached bytes wait in the lists (a quarter of kiln's
// tensor memory limit where one is set: cached blocks are memory the limit
// does not count); past that a released block goes back to the system, and
// an allocation the system refuses first returns every cached block and
// tries again (so does a tensor allocation past the limit or what the
// system gives: the tensor memory reclaimer, runtime/Executable.cpp).
//
// Each block has a 64-byte header in front of the returned pointer (which
// stays 64-byte aligned, or `align` where larger).
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <cstddef>

namespace kiln {

class HostBlocks {
public:
  /// `bytes` (at least 1) aligned to `align` (a power of two); null when
  /// the system has no memory for it.
  void *allocate(size_t bytes, size_t align = 64);
  /// A block from allocate() (null: nothing). Aborts on a pointer that is
  /// not from here: freeing foreign memory would corrupt the heap.
  void release(void *p);
  /// Returns every cached block to the system.
  void trim();
  /// Bytes waiting in the free lists.
  size_t cachedBytes() const;

  static constexpr size_t kLargeBlock = 64 * 1024;
  static constexpr size_t kMaxCached = size_t(1) << 30;
};

/// The process's one instance (never destroyed: generated code may free at
/// exit).
HostBlocks &hostBlocks();

}  // namespace kiln
