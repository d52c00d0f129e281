// Tiered execution (RuntimeOptions::compilePolicy): a call of a shape with
// no compiled code runs at once on a plan of handwritten kernels while the
// JIT compile runs in the background; later calls switch to the compiled
// code. A fault-injection hook holds the compiler, so the tests see what
// calls do before the compile finishes.
#include "api/Kiln.h"
#include "jit/CompileService.h"
#include "jit/Compiler.h"
#include "lowering/models/BuiltinModels.h"
#include "tests/TestUtil.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace kiln;

namespace {

using Policy = RuntimeOptions::CompilePolicy;

/// Where the compile service's JIT compiles wait until the test opens it
/// (at most two minutes, so that a broken test fails rather than hangs).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};
  void wait() {
    ++entered;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::minutes(2), [&] { return open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

RuntimeOptions options(Policy policy) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.compilePolicy = policy;
  o.placement.measure = false;  // the same placement in every runtime
  o.batchRanges = false;         // one plan and one compile per signature (BatchRangeTest has both together)
  o.hotShapeCalls = 1;           // every shape compiles behind its first call (DeferredShapes* test the deferral)
  return o;
}

std::unique_ptr<Runtime> runtimeHeldBy(Policy policy, const std::shared_ptr<Gate> &gate) {
  jit::FaultInjection faults;
  faults.beforeCompile = [gate] { gate->wait(); };
  return test::takeOrFail(Runtime::createWithFaults(options(policy), faults));
}

const std::string &mlp() { return models::findBuiltinModel("mlp")->mlir; }

/// The mlp's output for `x`, compiled the plain way (policy wait).
std::vector<double> reference(const Tensor &x) {
  auto rt = test::takeOrFail(Runtime::create(options(Policy::kWait)));
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  return test::asDoubles(test::takeOrFail(m->call("main", {x}))[0]);
}

TEST(TieredExecution, FirstCallRunsOnKernelsWhileTheCompilerIsHeld) {
  auto gate = std::make_shared<Gate>();
  auto rt = runtimeHeldBy(Policy::kTiered, gate);
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  auto open = llvm::scope_exit([&] { gate->release(); });  // before the module waits for its compile
  Tensor x = test::randomTensor({5, 64}, 3);
  std::vector<double> want = reference(x);

  auto first = test::takeOrFail(m->call("main", {x}));  // returns while the compile is held
  EXPECT_TRUE(test::allClose(test::asDoubles(first[0]), want, 1e-5, 1e-6));
  auto second = test::takeOrFail(m->call("main", {x}));
  EXPECT_TRUE(test::allClose(test::asDoubles(second[0]), want, 1e-5, 1e-6));
  Module::TierStats held = m->tierStats();
  EXPECT_EQ(held.kernelPlanCalls, 2u);
  EXPECT_EQ(held.backgroundCompiles, 1u);  // once per signature
  EXPECT_EQ(held.swaps, 0u);
  EXPECT_EQ(m->numCompiled(), 0u);
  // Another shape's first call does not queue behind the held compile: it
  // runs on its own plan, its compile queued after the first.
  Tensor x7 = test::randomTensor({7, 64}, 4);
  auto other = test::takeOrFail(m->call("main", {x7}));
  EXPECT_TRUE(test::allClose(test::asDoubles(other[0]), reference(x7), 1e-5, 1e-6));
  EXPECT_EQ(m->tierStats().backgroundCompiles, 2u);
  EXPECT_EQ(gate->entered.load(), 1);  // one compile at a time

  gate->release();
  m->waitForBackgroundCompiles();
  EXPECT_EQ(gate->entered.load(), 2);
  Module::TierStats after = m->tierStats();
  EXPECT_EQ(after.swaps, 2u);
  EXPECT_EQ(m->numCompiled(), 2u);
  auto third = test::takeOrFail(m->call("main", {x}));  // on the compiled code
  EXPECT_TRUE(test::allClose(test::asDoubles(third[0]), want, 1e-5, 1e-6));
  EXPECT_EQ(m->tierStats().kernelPlanCalls, 3u);
  ASSERT_EQ(after.events.size(), 2u);
  EXPECT_NE(after.events[0].find("@main (5x64xf32): kernel plan ready in"), std::string::npos) << after.events[0];
  EXPECT_NE(after.events[0].find("compiled code from"), std::string::npos) << after.events[0];
  auto code = test::takeOrFail(m->compile("main", {TensorType{DType::f32, {5, 64}}}));
  EXPECT_GT(code->stats.kernelsCompiled, 0);  // JIT code, not the kernel plan
}

// The compile behind a first call on a kernel plan starts once that call
// has answered (Module::RunGate): on two cores, a compile's threads beside
// the call took one core for the call's whole run. A big batch makes the
// run long enough that a compile starting beside it would enter first.
TEST(TieredExecution, TheCompileBehindAFirstCallStartsWhenItHasAnswered) {
  std::mutex mu;
  std::vector<AsyncValueRef<Tensor>> firstResults;
  std::atomic<int> enteredBeforeTheAnswer{0}, entered{0};
  jit::FaultInjection faults;
  faults.beforeCompile = [&] {
    std::lock_guard<std::mutex> lock(mu);  // firstResults is assigned
    ++entered;
    for (const auto &r : firstResults)
      if (!r->isAvailable()) ++enteredBeforeTheAnswer;
  };
  auto rt = test::takeOrFail(Runtime::createWithFaults(options(Policy::kTiered), faults));
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  Tensor x = test::randomTensor({20000, 64}, 5);
  {
    std::lock_guard<std::mutex> lock(mu);
    firstResults = m->callAsync("main", {x});
  }
  for (const auto &r : firstResults) ASSERT_TRUE(bool(r.awaitValue()));
  m->waitForBackgroundCompiles();
  EXPECT_EQ(entered.load(), 1);
  EXPECT_EQ(enteredBeforeTheAnswer.load(), 0);
  EXPECT_EQ(m->tierStats().swaps, 1u);
}

TEST(TieredExecution, ConcurrentCallersAcrossTheSwap) {
  auto gate = std::make_shared<Gate>();
  auto rt = runtimeHeldBy(Policy::kTiered, gate);
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  auto open = llvm::scope_exit([&] { gate->release(); });
  Tensor x = test::randomTensor({3, 64}, 7);
  std::vector<double> want = reference(x);
  constexpr int kThreads = 4, kCalls = 40;
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto r = m->call("main", {x});
        if (!r || !test::allClose(test::asDoubles((*r)[0]), want, 1e-5, 1e-6)) ++bad;
        if (!r) llvm::consumeError(r.takeError());
        ++done;
      }
    });
  while (done.load() < 8) std::this_thread::yield();  // some calls ran on the plan
  gate->release();  // the swap happens while the threads call
  for (auto &t : threads) t.join();
  m->waitForBackgroundCompiles();
  EXPECT_EQ(bad.load(), 0);
  Module::TierStats s = m->tierStats();
  EXPECT_EQ(s.backgroundCompiles, 1u);
  EXPECT_EQ(s.swaps, 1u);
  EXPECT_GE(s.kernelPlanCalls, 8u);
  EXPECT_EQ(m->numCompiled(), 1u);
}

TEST(TieredExecution, KernelsOnlyNeverCompilesJitCode) {
  auto gate = std::make_shared<Gate>();
  gate->release();
  auto rt = runtimeHeldBy(Policy::kKernelsOnly, gate);
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  Tensor x = test::randomTensor({2, 64}, 5);
  auto r = test::takeOrFail(m->call("main", {x}));
  EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), reference(x), 1e-5, 1e-6));
  EXPECT_EQ(gate->entered.load(), 0);
  auto code = test::takeOrFail(m->compile("main", {TensorType{DType::f32, {2, 64}}}));
  EXPECT_EQ(code->stats.kernelsCompiled, 0);
  EXPECT_NE(code->placementSummary().find(": 0 JIT in 0 kernels"), std::string::npos) << code->placementSummary();
  EXPECT_EQ(m->tierStats().backgroundCompiles, 0u);
}

TEST(TieredExecution, CodeInTheDiskCacheServesTheFirstCall) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-tiered", dir));
  auto cleanup = llvm::scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
  Tensor x = test::randomTensor({4, 64}, 9);
  {
    RuntimeOptions o = options(Policy::kWait);
    o.cacheMode = CacheMode::kReadWrite;
    o.cacheDir = dir.str().str();
    auto rt = test::takeOrFail(Runtime::create(o));
    auto m = test::takeOrFail(rt->loadModule(mlp()));
    ASSERT_TRUE(bool(m->call("main", {x})));
  }
  auto gate = std::make_shared<Gate>();  // never opened: no compile may wait on it
  jit::FaultInjection faults;
  faults.beforeCompile = [gate] { ++gate->entered; };
  RuntimeOptions o = options(Policy::kTiered);
  o.cacheMode = CacheMode::kReadWrite;
  o.cacheDir = dir.str().str();
  auto rt = test::takeOrFail(Runtime::createWithFaults(o, faults));
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  auto r = test::takeOrFail(m->call("main", {x}));
  EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), reference(x), 1e-5, 1e-6));
  EXPECT_EQ(m->tierStats().kernelPlanCalls, 0u);
  EXPECT_EQ(gate->entered.load(), 0);
  EXPECT_EQ(rt->compileService().stats().diskHits, 1u);
}

// A kernel plan is written to the disk cache after its call returns (off
// the call's path); the runtime's end waits for the write, and the next
// process's first call loads the plan instead of building it.
TEST(TieredExecution, KernelPlansReachTheDiskCacheAfterTheirCall) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-plans", dir));
  auto cleanup = llvm::scope_exit([&] { llvm::sys::fs::remove_directories(dir); });
  Tensor x = test::randomTensor({4, 64}, 11);
  auto run = [&] {
    RuntimeOptions o = options(Policy::kKernelsOnly);
    o.cacheMode = CacheMode::kReadWrite;
    o.cacheDir = dir.str().str();
    auto rt = test::takeOrFail(Runtime::create(o));
    auto m = test::takeOrFail(rt->loadModule(mlp()));
    auto r = test::takeOrFail(m->call("main", {x}));
    EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), reference(x), 1e-5, 1e-6));
    m.reset();
    return rt->compileService().stats();
  };
  jit::CompileServiceStats first = run();
  EXPECT_EQ(first.kernelPlans, 1u);
  EXPECT_EQ(first.diskHits, 0u);
  jit::CompileServiceStats second = run();
  EXPECT_EQ(second.diskHits, 1u);
  EXPECT_EQ(second.kernelPlans, 0u);
}

TEST(TieredExecution, PolicyFromTheEnvironment) {
  ::setenv("KILN_COMPILE_POLICY", "tiered", 1);
  auto o = RuntimeOptions::fromEnvironment();
  ASSERT_TRUE(bool(o));
  EXPECT_EQ(o->compilePolicy, Policy::kTiered);
  RuntimeOptions explicitWait;
  explicitWait.compilePolicy = Policy::kWait;  // explicit options win
  EXPECT_EQ(test::takeOrFail(RuntimeOptions::fromEnvironment(explicitWait)).compilePolicy, Policy::kWait);
  ::setenv("KILN_COMPILE_POLICY", "eager", 1);
  std::string err = test::errorOf(RuntimeOptions::fromEnvironment());
  ::unsetenv("KILN_COMPILE_POLICY");
  EXPECT_NE(err.find("KILN_COMPILE_POLICY='eager': expected wait, tiered or kernels-only"), std::string::npos) << err;
  EXPECT_EQ(parseCompilePolicy("kernels-only"), Policy::kKernelsOnly);
  EXPECT_STREQ(compilePolicyName(Policy::kTiered), "tiered");
}

// A function with a dynamic dimension (here the mlp's rows, with the batch
// range code off: as a sequence length is) compiles a shape only once it is
// hot: called hotShapeCalls times, and at least once in 16 of the calls the
// kernel plans served. A stream of ever-new sizes runs on kernel plans and
// compiles none of them.
TEST(TieredExecution, DeferredShapesCompileWhenHot) {
  RuntimeOptions o = options(Policy::kTiered);
  o.hotShapeCalls = 3;
  auto rt = test::takeOrFail(Runtime::create(o));
  auto m = test::takeOrFail(rt->loadModule(mlp()));
  Tensor x = test::randomTensor({5, 64}, 3);
  std::vector<double> want = reference(x);
  for (int i = 0; i < 2; ++i) {
    auto r = test::takeOrFail(m->call("main", {x}));
    EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), want, 1e-5, 1e-6));
  }
  Module::TierStats s = m->tierStats();
  EXPECT_EQ(s.kernelPlanCalls, 2u);
  EXPECT_EQ(s.deferredShapes, 1u);
  EXPECT_EQ(s.backgroundCompiles, 0u);
  test::takeOrFail(m->call("main", {x}));  // the third call: hot
  m->waitForBackgroundCompiles();
  s = m->tierStats();
  EXPECT_EQ(s.hotShapeCompiles, 1u);
  EXPECT_EQ(s.backgroundCompiles, 1u);
  EXPECT_EQ(s.swaps, 1u);
  EXPECT_EQ(m->numCompiled(), 1u);
  ASSERT_EQ(s.events.size(), 1u);
  EXPECT_NE(s.events[0].find("@main (5x64xf32): kernel plan ready in"), std::string::npos) << s.events[0];
  EXPECT_NE(s.events[0].find("hot after 3 calls; compiled code from"), std::string::npos) << s.events[0];

  // 59 new sizes, each called once: all on kernel plans, no compile.
  for (int64_t rows = 1; rows <= 60; ++rows) {
    if (rows == 5) continue;
    Tensor xr = test::randomTensor({rows, 64}, unsigned(rows));
    auto r = test::takeOrFail(m->call("main", {xr}));
    if (rows % 20 == 1) {
      EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), reference(xr), 1e-5, 1e-6));
    }
  }
  s = m->tierStats();
  EXPECT_EQ(s.kernelPlanCalls, 62u);
  EXPECT_EQ(s.deferredShapes, 60u);
  EXPECT_EQ(s.backgroundCompiles, 1u);
  // Among 62 plan calls, three calls of a new size are not hot (3 x 16 <
  // 65); the fifth is (5 x 16 >= 67).
  Tensor x64 = test::randomTensor({64, 64}, 64);
  for (int i = 0; i < 4; ++i) test::takeOrFail(m->call("main", {x64}));
  EXPECT_EQ(m->tierStats().backgroundCompiles, 1u);
  test::takeOrFail(m->call("main", {x64}));
  m->waitForBackgroundCompiles();
  EXPECT_EQ(m->tierStats().hotShapeCompiles, 2u);
  EXPECT_EQ(m->numCompiled(), 2u);
  auto r = test::takeOrFail(m->call("main", {x64}));  // on the compiled code
  EXPECT_TRUE(test::allClose(test::asDoubles(r[0]), reference(x64), 1e-5, 1e-6));
}

TEST(TieredExecution, HotShapeCallsFromTheEnvironment) {
  ::setenv("KILN_HOT_SHAPE_CALLS", "0", 1);
  std::string err = test::errorOf(RuntimeOptions::fromEnvironment());
  EXPECT_NE(err.find("KILN_HOT_SHAPE_CALLS='0': expected a number of calls (at least 1)"), std::string::npos) << err;
  ::setenv("KILN_HOT_SHAPE_CALLS", "4", 1);
  auto o = RuntimeOptions::fromEnvironment();
  ::unsetenv("KILN_HOT_SHAPE_CALLS");
  ASSERT_TRUE(bool(o));
  EXPECT_EQ(o->hotShapeCalls, 4);
  EXPECT_EQ(test::takeOrFail(RuntimeOptions::fromEnvironment()).hotShapeCalls, 2);
}

/// y = x (1x256) times a 256x256 weight (256 KiB: a huge-page candidate)
/// whose columns alternate 1.0 and 0.5.
std::string bigWeightModel() {
  std::string hex;
  for (int i = 0; i < 256 * 256 / 2; ++i) hex += "0000803F0000003F";
  return "func.func @main(%x: tensor<1x1x256xf32>) -> tensor<1x1x256xf32> {\n"
         "  %w = \"tosa.const\"() <{values = dense<\"0x" + hex +
         "\"> : tensor<1x256x256xf32>}> : () -> tensor<1x256x256xf32>\n"
         "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
         "  %y = tosa.matmul %x, %w, %zp, %zp : (tensor<1x1x256xf32>, tensor<1x256x256xf32>, tensor<1xf32>, "
         "tensor<1xf32>) -> tensor<1x1x256xf32>\n"
         "  return %y : tensor<1x1x256xf32>\n}\n";
}

// A first call that waits for its code does not also wait for the weights'
// copy into huge pages: that runs after the code is returned (on the
// blocking pool), the call reading the weights where they are. Code compiled
// ahead of calls (Module::compile: prewarming) moves them before it returns.
TEST(TieredExecution, FirstCallLeavesTheMoveIntoHugePagesToTheBackground) {
  Tensor x = Tensor::fromVector<float>(DType::f32, {1, 1, 256}, std::vector<float>(256, 1.0f));
  auto check = [](const std::vector<Tensor> &y) {
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].data<float>()[10], 256.0f);
    EXPECT_EQ(y[0].data<float>()[11], 128.0f);
  };
  RuntimeOptions o = options(Policy::kWait);
  o.hugePageWeights = true;
  {
    auto rt = test::takeOrFail(Runtime::create(o));
    auto m = test::takeOrFail(rt->loadModule(bigWeightModel()));
    check(test::takeOrFail(m->call("main", {x})));
    auto fn = test::takeOrFail(m->compile("main", {x.type()}));  // the code the call ran
    for (const lowering::StageTime &t : fn->stats.stages) EXPECT_NE(t.stage, "huge-pages");
    m->waitForBackgroundCompiles();  // and the weight moves
    jit::CompileServiceStats s = rt->compileService().stats();
    EXPECT_GE(s.hugePageBytes, 256u * 256 * 4);
    check(test::takeOrFail(m->call("main", {x})));  // reading the huge-page copy
  }
  auto rt = test::takeOrFail(Runtime::create(o));
  auto m = test::takeOrFail(rt->loadModule(bigWeightModel()));
  auto fn = test::takeOrFail(m->compile("main", {x.type()}));
  EXPECT_TRUE(llvm::any_of(fn->stats.stages, [](const lowering::StageTime &t) { return t.stage == "huge-pages"; }));
  EXPECT_EQ(rt->compileService().stats().hugePageBytes, 0u);
  check(test::takeOrFail(m->call("main", {x})));
}

}  // namespace
