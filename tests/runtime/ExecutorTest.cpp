// AsyncValue, HostExecutor and Executable: semantics, buffer planning,
// errors, cancellation, and stress tests of random DAGs from many threads
// (run under ThreadSanitizer and AddressSanitizer in CI).
#include "runtime/AsyncValue.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/Trace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

using namespace kiln;

namespace {
TensorType i64(std::vector<int64_t> s) { return TensorType{DType::i64, Shape(s.begin(), s.end())}; }
Tensor scalar(int64_t v) { return Tensor::fromVector<int64_t>(DType::i64, {1}, std::vector<int64_t>{v}); }
int64_t valueOf(const Tensor &t) { return t.data<int64_t>()[0]; }

/// out(0)[0] = sum of in(i)[0] + add.
StepFn sumStep(int64_t add) {
  return [add](const StepContext &ctx) {
    int64_t s = add;
    for (unsigned i = 0; i < ctx.numInputs(); ++i) s += *static_cast<int64_t *>(ctx.in(i));
    *static_cast<int64_t *>(ctx.out(0)) = s;
    return llvm::Error::success();
  };
}
}  // namespace

// --- AsyncValue ---------------------------------------------------------------

TEST(AsyncValue, ConcreteErrorAndContinuationsInOrder) {
  auto v = makeUnavailable<int>();
  EXPECT_FALSE(v->isAvailable());
  std::vector<int> order;
  v->andThen([&] { order.push_back(1); });
  v->andThen([&] { order.push_back(2); });
  v->emplace(42);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  v->andThen([&] { order.push_back(3); });  // already available: runs inline
  EXPECT_EQ(order.back(), 3);
  EXPECT_EQ(v->get(), 42);

  // An error crosses the AsyncValue unchanged: code, message and location.
  auto e = makeErrorValue<int>(Status{ErrorCode::kCompileFailed, "boom at step 'x'", "m.mlir:3:7"});
  EXPECT_TRUE(e->isError());
  auto r = e.awaitValue();
  ASSERT_FALSE(bool(r));
  Status st = toStatus(r.takeError());
  EXPECT_EQ(st.code, ErrorCode::kCompileFailed);
  EXPECT_EQ(st.message, "boom at step 'x'");
  EXPECT_EQ(st.location, "m.mlir:3:7");
  EXPECT_EQ(st.str(), "m.mlir:3:7: boom at step 'x'");
}

TEST(AsyncValue, RefCountingFreesPayloadAndPendingWaiters) {
  auto payload = std::make_shared<int>(7);
  std::weak_ptr<int> weak = payload;
  {
    auto v = makeAvailable<std::shared_ptr<int>>(std::move(payload));
    AsyncValueRef<std::shared_ptr<int>> copy = v;
    EXPECT_EQ(v->refCount(), 2u);
  }
  EXPECT_TRUE(weak.expired());
  auto never = makeUnavailable<int>();
  never->andThen([] { FAIL() << "must not run"; });  // freed unrun with the value
}

TEST(AsyncValue, ReadyChainIsSharedAndAvailable) {
  auto a = readyChain(), b = readyChain();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_TRUE(a->isConcrete());
}

TEST(AsyncValue, ConcurrentAndThenAndPublish) {
  for (int round = 0; round < 50; ++round) {
    auto v = makeUnavailable<int>();
    std::atomic<int> ran{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) v->andThen([&] { ran.fetch_add(1); });
      });
    std::thread setter([&] { v->emplace(round); });
    for (auto &t : threads) t.join();
    setter.join();
    EXPECT_EQ(ran.load(), 400);
  }
}

TEST(AsyncValue, AwaitFromAnotherThread) {
  auto v = makeUnavailable<std::string>();
  std::thread t([v] { v->emplace("done"); });
  auto r = v.awaitValue();
  t.join();
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(*r, "done");
}

// --- HostExecutor -------------------------------------------------------------

TEST(HostExecutor, SpawnRunsOnWorkersBlockingDoesNot) {
  HostExecutor ex(2);
  EXPECT_EQ(ex.numThreads(), 2);
  std::atomic<int> onWorker{0}, blockingOnWorker{0}, count{0};
  for (int i = 0; i < 100; ++i)
    ex.spawn([&] {
      onWorker += ex.onWorker();
      ++count;
    });
  ex.spawnBlocking([&] { blockingOnWorker += ex.onWorker(); });
  ex.waitIdle();
  EXPECT_EQ(count.load(), 100);
  EXPECT_EQ(onWorker.load(), 100);
  EXPECT_EQ(blockingOnWorker.load(), 0);
  EXPECT_FALSE(ex.onWorker());
}

TEST(HostExecutor, ParallelForCoversTheRangeOnce) {
  HostExecutor ex(2);
  std::vector<std::atomic<int>> hits(10007);
  ex.parallelFor(10007, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto &h : hits) ASSERT_EQ(h.load(), 1);
}

// A loop started outside the arena (a step run inline by Module::call, an
// eager op) runs on the calling thread and on the arena's workers at once:
// each chunk waits until chunks have started on two threads, which never
// happens if the caller only waits (or if one worker runs every chunk).
TEST(HostExecutor, ParallelForOutsideTheArenaRunsOnTheCallerAndAWorker) {
  HostExecutor ex(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> callerChunks{0}, workerChunks{0}, timedOut{0};
  std::vector<std::atomic<int>> hits(16);
  ex.parallelFor(16, 1, [&](int64_t b, int64_t e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (threads.size() >= 2) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ++timedOut;
        break;
      }
      std::this_thread::yield();
    }
    (std::this_thread::get_id() == caller ? callerChunks : workerChunks)++;
    EXPECT_EQ(std::this_thread::get_id() != caller, ex.onWorker());
    // A loop nested in a chunk covers its range too, on either thread.
    std::atomic<int64_t> inner{0};
    ex.parallelFor(100, 7, [&](int64_t ib, int64_t ie) { inner += ie - ib; });
    EXPECT_EQ(inner.load(), 100);
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto &h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(timedOut.load(), 0);
  EXPECT_GT(callerChunks.load(), 0);
  EXPECT_GT(workerChunks.load(), 0);
}

TEST(HostExecutor, ExportedParallelForUsesTheCurrentExecutor) {
  HostExecutor ex(2);
  struct Ctx {
    std::atomic<int64_t> sum{0};
    std::atomic<int> onWorker{0};
    HostExecutor *ex;
  } ctx;
  ctx.ex = &ex;
  auto body = [](void *p, int64_t b, int64_t e) {
    auto *c = static_cast<Ctx *>(p);
    for (int64_t i = b; i < e; ++i) c->sum += i;
    c->onWorker += c->ex->onWorker();
  };
  std::atomic<bool> done{false};
  ex.spawn([&] {
    kiln_parallel_for(1000, 10, body, &ctx);
    done = true;
  });
  ex.waitIdle();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(ctx.sum.load(), 999 * 1000 / 2);
  EXPECT_GT(ctx.onWorker.load(), 0);
  ctx.sum = 0;
  kiln_parallel_for(100, 1, body, &ctx);  // outside any executor: process default
  EXPECT_EQ(ctx.sum.load(), 99 * 100 / 2);
}

// --- Executable ---------------------------------------------------------------

TEST(Executable, ChainDiamondAndFanOut) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int x = b.addInput(i64({1}));
  int prev = x;
  for (int i = 0; i < 100; ++i) {  // chain: x + 100
    int t = b.addIntermediate(i64({1}));
    ASSERT_TRUE(bool(b.addStep("inc" + std::to_string(i), StepKind::kOther, sumStep(1), {prev}, {t})));
    prev = t;
  }
  int l = b.addIntermediate(i64({1})), r = b.addIntermediate(i64({1}));
  ASSERT_TRUE(bool(b.addStep("left", StepKind::kOther, sumStep(10), {prev}, {l})));
  ASSERT_TRUE(bool(b.addStep("right", StepKind::kOther, sumStep(20), {prev}, {r})));
  int o0 = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("join", StepKind::kOther, sumStep(0), {l, r}, {o0})));
  int o1 = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("copy-x", StepKind::kCopy, copyStep(8), {x}, {o1})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe)) << llvm::toString(exe.takeError());
  for (int64_t v : {0, 5, -7}) {
    auto out = (*exe)->run({scalar(v)}, ex);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(valueOf((*out)[0]), 2 * (v + 100) + 30);
    EXPECT_EQ(valueOf((*out)[1]), v);
  }
  // Sequential runs reuse pooled executions. The last step's thread
  // returns its execution just after the outputs are set, so a run that
  // starts at once may not find it yet and make another (on a loaded
  // machine, one per back-to-back run above); a run after the executor is
  // idle always finds one: the pool no longer grows.
  ex.waitIdle();
  size_t pooled = (*exe)->pooledExecutions();
  EXPECT_GE(pooled, 1u);
  EXPECT_LE(pooled, 3u);
  for (int i = 0; i < 10; ++i) {
    auto out = (*exe)->run({scalar(i)}, ex);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(valueOf((*out)[0]), 2 * (i + 100) + 30);
    ex.waitIdle();
  }
  EXPECT_EQ((*exe)->pooledExecutions(), pooled);
}

/// A step that does its work on another thread (as a device does) and
/// finishes through StepContext::defer(): out(0)[0] = in(0)[0] + add, after
/// `delayUs`. `returnError` makes the step function itself fail after
/// deferring; `completeError` makes the completion carry an error.
StepFn deferredStep(int64_t add, int delayUs, bool returnError = false, bool completeError = false) {
  return [=](const StepContext &ctx) -> llvm::Error {
    StepCompletion done = ctx.defer();
    auto *in = static_cast<int64_t *>(ctx.in(0));
    auto *out = static_cast<int64_t *>(ctx.out(0));
    auto work = [=] {
      if (delayUs) std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
      *out = *in + add;
      done(completeError ? error(ErrorCode::kInternal, "device fault") : llvm::Error::success());
    };
    if (delayUs < 0) work();  // completes before the step function returns
    else std::thread(work).detach();
    if (returnError) return error(ErrorCode::kInvalidArgument, "enqueue failed");
    return llvm::Error::success();
  };
}

TEST(Executable, DeferredStepsFinishWhenTheirWorkDoes) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int x = b.addInput(i64({1}));
  int prev = x;
  // A chain mixing host steps, steps finished later on another thread and
  // steps completed before their function returns.
  for (int i = 0; i < 30; ++i) {
    int t = b.addIntermediate(i64({1}));
    StepFn fn = i % 3 == 0 ? sumStep(1) : deferredStep(1, i % 3 == 1 ? 200 : -1);
    ASSERT_TRUE(bool(b.addStep("s" + std::to_string(i), StepKind::kOther, fn, {prev}, {t})));
    prev = t;
  }
  int o = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("out", StepKind::kCopy, copyStep(8), {prev}, {o})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe)) << llvm::toString(exe.takeError());
  auto trace = std::make_shared<TraceRecorder>();
  ex.setTrace(trace);
  for (int64_t v : {0, 7}) {
    auto out = (*exe)->run({scalar(v)}, ex);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(valueOf((*out)[0]), v + 30);
  }
  // Several executions at once.
  std::vector<std::vector<AsyncValueRef<Tensor>>> runs;
  for (int64_t v = 0; v < 8; ++v) runs.push_back((*exe)->execute({scalar(v)}, ex));
  for (int64_t v = 0; v < 8; ++v) {
    auto t = runs[size_t(v)][0].awaitValue();
    ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
    EXPECT_EQ(valueOf(*t), v + 30);
  }
  ex.setTrace(nullptr);
  ex.waitIdle();
  // Every step of the 10 runs was traced once, deferred ones included.
  EXPECT_EQ(trace->events().size(), 10u * 31u);
}

TEST(Executable, DeferredStepErrorsPoisonDependents) {
  HostExecutor ex(2);
  for (int mode = 0; mode < 2; ++mode) {
    ExecutableBuilder b;
    int x = b.addInput(i64({1}));
    int t = b.addIntermediate(i64({1}));
    std::atomic<int> dependentRan{0};
    ASSERT_TRUE(bool(b.addStep("gpu", StepKind::kJit, deferredStep(1, 100, mode == 0, mode == 1), {x}, {t})));
    int o = b.addOutput(i64({1}));
    ASSERT_TRUE(bool(b.addStep("after", StepKind::kOther,
                               [&](const StepContext &ctx) {
                                 ++dependentRan;
                                 return llvm::Error::success();
                               },
                               {t}, {o})));
    int o2 = b.addOutput(i64({1}));
    ASSERT_TRUE(bool(b.addStep("independent", StepKind::kOther, sumStep(5), {x}, {o2})));
    auto exe = b.build();
    ASSERT_TRUE(bool(exe));
    auto futures = (*exe)->execute({scalar(1)}, ex);
    auto bad = futures[0].awaitValue();
    ASSERT_FALSE(bool(bad));
    std::string msg = llvm::toString(bad.takeError());
    EXPECT_NE(msg.find("step 'gpu' failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find(mode == 0 ? "enqueue failed" : "device fault"), std::string::npos) << msg;
    auto good = futures[1].awaitValue();
    ASSERT_TRUE(bool(good));
    EXPECT_EQ(valueOf(*good), 6);
    ex.waitIdle();
    EXPECT_EQ(dependentRan.load(), 0);
  }
}

TEST(Executable, SerialStepsRunOneAtATime) {
  // Independent steps (roots, a fan-out, deferred ones among them) and a
  // failing branch: with serialSteps no two run at once, the results and
  // errors are those of a concurrent run, and nothing is left waiting.
  HostExecutor ex(2);
  std::atomic<int> running{0}, most{0}, ran{0};
  auto watched = [&](StepFn fn) -> StepFn {
    return [&, fn](const StepContext &ctx) {
      int now = ++running;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
      ++ran;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --running;  // before a deferred step's completion: it does not overlap either
      return fn(ctx);
    };
  };
  ExecutableBuilder b;
  int x = b.addInput(i64({1}));
  std::vector<int> branches;
  for (int i = 0; i < 6; ++i) {
    int t = b.addIntermediate(i64({1}));
    StepFn fn = i % 2 ? deferredStep(i, i == 3 ? 300 : -1) : sumStep(i);
    ASSERT_TRUE(bool(b.addStep("branch" + std::to_string(i), StepKind::kOther, watched(fn), {x}, {t})));
    branches.push_back(t);
  }
  int o = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("join", StepKind::kOther, watched(sumStep(0)), branches, {o})));
  int bad = b.addIntermediate(i64({1}));
  ASSERT_TRUE(bool(b.addStep("fails", StepKind::kOther,
                             watched([](const StepContext &) { return error(ErrorCode::kInternal, "broken"); }), {x},
                             {bad})));
  int o2 = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("after-failure", StepKind::kOther, watched(sumStep(0)), {bad}, {o2})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe)) << llvm::toString(exe.takeError());
  for (bool inlineFirst : {false, true}) {
    most = 0;
    ran = 0;
    ExecuteOptions opts;
    opts.serialSteps = true;
    opts.runFirstStepInline = inlineFirst;
    auto futures = (*exe)->execute({scalar(10)}, ex, opts);
    auto sum = futures[0].awaitValue();
    ASSERT_TRUE(bool(sum)) << llvm::toString(sum.takeError());
    EXPECT_EQ(valueOf(*sum), 6 * 10 + (0 + 1 + 2 + 3 + 4 + 5));
    auto failed = futures[1].awaitValue();
    ASSERT_FALSE(bool(failed));
    EXPECT_NE(llvm::toString(failed.takeError()).find("step 'fails' failed: broken"), std::string::npos);
    ex.waitIdle();
    EXPECT_EQ(most.load(), 1);
    EXPECT_EQ(ran.load(), 8);  // every step but the failed one's dependent
  }
  EXPECT_EQ((*exe)->pooledExecutions(), 1u);
}

TEST(Executable, BufferPlanReusesDeadBuffersOnly) {
  // A chain of 50 steps over 1 KiB buffers needs two buffers at a time.
  ExecutableBuilder chain;
  TensorType kb{DType::f32, {256}};
  int prev = chain.addInput(kb);
  for (int i = 0; i < 50; ++i) {
    int t = i == 49 ? chain.addOutput(kb) : chain.addIntermediate(kb);
    ASSERT_TRUE(bool(chain.addStep("s" + std::to_string(i), StepKind::kCopy, copyStep(1024), {prev}, {t})));
    prev = t;
  }
  auto c = chain.build();
  ASSERT_TRUE(bool(c));
  EXPECT_EQ((*c)->planStats().intermediateBytes, 49u * 1024);
  EXPECT_EQ((*c)->planStats().arenaBytes, 2u * 1024);
  EXPECT_EQ((*c)->planStats().largestLiveBytes, 2u * 1024);

  // Independent branches may run at once: their buffers must not alias.
  ExecutableBuilder fan;
  int in = fan.addInput(kb);
  std::vector<int> mids;
  for (int i = 0; i < 8; ++i) {
    int t = fan.addIntermediate(kb);
    ASSERT_TRUE(bool(fan.addStep("b" + std::to_string(i), StepKind::kCopy, copyStep(1024), {in}, {t})));
    mids.push_back(t);
  }
  int out = fan.addOutput(kb);
  ASSERT_TRUE(bool(fan.addStep("join", StepKind::kCopy, copyStep(1024), mids, {out})));
  auto f = fan.build();
  ASSERT_TRUE(bool(f));
  std::set<int64_t> offsets;
  for (int m : mids) offsets.insert((*f)->buffers()[m].offset);
  EXPECT_EQ(offsets.size(), 8u);
  EXPECT_EQ((*f)->planStats().arenaBytes, 8u * 1024);
}

TEST(Executable, ScratchSharesDeadBuffersNeverLiveOnes) {
  // A chain a -> s0 -> b -> s1 -> c -> s2 -> out, where s2 has 2 KiB of
  // scratch: it may reuse a (dead by then), never b's successor c (its
  // input) or its output; s1's scratch may not alias b or c.
  ExecutableBuilder chain;
  TensorType kb{DType::f32, {256}};
  int in = chain.addInput(kb);
  int a = chain.addIntermediate(kb), b = chain.addIntermediate(kb), c = chain.addIntermediate(kb);
  int out = chain.addOutput(kb);
  std::vector<std::pair<void *, size_t>> seen(3);
  std::vector<std::vector<void *>> live(3);
  auto step = [&](int i) {
    return [&, i](const StepContext &ctx) -> llvm::Error {
      seen[size_t(i)] = {ctx.scratch(), ctx.scratchBytes()};
      live[size_t(i)] = {ctx.in(0), ctx.out(0)};
      std::memcpy(ctx.out(0), ctx.in(0), 1024);
      if (ctx.scratch()) std::memset(ctx.scratch(), 0x5a, ctx.scratchBytes());  // must clobber nothing live
      return llvm::Error::success();
    };
  };
  ASSERT_TRUE(bool(chain.addStep("copy", StepKind::kCopy, copyStep(1024), {in}, {a})));
  int s0 = *chain.addStep("s0", StepKind::kOther, step(0), {a}, {b});
  int s1 = *chain.addStep("s1", StepKind::kOther, step(1), {b}, {c});
  int s2 = *chain.addStep("s2", StepKind::kOther, step(2), {c}, {out});
  ASSERT_FALSE(bool(chain.setScratch(s1, 100)));
  ASSERT_FALSE(bool(chain.setScratch(s2, 2048)));
  ASSERT_FALSE(bool(chain.setScratch(s0, 0)));  // none
  EXPECT_TRUE(bool(chain.setScratch(s2, 64))) << "a second scratch for one step is an error";
  auto e = chain.build();
  ASSERT_TRUE(bool(e)) << llvm::toString(e.takeError());
  HostExecutor ex(2);
  Tensor x = Tensor::empty(DType::f32, {256});
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = float(i);
  auto r = (*e)->run({x}, ex);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  for (int i = 0; i < 256; ++i) ASSERT_EQ((*r)[0].data<float>()[i], float(i)) << i;
  EXPECT_EQ(seen[0].first, nullptr);
  EXPECT_EQ(seen[0].second, 0u);
  for (int i : {1, 2}) {
    auto [p, n] = seen[size_t(i)];
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(n, i == 1 ? 100u : 2048u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kBufferAlignment, 0u);
    for (void *q : live[size_t(i)]) {
      auto *lo = static_cast<char *>(p), *hi = lo + n, *qb = static_cast<char *>(q);
      EXPECT_TRUE(qb + 1024 <= lo || qb >= hi) << "step s" << i << "'s scratch overlaps a buffer it uses";
    }
  }
  // s2's 2 KiB reuse a and b (dead when it runs), s1's 100 bytes a: the
  // arena holds s2's scratch and c (3 KiB, not the 5 KiB of all five).
  EXPECT_EQ((*e)->planStats().arenaBytes, 3u * 1024);
}

TEST(Executable, LargeGraphsPlanInLinearTimeWithoutSharing) {
  // Above 4096 steps the planner skips the n^2 reachability matrix: every
  // intermediate gets its own memory, and the chain still computes right.
  ExecutableBuilder chain;
  TensorType i64{DType::i64, {1}};
  int prev = chain.addInput(i64);
  const int n = 5000;
  for (int i = 0; i < n; ++i) {
    int t = i == n - 1 ? chain.addOutput(i64) : chain.addIntermediate(i64);
    ASSERT_TRUE(bool(chain.addStep("s" + std::to_string(i), StepKind::kOther, sumStep(1), {prev}, {t})));
    prev = t;
  }
  auto c = chain.build();
  ASSERT_TRUE(bool(c));
  EXPECT_EQ((*c)->planStats().arenaBytes, size_t(n - 1) * kBufferAlignment);
  EXPECT_EQ((*c)->planStats().largestLiveBytes, 2u * 8);
  HostExecutor ex(2);
  auto out = (*c)->run({scalar(7)}, ex);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(valueOf((*out)[0]), 7 + n);
}

TEST(Executable, BuilderRejectsBadGraphs) {
  ExecutableBuilder b;
  int in = b.addInput(i64({1}));
  int t = b.addIntermediate(i64({1}));
  int o = b.addOutput(i64({1}));
  auto e1 = b.addStep("reads-unwritten", StepKind::kOther, sumStep(0), {t}, {o});
  ASSERT_FALSE(bool(e1));
  EXPECT_NE(llvm::toString(e1.takeError()).find("before any step writes it"), std::string::npos);
  auto e2 = b.addStep("writes-input", StepKind::kOther, sumStep(0), {}, {in});
  ASSERT_FALSE(bool(e2));
  EXPECT_NE(llvm::toString(e2.takeError()).find("an input or constant"), std::string::npos);
  auto e3 = b.build();
  ASSERT_FALSE(bool(e3));
  EXPECT_NE(llvm::toString(e3.takeError()).find("output 0"), std::string::npos);
}

TEST(Executable, FailedStepPoisonsOnlyItsDependents) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int x = b.addInput(i64({1}));
  int t = b.addIntermediate(i64({1}));
  std::atomic<int> dependentRan{0};
  ASSERT_TRUE(bool(b.addStep("bad", StepKind::kKernel,
                             [](const StepContext &) {
                               return llvm::createStringError("division by zero in tile 3");
                             },
                             {x}, {t})));
  int o0 = b.addOutput(i64({1})), o1 = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("after-bad", StepKind::kOther,
                             [&](const StepContext &ctx) {
                               ++dependentRan;
                               return sumStep(0)(ctx);
                             },
                             {t}, {o0})));
  ASSERT_TRUE(bool(b.addStep("independent", StepKind::kOther, sumStep(1), {x}, {o1})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  auto outs = (*exe)->execute({scalar(3)}, ex);
  auto r0 = outs[0].awaitValue();
  ASSERT_FALSE(bool(r0));
  std::string msg = llvm::toString(r0.takeError());
  EXPECT_NE(msg.find("step 'bad' failed: division by zero in tile 3"), std::string::npos) << msg;
  auto r1 = outs[1].awaitValue();
  ASSERT_TRUE(bool(r1));
  EXPECT_EQ(valueOf(*r1), 4);
  ex.waitIdle();
  EXPECT_EQ(dependentRan.load(), 0);
  // Wrong inputs are errors too, not crashes.
  auto wrong = (*exe)->execute({Tensor::empty(DType::f32, {1})}, ex);
  ASSERT_TRUE(wrong[0]->isError());
  EXPECT_NE(wrong[0]->error().message.find("expected tensor<1xi64>"), std::string::npos);
  EXPECT_EQ(wrong[0]->error().code, ErrorCode::kInvalidArgument);
}

TEST(Executable, CancellationStopsLaunchingSteps) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int prev = b.addInput(i64({1}));
  auto token = std::make_shared<CancellationToken>();
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    int t = i == 19 ? b.addOutput(i64({1})) : b.addIntermediate(i64({1}));
    ASSERT_TRUE(bool(b.addStep("s" + std::to_string(i), StepKind::kOther,
                               [&, i](const StepContext &ctx) {
                                 if (++ran == 5) token->cancel();
                                 return sumStep(1)(ctx);
                               },
                               {prev}, {t})));
    prev = t;
  }
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  ExecuteOptions opts;
  opts.cancel = token;
  auto outs = (*exe)->execute({scalar(0)}, ex, opts);
  auto r = outs[0].awaitValue();
  ASSERT_FALSE(bool(r));
  Status st = toStatus(r.takeError());
  EXPECT_NE(st.message.find("cancelled before step 's5'"), std::string::npos);
  EXPECT_EQ(st.code, ErrorCode::kCancelled);
  ex.waitIdle();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ((*exe)->pooledExecutions(), 1u);  // buffers went back to the pool
}

TEST(Executable, DeadlinesStopLaunchingStepsAndSaySo) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int prev = b.addInput(i64({1}));
  std::atomic<int> ran{0};
  auto token = std::make_shared<CancellationToken>();
  for (int i = 0; i < 20; ++i) {
    int t = i == 19 ? b.addOutput(i64({1})) : b.addIntermediate(i64({1}));
    ASSERT_TRUE(bool(b.addStep("s" + std::to_string(i), StepKind::kOther,
                               [&](const StepContext &ctx) {
                                 // The clock starts at the first step (a busy
                                 // machine may start the arena late).
                                 if (++ran == 1) token->setTimeout(std::chrono::milliseconds(45));
                                 EXPECT_EQ(ctx.cancellation(), token.get());
                                 std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                 return sumStep(1)(ctx);
                               },
                               {prev}, {t})));
    prev = t;
  }
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  EXPECT_FALSE(token->cancelled());
  ExecuteOptions opts;
  opts.cancel = token;
  auto r = (*exe)->execute({scalar(0)}, ex, opts)[0].awaitValue();
  ASSERT_FALSE(bool(r));
  Status st = toStatus(r.takeError());
  EXPECT_EQ(st.code, ErrorCode::kCancelled);
  EXPECT_NE(st.message.find("deadline exceeded before step"), std::string::npos) << st.message;
  EXPECT_TRUE(token->deadlineExceeded());
  EXPECT_STREQ(token->reason(), "deadline exceeded");
  ex.waitIdle();
  EXPECT_GE(ran.load(), 1);  // a loaded machine may stall past the deadline after the first
  EXPECT_LT(ran.load(), 20);
}

TEST(Executable, ConcurrentExecutionsHaveTheirOwnBuffers) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int prev = b.addInput(i64({1}));
  for (int i = 0; i < 30; ++i) {
    int t = i == 29 ? b.addOutput(i64({1})) : b.addIntermediate(i64({1}));
    ASSERT_TRUE(bool(b.addStep("s" + std::to_string(i), StepKind::kOther, sumStep(i), {prev}, {t})));
    prev = t;
  }
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        int64_t v = t * 1000 + i;
        auto out = (*exe)->run({scalar(v)}, ex);
        if (!out || valueOf((*out)[0]) != v + 29 * 30 / 2) ++wrong;
        if (!out) llvm::consumeError(out.takeError());
      }
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  ex.waitIdle();
  EXPECT_LE((*exe)->pooledExecutions(), 4u + 1u);
}

// After a burst of concurrent executions (64 in flight at once, each
// holding its own arena) the pool keeps only max(4, cores) of them: the rest
// return their memory instead of staying pooled for the process's life.
TEST(Executable, BurstLeavesABoundedPool) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int in = b.addInput(i64({1}));
  int mid = b.addIntermediate(i64({1024}));
  int out = b.addOutput(i64({1}));
  StepFn slow = [](const StepContext &ctx) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    *static_cast<int64_t *>(ctx.out(0)) = *static_cast<int64_t *>(ctx.in(0));
    return llvm::Error::success();
  };
  ASSERT_TRUE(bool(b.addStep("slow", StepKind::kOther, slow, {in}, {mid})));
  ASSERT_TRUE(bool(b.addStep("last", StepKind::kOther, sumStep(1), {mid}, {out})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  std::vector<AsyncValueRef<Tensor>> results;
  for (int i = 0; i < 64; ++i) results.push_back((*exe)->execute({scalar(i)}, ex)[0]);
  for (int i = 0; i < 64; ++i) {
    auto v = results[i].awaitValue();
    ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
    EXPECT_EQ(valueOf(*v), i + 1);
  }
  ex.waitIdle();
  EXPECT_GE((*exe)->pooledExecutions(), 1u);
  EXPECT_LE((*exe)->pooledExecutions(), size_t(std::max(4u, std::thread::hardware_concurrency())));
}

// ExecuteOptions::outputs: results computed into the caller's memory (the
// same address comes back, nothing copied); a wrong type or memory
// overlapping an input is an error before anything runs.
TEST(Executable, OutputsIntoCallerMemory) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int in = b.addInput(i64({1}));
  int mid = b.addIntermediate(i64({1}));
  int out0 = b.addOutput(i64({1})), out1 = b.addOutput(i64({1}));
  ASSERT_TRUE(bool(b.addStep("a", StepKind::kOther, sumStep(1), {in}, {mid})));
  ASSERT_TRUE(bool(b.addStep("b", StepKind::kOther, sumStep(10), {mid}, {out0})));
  ASSERT_TRUE(bool(b.addStep("c", StepKind::kOther, sumStep(100), {mid}, {out1})));
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  int64_t mine[2] = {-1, -1};
  ExecuteOptions opts;
  opts.outputs = {Tensor::wrap(DType::i64, {1}, &mine[1], nullptr), Tensor()};
  auto results = (*exe)->execute({scalar(5)}, ex, opts);
  auto r0 = results[0].awaitValue(), r1 = results[1].awaitValue();
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r0->rawData(), &mine[1]);  // written in place
  EXPECT_EQ(mine[1], 16);
  EXPECT_EQ(mine[0], -1);
  EXPECT_NE(r1->rawData(), &mine[1]);  // not given: kiln's own
  EXPECT_EQ(valueOf(*r1), 106);

  Tensor input = scalar(5);
  ExecuteOptions overlapping;
  overlapping.outputs = {Tensor(), input};
  auto bad = (*exe)->execute({input}, ex, overlapping)[1].awaitValue();
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(toStatus(bad.takeError()).message.find("output 1 overlaps input 0"), std::string::npos);
  ExecuteOptions wrongType;
  wrongType.outputs = {Tensor::empty(DType::f32, {1}), Tensor()};
  bad = (*exe)->execute({scalar(5)}, ex, wrongType)[0].awaitValue();
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(toStatus(bad.takeError()).message.find("output 0: the given tensor is tensor<1xf32>"), std::string::npos);
  ex.waitIdle();
}

// A trace set while executions run on several threads records every step
// exactly once (no lost or torn events), with the step's description; once
// cleared, nothing more is recorded. Run under TSan too.
TEST(Executable, TraceRecordsEveryStepOfConcurrentExecutions) {
  HostExecutor ex(2);
  ExecutableBuilder b;
  int prev = b.addInput(i64({1}));
  for (int i = 0; i < 10; ++i) {
    int t = i == 9 ? b.addOutput(i64({1})) : b.addIntermediate(i64({1}));
    auto step = b.addStep("s" + std::to_string(i), StepKind::kJit, sumStep(i), {prev}, {t});
    ASSERT_TRUE(bool(step));
    b.describeStep(*step, 2.0 * i, "op" + std::to_string(i), "model.mlir:" + std::to_string(i));
    prev = t;
  }
  auto exe = b.build();
  ASSERT_TRUE(bool(exe));
  auto trace = std::make_shared<TraceRecorder>();
  ex.setTrace(trace);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) llvm::cantFail((*exe)->run({scalar(i)}, ex));
    });
  for (auto &th : threads) th.join();
  ex.setTrace(nullptr);
  ex.waitIdle();
  llvm::cantFail((*exe)->run({scalar(1)}, ex));  // not recorded
  std::vector<TraceEvent> events = trace->events();
  ASSERT_EQ(events.size(), 3u * 50u * 10u);
  std::vector<int> perStep(10, 0);
  for (const TraceEvent &e : events) {
    ASSERT_GE(e.step, 0);
    ASSERT_LT(e.step, 10);
    ++perStep[e.step];
    EXPECT_EQ(e.name, "s" + std::to_string(e.step));
    EXPECT_EQ(e.category, "jit");
    EXPECT_GE(e.durationUs, 0);
    EXPECT_GE(e.thread, 1u);
    EXPECT_EQ(e.executable->steps()[e.step].ops, "op" + std::to_string(e.step));
    EXPECT_EQ(e.executable->steps()[e.step].flops, 2.0 * e.step);
  }
  for (int n : perStep) EXPECT_EQ(n, 150);
}

// Random DAGs: each step sums its inputs plus its id; some steps fail. The
// expected value (or error) of every output is computed sequentially and
// must match whatever the schedule, from many threads at once.
TEST(Executable, RandomDagStressWithFailuresAndCancellation) {
  HostExecutor ex(2);
  std::mt19937 rng(2024);
  for (int graph = 0; graph < 20; ++graph) {
    ExecutableBuilder b;
    const int numInputs = 3, numSteps = 60;
    std::vector<int> bufs;
    for (int i = 0; i < numInputs; ++i) bufs.push_back(b.addInput(i64({1})));
    std::vector<std::vector<int>> stepInputs(numSteps);
    std::vector<bool> fails(numSteps), isSink(numSteps, true);
    std::vector<int> stepOut(numSteps);
    for (int s = 0; s < numSteps; ++s) {
      int k = 1 + int(rng() % 3);
      for (int j = 0; j < k; ++j) {
        int pick = int(rng() % bufs.size());
        if (!llvm::is_contained(stepInputs[s], pick)) stepInputs[s].push_back(pick);
      }
      fails[s] = rng() % 25 == 0;
      bufs.push_back(-1);  // placeholder, filled below
    }
    // Sinks (read by nobody) become outputs.
    for (int s = 0; s < numSteps; ++s)
      for (int in : stepInputs[s])
        if (in >= numInputs) isSink[in - numInputs] = false;
    for (int s = 0; s < numSteps; ++s) {
      int id = isSink[s] ? b.addOutput(i64({1})) : b.addIntermediate(i64({1}));
      bufs[numInputs + s] = id;
      std::vector<int> ins;
      for (int in : stepInputs[s]) ins.push_back(bufs[in]);
      bool fail = fails[s];
      StepFn fn = [s, fail](const StepContext &ctx) -> llvm::Error {
        if (fail) return llvm::createStringError("injected failure %d", s);
        int64_t v = s;
        for (unsigned i = 0; i < ctx.numInputs(); ++i) v += *static_cast<int64_t *>(ctx.in(i));
        *static_cast<int64_t *>(ctx.out(0)) = v;
        return llvm::Error::success();
      };
      ASSERT_TRUE(bool(b.addStep("step" + std::to_string(s), StepKind::kOther, fn, ins, {id})));
    }
    auto exe = b.build();
    ASSERT_TRUE(bool(exe)) << llvm::toString(exe.takeError());

    // Sequential reference: value or "failed" per step.
    auto reference = [&](const std::vector<int64_t> &in) {
      std::vector<std::optional<int64_t>> val(numInputs + numSteps);
      for (int i = 0; i < numInputs; ++i) val[i] = in[i];
      for (int s = 0; s < numSteps; ++s) {
        bool ok = !fails[s];
        int64_t v = s;
        for (int x : stepInputs[s]) {
          if (!val[x]) ok = false;
          else v += *val[x];
        }
        if (ok) val[numInputs + s] = v;
      }
      std::vector<std::optional<int64_t>> outs;
      for (int s = 0; s < numSteps; ++s)
        if (isSink[s]) outs.push_back(val[numInputs + s]);
      return outs;
    };

    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        for (int call = 0; call < 30; ++call) {
          std::vector<int64_t> in = {t, call, graph};
          auto want = reference(in);
          ExecuteOptions opts;
          bool cancel = call % 7 == 3;
          if (cancel) {
            opts.cancel = std::make_shared<CancellationToken>();
            opts.cancel->cancel();
          }
          auto outs = (*exe)->execute({scalar(in[0]), scalar(in[1]), scalar(in[2])}, ex, opts);
          for (size_t o = 0; o < outs.size(); ++o) {
            outs[o]->await();
            if (cancel) {
              if (!outs[o]->isError()) ++mismatches;
            } else if (bool(want[o]) != outs[o]->isConcrete() ||
                       (want[o] && valueOf(outs[o]->get()) != *want[o])) {
              ++mismatches;
            }
          }
        }
      });
    for (auto &th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << "graph " << graph;
  }
  ex.waitIdle();
}

// Each shape a module ran keeps an idle execution (its arena) for its next
// call. Under a memory limit those of earlier shapes are given back when a
// new one needs the room: a stream of new batch sizes failed at its 11th
// under a 1 GiB limit while one call needed 133 MiB.
TEST(Executable, IdleArenasAreGivenBackWhenANewOneNeedsTheRoom) {
  HostExecutor ex(2);
  const int64_t elements = int64_t(8) << 20 >> 3;  // an 8 MiB intermediate
  auto build = [&] {
    ExecutableBuilder b;
    int x = b.addInput(i64({1}));
    int big = b.addIntermediate(i64({elements}));
    int y = b.addOutput(i64({1}));
    EXPECT_TRUE(bool(b.addStep("fill", StepKind::kOther, sumStep(1), {x}, {big})));
    EXPECT_TRUE(bool(b.addStep("read", StepKind::kOther, sumStep(1), {big}, {y})));
    return b.build();
  };
  auto first = build(), second = build();
  ASSERT_TRUE(first && second);
  ASSERT_GE((*first)->planStats().arenaBytes, size_t(8) << 20);
  auto out = (*first)->run({scalar(3)}, ex);
  ASSERT_TRUE(bool(out));
  EXPECT_EQ(valueOf((*out)[0]), 3 + 2);  // each step adds 1
  out->clear();
  ex.waitIdle();
  ASSERT_EQ((*first)->pooledExecutions(), 1u);
  // Room for one arena, not two.
  setTensorMemoryLimit(tensorMemoryInUse() + (6 << 20));
  auto again = (*second)->run({scalar(4)}, ex);
  setTensorMemoryLimit(0);
  ASSERT_TRUE(bool(again)) << toStatus(again.takeError()).message;
  EXPECT_EQ(valueOf((*again)[0]), 4 + 2);
  EXPECT_EQ((*first)->pooledExecutions(), 0u);  // given back
  // The first still runs: a new arena when its call comes.
  auto third = (*first)->run({scalar(5)}, ex);
  ASSERT_TRUE(bool(third));
  EXPECT_EQ(valueOf((*third)[0]), 5 + 2);
}
