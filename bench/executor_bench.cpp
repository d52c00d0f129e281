// Executor overhead and scaling (issue: asynchronous host runtime).
//
//   BM_ChainOfEmptySteps     per-step overhead on a chain of 10,000 empty steps
//                            (counter ns_per_step; target <= 50 ns); profiler
//                            off and on alternate in one run: ns_per_step is
//                            with it off (what every call pays), traced_ns_per_step
//                            with every step recorded
//   BM_FanOutFanIn           independent ~10 us steps between a root and a sink,
//                            run on 1 and on 2 worker threads in the same
//                            benchmark, 10 executions back to back per sample
//                            (counter speedup_2_over_1; target >= 1.8)
//   BM_ConcurrentCalls       many callers running one small Executable at once
#include "runtime/Executable.h"
#include "runtime/Executor.h"
#include "runtime/Trace.h"

#include <benchmark/benchmark.h>

#include <chrono>

using namespace kiln;

namespace {

std::shared_ptr<Executable> chain(int steps) {
  ExecutableBuilder b;
  int out = b.addOutput(TensorType{DType::i64, {1}});
  int prev = -1;
  for (int i = 0; i < steps; ++i) {
    bool last = i == steps - 1;
    auto s = b.addStep("s", StepKind::kOther,
                       [](const StepContext &) { return llvm::Error::success(); }, {},
                       last ? llvm::ArrayRef<int>(out) : llvm::ArrayRef<int>());
    if (prev >= 0) llvm::cantFail(b.addControlDependency(prev, *s));
    prev = *s;
  }
  return llvm::cantFail(b.build());
}

void spin(double us) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

std::shared_ptr<Executable> fanOut(int width, double stepUs) {
  ExecutableBuilder b;
  auto root = llvm::cantFail(b.addStep("root", StepKind::kOther,
                                       [](const StepContext &) { return llvm::Error::success(); },
                                       {}, {}));
  std::vector<int> mids;
  for (int i = 0; i < width; ++i) {
    auto s = llvm::cantFail(b.addStep("work", StepKind::kOther,
                                      [stepUs](const StepContext &) {
                                        spin(stepUs);
                                        return llvm::Error::success();
                                      },
                                      {}, {}));
    llvm::cantFail(b.addControlDependency(root, s));
    mids.push_back(s);
  }
  int out = b.addOutput(TensorType{DType::i64, {1}});
  auto sink = llvm::cantFail(b.addStep("sink", StepKind::kOther,
                                       [](const StepContext &) { return llvm::Error::success(); },
                                       {}, {out}));
  for (int m : mids) llvm::cantFail(b.addControlDependency(m, sink));
  return llvm::cantFail(b.build());
}

double timeRuns(const Executable &exe, HostExecutor &ex, int runs) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) {
    auto outs = exe.execute({}, ex);
    outs[0]->await();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

static void BM_ChainOfEmptySteps(benchmark::State &state) {
  const int steps = 10000;
  HostExecutor ex(2);
  auto exe = chain(steps);
  double seconds = 0, traced = 0;
  for (auto _ : state) {
    seconds += timeRuns(*exe, ex, 1);
    state.PauseTiming();
    ex.setTrace(std::make_shared<TraceRecorder>());  // a fresh recorder: no growth across samples
    traced += timeRuns(*exe, ex, 1);
    ex.setTrace(nullptr);
    state.ResumeTiming();
  }
  state.counters["ns_per_step"] = seconds * 1e9 / (double(steps) * double(state.iterations()));
  state.counters["traced_ns_per_step"] = traced * 1e9 / (double(steps) * double(state.iterations()));
}
BENCHMARK(BM_ChainOfEmptySteps)->Unit(benchmark::kMicrosecond)->UseRealTime();

static void BM_FanOutFanIn(benchmark::State &state) {
  const int width = int(state.range(0));
  const double stepUs = 10;
  auto exe = fanOut(width, stepUs);
  HostExecutor one(1), two(2);
  double t1 = 0, t2 = 0;
  int runs = 0;
  // Back-to-back executions (as a busy server would issue them), so the
  // numbers measure scheduling rather than waking sleeping workers.
  const int batch = 10;
  for (auto _ : state) {
    t1 += timeRuns(*exe, one, batch);
    t2 += timeRuns(*exe, two, batch);
    runs += batch;
  }
  state.counters["us_1_thread"] = t1 / runs * 1e6;
  state.counters["us_2_threads"] = t2 / runs * 1e6;
  state.counters["speedup_2_over_1"] = t1 / t2;
}
BENCHMARK(BM_FanOutFanIn)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();

static void BM_ConcurrentCalls(benchmark::State &state) {
  static HostExecutor *ex = new HostExecutor(2);
  static std::shared_ptr<Executable> exe = [] {
    ExecutableBuilder b;
    TensorType t{DType::f32, {256}};
    int in = b.addInput(t);
    int a = b.addIntermediate(t), c = b.addIntermediate(t), out = b.addOutput(t);
    auto scale = [](float k) {
      return [k](const StepContext &ctx) {
        auto *x = static_cast<const float *>(ctx.in(0));
        auto *y = static_cast<float *>(ctx.out(0));
        for (int i = 0; i < 256; ++i) y[i] = x[i] * k;
        return llvm::Error::success();
      };
    };
    llvm::cantFail(b.addStep("a", StepKind::kOther, scale(2), {in}, {a}));
    llvm::cantFail(b.addStep("b", StepKind::kOther, scale(3), {in}, {c}));
    llvm::cantFail(b.addStep("sum", StepKind::kOther,
                             [](const StepContext &ctx) {
                               auto *x = static_cast<const float *>(ctx.in(0));
                               auto *z = static_cast<const float *>(ctx.in(1));
                               auto *y = static_cast<float *>(ctx.out(0));
                               for (int i = 0; i < 256; ++i) y[i] = x[i] + z[i];
                               return llvm::Error::success();
                             },
                             {a, c}, {out}));
    return llvm::cantFail(b.build());
  }();
  Tensor x = Tensor::empty(DType::f32, {256});
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = float(i);
  for (auto _ : state) {
    auto outs = exe->run({x}, *ex);
    benchmark::DoNotOptimize(outs);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConcurrentCalls)->ThreadRange(1, 4)->UseRealTime();

BENCHMARK_MAIN();
