// HostExecutor: kiln's host thread pools.
//
//  - compute work runs on a oneTBB task_arena with `threads` workers
//    (graph steps, generated kernels' parallel loops via parallelFor);
//  - blocking work (file I/O, compiling, waiting on a device) runs on a
//    small separate pool and never occupies a compute worker.
//
// spawn() from a worker of this arena pushes onto that worker's local deque
// (LIFO, stolen by idle workers); from any other thread it enqueues into the
// arena. Thread-safety: every method is thread-safe. The destructor waits
// for all spawned work.
#pragma once

#include "llvm/ADT/FunctionExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class TraceRecorder;

class HostExecutor {
public:
  /// `threads` compute workers (0 = the machine's cores).
  explicit HostExecutor(int threads = 0, int blockingThreads = 2);
  ~HostExecutor();
  HostExecutor(const HostExecutor &) = delete;
  HostExecutor &operator=(const HostExecutor &) = delete;

  int numThreads() const { return threads_; }

  /// Runs `task` on a compute worker.
  void spawn(llvm::unique_function<void()> task);
  /// Runs `task` on the blocking pool.
  void spawnBlocking(llvm::unique_function<void()> task);
  /// Calls body(begin, end) over [0, n) in chunks of at least `grain`, on
  /// this arena's workers and the calling thread (on a worker, TBB's
  /// parallel_for; from any other thread, the caller claims chunks beside
  /// up to threads-1 helper tasks); returns when all are done.
  void parallelFor(int64_t n, int64_t grain, llvm::function_ref<void(int64_t, int64_t)> body);
  /// Waits until every task spawned so far (compute and blocking) has finished.
  void waitIdle();

  /// Steps that executables run on this executor are recorded in `trace`
  /// until another is set (null: recording off, the default).
  void setTrace(std::shared_ptr<TraceRecorder> trace);
  /// Whether a recorder is set (one relaxed load).
  bool tracing() const { return tracing_.load(std::memory_order_relaxed); }
  /// The recorder, or null. While none is set this is one relaxed load;
  /// a step that got a recorder keeps it alive while it records.
  std::shared_ptr<TraceRecorder> trace() const {
    if (!tracing_.load(std::memory_order_relaxed)) return nullptr;
    return std::atomic_load_explicit(&trace_, std::memory_order_acquire);
  }

  /// True on a compute worker of this executor.
  bool onWorker() const;
  /// The executor whose worker this thread is (nullptr elsewhere).
  static HostExecutor *current();
  /// A process-wide executor with the machine's cores, for code running
  /// outside any runtime (e.g. generated code called directly).
  static HostExecutor &processDefault();

  /// While alive, kiln_parallel_for on this thread runs on `ex`'s arena
  /// (generated code called inline, off the executor's workers).
  class ParallelScope {
  public:
    explicit ParallelScope(HostExecutor &ex);
    ~ParallelScope();
    ParallelScope(const ParallelScope &) = delete;
    ParallelScope &operator=(const ParallelScope &) = delete;

  private:
    HostExecutor *saved_;
  };
  /// The executor kiln_parallel_for uses on this thread: the innermost
  /// ParallelScope's, else this worker's, else processDefault().
  static HostExecutor &forParallelLoops();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_;
  std::atomic<bool> tracing_{false};
  std::shared_ptr<TraceRecorder> trace_;  // accessed with std::atomic_load/store
};

}  // namespace kiln

/// Exported to JIT-compiled code: calls fn(ctx, begin, end) over [0, n) in
/// chunks of at least `grain`, on HostExecutor::forParallelLoops()'s arena,
/// and returns when all chunks are done.
extern "C" void kiln_parallel_for(int64_t n, int64_t grain,
                                  void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);
