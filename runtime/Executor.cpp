#include "runtime/Executor.h"
#include "runtime/Trace.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
#include <chrono>

namespace kiln {
namespace {
thread_local HostExecutor *tlsCurrent = nullptr;
thread_local HostExecutor *tlsParallel = nullptr;  // innermost ParallelScope

/// Marks the running thread as a worker of `ex` for the task's duration.
struct WorkerScope {
  HostExecutor *saved;
  explicit WorkerScope(HostExecutor *ex) : saved(tlsCurrent) { tlsCurrent = ex; }
  ~WorkerScope() { tlsCurrent = saved; }
};
}  // namespace

struct HostExecutor::Impl {
  oneapi::tbb::task_arena arena;
  oneapi::tbb::task_group group;  // owns every spawned compute task
  std::atomic<int64_t> pending{0};

  std::mutex mu;
  std::condition_variable cv, idle;
  std::deque<llvm::unique_function<void()>> blockingQueue;
  std::vector<std::thread> blockingThreads;
  int64_t blockingActive = 0;
  bool stopping = false;

  // No slot reserved for external threads: all `threads` are TBB workers.
  explicit Impl(int threads) : arena(threads, /*reserved_for_masters=*/0) {}
};

namespace {

#if defined(__SANITIZE_THREAD__)
inline void tsanRelease(const void *addr) { __tsan_release(const_cast<void *>(addr)); }
inline void tsanAcquire(const void *addr) { __tsan_acquire(const_cast<void *>(addr)); }
#else
inline void tsanRelease(const void *) {}
inline void tsanAcquire(const void *) {}
#endif

#if defined(__SANITIZE_THREAD__)
/// TBB moves task objects into its own pool memory and hands them to workers
/// inside uninstrumented libtbb.so, so ThreadSanitizer cannot see that the
/// spawner's writes happen before the worker's reads, nor that a task object
/// dies before its memory is reused. These annotations state both edges on
/// the task object's address (the standard way to annotate an allocator).
struct TsanTaskFence {
  TsanTaskFence() { __tsan_acquire(this); }
  TsanTaskFence(TsanTaskFence &&) noexcept { __tsan_acquire(this); }
  ~TsanTaskFence() { __tsan_release(this); }
  void published() const { __tsan_release(const_cast<TsanTaskFence *>(this)); }
  void received() const { __tsan_acquire(const_cast<TsanTaskFence *>(this)); }
};
#else
struct TsanTaskFence {
  void published() const {}
  void received() const {}
};
#endif

/// TBB stores tasks as const functors; unique_function needs a mutable call.
struct Task {
  TsanTaskFence fence;  // first member: constructed first, destroyed last
  mutable llvm::unique_function<void()> fn;
  HostExecutor *ex;
  std::atomic<int64_t> *pending;

  Task(llvm::unique_function<void()> f, HostExecutor *e, std::atomic<int64_t> *p)
      : fn(std::move(f)), ex(e), pending(p) {
    fence.published();
  }
  Task(Task &&o) noexcept : fence(std::move(o.fence)), fn(std::move(o.fn)), ex(o.ex), pending(o.pending) {
    fence.published();
  }
  void operator()() const {
    fence.received();
    {
      WorkerScope scope(ex);
      fn();
    }
    pending->fetch_sub(1, std::memory_order_release);
  }
};
}  // namespace

namespace {
/// TBB caps its worker pool at the machine's cores minus one (a slot is kept
/// for the main thread). kiln's arenas reserve no slot for external threads,
/// so raise the cap to cover the largest executor created so far.
void allowWorkers(int threads) {
  static std::mutex mu;
  static std::unique_ptr<oneapi::tbb::global_control> control;
  static size_t allowed = 0;
  std::lock_guard<std::mutex> lock(mu);
  size_t want = std::max<size_t>(size_t(threads) + 1, std::thread::hardware_concurrency());
  if (want <= allowed) return;
  control = std::make_unique<oneapi::tbb::global_control>(
      oneapi::tbb::global_control::max_allowed_parallelism, want);
  allowed = want;
}
/// arena.execute() may hand `fn` to a worker (no slot is reserved for
/// outside threads) and wait for it inside libtbb; state both edges.
/// The annotations use one global address: the worker must not read the
/// closure to find the address it acquires on.
char gArenaHandoff;
template <typename F> void executeInArena(oneapi::tbb::task_arena &arena, F &&fn) {
  auto body = [&] {
    tsanAcquire(&gArenaHandoff);
    fn();
    tsanRelease(&gArenaHandoff);
  };
  tsanRelease(&gArenaHandoff);  // after `body` is built: the worker reads it
  arena.execute(body);
  tsanAcquire(&gArenaHandoff);
}

}  // namespace

HostExecutor::HostExecutor(int threads, int blockingThreads)
    : threads_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))) {
  allowWorkers(threads_);
  impl_ = std::make_unique<Impl>(threads_);
  impl_->arena.initialize();
  for (int i = 0; i < std::max(1, blockingThreads); ++i)
    impl_->blockingThreads.emplace_back([this] {
      Impl &I = *impl_;
      std::unique_lock<std::mutex> lock(I.mu);
      while (true) {
        I.cv.wait(lock, [&] { return I.stopping || !I.blockingQueue.empty(); });
        if (I.blockingQueue.empty()) return;  // stopping and drained
        auto task = std::move(I.blockingQueue.front());
        I.blockingQueue.pop_front();
        ++I.blockingActive;
        lock.unlock();
        task();
        task = nullptr;
        lock.lock();
        --I.blockingActive;
        I.idle.notify_all();
      }
    });
}

HostExecutor::~HostExecutor() {
  waitIdle();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  for (auto &t : impl_->blockingThreads) t.join();
  executeInArena(impl_->arena, [&] { impl_->group.wait(); });
}

bool HostExecutor::onWorker() const { return tlsCurrent == this; }
HostExecutor *HostExecutor::current() { return tlsCurrent; }

HostExecutor::ParallelScope::ParallelScope(HostExecutor &ex) : saved_(tlsParallel) { tlsParallel = &ex; }
HostExecutor::ParallelScope::~ParallelScope() { tlsParallel = saved_; }

HostExecutor &HostExecutor::forParallelLoops() {
  if (tlsParallel) return *tlsParallel;
  if (tlsCurrent) return *tlsCurrent;
  return processDefault();
}

HostExecutor &HostExecutor::processDefault() {
  static HostExecutor *ex = new HostExecutor(0, 1);  // never destroyed: may be used at exit
  return *ex;
}

void HostExecutor::spawn(llvm::unique_function<void()> task) {
  impl_->pending.fetch_add(1, std::memory_order_relaxed);
  Task t{std::move(task), this, &impl_->pending};
  if (onWorker())
    impl_->group.run(std::move(t));  // this worker's local deque
  else
    impl_->arena.enqueue(std::move(t));
}

void HostExecutor::spawnBlocking(llvm::unique_function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->blockingQueue.push_back(std::move(task));
  }
  impl_->cv.notify_one();
}

namespace {
/// A parallel loop started by a thread outside the arena (a step run inline
/// by Module::call, an eager op): the caller computes chunks itself while
/// helper tasks on the arena's workers claim the others. Handing the whole
/// loop to the arena instead (task_arena::execute from a thread without a
/// slot) leaves the caller idle and often ran the loop on one worker: a
/// 2-thread 56x56 3x3 conv called through Module::call took one thread's
/// time on about half of its calls.
struct CallerLoop {
  llvm::function_ref<void(int64_t, int64_t)> body;  // used only for a claimed chunk
  int64_t n, grain, chunks;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;

  /// Claims and runs chunks until none is left.
  void work() {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      body(c * grain, std::min(n, (c + 1) * grain));
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu);
        finished = true;
        cv.notify_one();
      }
    }
  }
};

/// What a parallel loop's chunks share, written before TBB copies the
/// chunk body into its tasks.
struct ParallelLoop {
  llvm::function_ref<void(int64_t, int64_t)> body;
  HostExecutor *executor;
};
/// The body TBB copies into each task: the loop's address. TBB writes a
/// task's copy after the caller's last release and hands the task over
/// inside libtbb, which ThreadSanitizer cannot see: each copy states its
/// own hand-off (release at its address once written, acquire before it is
/// read); everything behind the pointer was released before the loop. A
/// copy may be written where TBB's pool held a finished task that another
/// worker read: that worker released gArenaHandoff after its chunk.
class ParallelChunk {
 public:
  explicit ParallelChunk(const ParallelLoop *loop) : loop_(loop) { tsanRelease(this); }
  ParallelChunk(const ParallelChunk &o) : loop_((tsanAcquire(&gArenaHandoff), tsanAcquire(&o), o.loop_)) {
    tsanRelease(this);
  }
  ParallelChunk &operator=(const ParallelChunk &) = delete;
  void operator()(const oneapi::tbb::blocked_range<int64_t> &r) const {
    tsanAcquire(this);
    tsanAcquire(&gArenaHandoff);
    WorkerScope inner(loop_->executor);
    loop_->body(r.begin(), r.end());
    tsanRelease(&gArenaHandoff);
  }

 private:
  const ParallelLoop *loop_;
};
}  // namespace

void HostExecutor::parallelFor(int64_t n, int64_t grain,
                               llvm::function_ref<void(int64_t, int64_t)> body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n <= grain || threads_ == 1) {
    body(0, n);
    return;
  }
  if (!onWorker()) {
    auto loop = std::make_shared<CallerLoop>();
    loop->body = body;
    loop->n = n;
    loop->grain = grain;
    loop->chunks = (n + grain - 1) / grain;
    int64_t helpers = std::min<int64_t>(threads_ - 1, loop->chunks - 1);
    for (int64_t i = 0; i < helpers; ++i) spawn([loop] { loop->work(); });
    loop->work();
    // Chunks the helpers took may still run; a helper that starts later
    // finds none left and never touches `body`.
    for (int spin = 0; spin < 200 && loop->done.load(std::memory_order_acquire) < loop->chunks; ++spin)
      std::this_thread::yield();
    std::unique_lock<std::mutex> lock(loop->mu);
    loop->cv.wait(lock, [&] { return loop->finished; });
    return;
  }
  // On a worker: TBB splits the range and idle workers steal halves. The
  // caller's writes happen before every chunk, every chunk before the
  // return (TBB guarantees it; the tsan* calls state it for ThreadSanitizer).
  auto run = [&] {
    WorkerScope scope(this);
    ParallelLoop loop{body, this};
    tsanRelease(&gArenaHandoff);  // `loop` is written: the chunks read it
    oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<int64_t>(0, n, grain), ParallelChunk(&loop));
  };
  executeInArena(impl_->arena, run);
}

void HostExecutor::waitIdle() {
  while (true) {
    executeInArena(impl_->arena, [&] { impl_->group.wait(); });
    bool blockingIdle;
    {
      std::unique_lock<std::mutex> lock(impl_->mu);
      impl_->idle.wait_for(lock, std::chrono::milliseconds(1), [&] {
        return impl_->blockingQueue.empty() && impl_->blockingActive == 0;
      });
      blockingIdle = impl_->blockingQueue.empty() && impl_->blockingActive == 0;
    }
    if (blockingIdle && impl_->pending.load(std::memory_order_acquire) == 0) return;
    std::this_thread::yield();
  }
}

}  // namespace kiln

extern "C" void kiln_parallel_for(int64_t n, int64_t grain,
                                  void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  kiln::HostExecutor::forParallelLoops().parallelFor(n, grain, [&](int64_t b, int64_t e) { fn(ctx, b, e); });
}

namespace kiln {
void HostExecutor::setTrace(std::shared_ptr<TraceRecorder> trace) {
  bool on = bool(trace);
  std::atomic_store_explicit(&trace_, std::move(trace), std::memory_order_release);
  tracing_.store(on, std::memory_order_relaxed);
}
}  // namespace kiln
