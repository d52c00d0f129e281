// Eager dispatch overhead and eager vs captured graphs (issue: eager API).
//
//   BM_EagerAddSync        cached 1-element f32 add, value read every time (target <= 100 ns);
//                          traced_ns_per_op: the same with a profiler recording
//   BM_EagerAddAsync       the same dispatch without reading the value
//   BM_EagerAddExecutor    the same op forced through the executor (async values)
//   BM_TorchAdd            libtorch's at::add on a 1-element tensor, when built with libtorch;
//                          counter kiln_speedup = torch ns / kiln ns (target >= 4)
//   BM_EagerMlpStep        a 100-op MLP step run eagerly
//   BM_TracedMlpStep       the same function captured with trace() and compiled
#include "api/Eager.h"
#include "runtime/Trace.h"

#include "bench/BenchCommon.h"

#include <benchmark/benchmark.h>

#include <chrono>

#if defined(KILN_HAVE_TORCH)
#include <torch/torch.h>
#endif

using namespace kiln;
using namespace kiln::eager;

namespace {
Runtime &runtime() { return bench::sharedRuntime(); }

double kilnAddNs() {  // measured once for the libtorch ratio
  Context ctx(runtime());
  Tensor a = Tensor::fromVector<float>(DType::f32, {1}, std::vector<float>{1.0f});
  EagerTensor x(a);
  (void)ctx.add(x, x).value();
  const int n = 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(ctx.add(x, x));
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

Tensor filled(std::vector<int64_t> shape, float v) {
  Tensor t = Tensor::empty(DType::f32, shape);
  for (int64_t i = 0; i < t.numElements(); ++i) t.data<float>()[i] = v * float(1 + i % 7);
  return t;
}

// 33 layers of matmul + add + relu, then softmax: about 100 eager ops.
struct Mlp {
  std::vector<Tensor> w, b;
  Mlp() {
    for (int l = 0; l < 33; ++l) {
      w.push_back(filled({32, 32}, 0.01f));
      b.push_back(filled({1, 32}, 0.001f));
    }
  }
  std::vector<EagerTensor> operator()(Context &c, llvm::ArrayRef<EagerTensor> in) const {
    EagerTensor h = in[0];
    for (size_t l = 0; l < w.size(); ++l) h = c.relu(c.add(c.matmul(h, w[l]), b[l]));
    return {c.softmax(h, 1)};
  }
};
}  // namespace

static void BM_EagerAddSync(benchmark::State &state) {
  Context ctx(runtime());
  EagerTensor x(Tensor::fromVector<float>(DType::f32, {1}, std::vector<float>{1.5f}));
  for (auto _ : state) {
    auto v = ctx.add(x, x).value();
    benchmark::DoNotOptimize(v->rawData());
  }
  state.SetItemsProcessed(state.iterations());
  // The same dispatch while a profiler records every op, timed after the
  // benchmark's own (profiler off) loop: what recording costs per op.
  const int n = 20000;
  runtime().executor().setTrace(std::make_shared<TraceRecorder>());
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(ctx.add(x, x).value()->rawData());
  double traced = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  runtime().executor().setTrace(nullptr);
  state.counters["traced_ns_per_op"] = traced;
}
BENCHMARK(BM_EagerAddSync);

static void BM_EagerAddAsync(benchmark::State &state) {
  Context ctx(runtime());
  EagerTensor x(Tensor::fromVector<float>(DType::f32, {1}, std::vector<float>{1.5f}));
  for (auto _ : state) benchmark::DoNotOptimize(ctx.add(x, x));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EagerAddAsync);

static void BM_EagerAddExecutor(benchmark::State &state) {
  Context ctx(runtime());
  ctx.setInlineLimit(0);  // everything through the executor
  EagerTensor x(Tensor::fromVector<float>(DType::f32, {1}, std::vector<float>{1.5f}));
  for (auto _ : state) {
    auto v = ctx.add(x, x).value();
    benchmark::DoNotOptimize(v->rawData());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EagerAddExecutor);

#if defined(KILN_HAVE_TORCH)
static void BM_TorchAdd(benchmark::State &state) {
  at::Tensor a = at::ones({1});
  for (auto _ : state) benchmark::DoNotOptimize(at::add(a, a));
  double torchNs = 0;
  {
    const int n = 200000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(at::add(a, a));
    torchNs = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  }
  double kilnNs = kilnAddNs();
  state.counters["torch_ns"] = torchNs;
  state.counters["kiln_ns"] = kilnNs;
  state.counters["kiln_speedup"] = torchNs / kilnNs;
}
BENCHMARK(BM_TorchAdd);
#else
static void BM_TorchAdd(benchmark::State &state) {
  state.SkipWithError("libtorch not found at build time (install libtorch-dev and rebuild to compare)");
  for (auto _ : state) {
  }
  state.counters["kiln_ns"] = kilnAddNs();
}
BENCHMARK(BM_TorchAdd)->Iterations(1);
#endif

static void BM_EagerMlpStep(benchmark::State &state) {
  Context ctx(runtime());
  Mlp mlp;
  EagerTensor x(filled({1, 32}, 0.1f));
  for (auto _ : state) {
    auto out = mlp(ctx, {x})[0].value();
    benchmark::DoNotOptimize(out->rawData());
  }
  state.counters["ops_per_step"] = double(ctx.stats().dispatches) / double(state.iterations() + 1);
}
BENCHMARK(BM_EagerMlpStep)->Unit(benchmark::kMicrosecond);

static void BM_TracedMlpStep(benchmark::State &state) {
  Context ctx(runtime());
  Mlp mlp;
  Tensor x = filled({1, 32}, 0.1f);
  auto traced = llvm::cantFail(trace(ctx, std::cref(mlp), {x.type()}));
  llvm::cantFail(traced.call({x}).takeError());
  for (auto _ : state) {
    auto out = traced.call({x});
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_TracedMlpStep)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
