// End-to-end model latency and compile latency for the built-in models.
//
//   BM_ModelCall/<model>       steady-state latency of Module::call (sync)
//   BM_ModelCallAsync/<model>  throughput with 8 calls in flight
//   BM_FirstCall/<model>       load + JIT-compile + first run, fresh Runtime and Module each time
//   BM_CompileChain/<n>/<mode> compile time of a chain of n (1k, 10k, 100k) tosa.add ops (mode 0: JIT, 1: all
//                              kernels); ms per op shows whether compile work stays linear
#include "bench/BenchCommon.h"
#include "api/Kiln.h"
#include "lowering/graph/GraphBuilder.h"
#include "lowering/models/BuiltinModels.h"

#include <benchmark/benchmark.h>

#include <chrono>

using namespace kiln;

namespace {
// No disk cache: BM_FirstCall measures real compiles (kiln_cache_bench
// measures warm starts).
Runtime &runtime() { return bench::sharedRuntime(); }
Tensor inputFor(const FunctionSignature &sig) {
  TensorType t = sig.args[0].type;
  for (int64_t &d : t.shape)
    if (d < 0) d = 1;
  Tensor x = Tensor::empty(t.dtype, t.shape);
  for (int64_t i = 0; i < x.numElements(); ++i) x.data<float>()[i] = float(i % 7) * 0.1f;
  return x;
}
const char *modelName(int64_t i) { return i == 0 ? "mlp" : "cnn"; }
}  // namespace

static void BM_ModelCall(benchmark::State &state) {
  const auto *model = models::findBuiltinModel(modelName(state.range(0)));
  auto m = llvm::cantFail(runtime().loadModule(model->mlir, model->name));
  Tensor x = inputFor(m->functions()[0]);
  llvm::cantFail(m->call("main", {x}).takeError());
  for (auto _ : state) {
    auto out = m->call("main", {x});
    if (!out) state.SkipWithError(llvm::toString(out.takeError()).c_str());
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(model->name);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ModelCall)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

static void BM_ModelCallAsync(benchmark::State &state) {
  const auto *model = models::findBuiltinModel(modelName(state.range(0)));
  auto m = llvm::cantFail(runtime().loadModule(model->mlir, model->name));
  Tensor x = inputFor(m->functions()[0]);
  llvm::cantFail(m->call("main", {x}).takeError());
  for (auto _ : state) {
    std::vector<AsyncValueRef<Tensor>> inflight;
    for (int i = 0; i < 8; ++i) inflight.push_back(m->callAsync("main", {x})[0]);
    for (auto &f : inflight) f->await();
  }
  state.SetLabel(model->name);
  state.SetItemsProcessed(state.iterations() * 8);
}
BENCHMARK(BM_ModelCallAsync)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

static void BM_FirstCall(benchmark::State &state) {
  const auto *model = models::findBuiltinModel(modelName(state.range(0)));
  for (auto _ : state) {
    // A fresh runtime each time: the runtime-wide cache must not serve the code.
    state.PauseTiming();
    auto fresh = bench::makeRuntime();
    state.ResumeTiming();
    auto m = llvm::cantFail(fresh->loadModule(model->mlir, model->name));
    Tensor x = inputFor(m->functions()[0]);
    auto out = m->call("main", {x});
    if (!out) state.SkipWithError(llvm::toString(out.takeError()).c_str());
  }
  state.SetLabel(model->name);
}
BENCHMARK(BM_FirstCall)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

static void BM_CompileChain(benchmark::State &state) {
  int64_t n = state.range(0);
  auto rt = bench::makeRuntime(state.range(1) ? "*=kernel" : "");
  TensorType t{DType::f32, {16}};
  double ms = 0;
  for (auto _ : state) {
    lowering::GraphBuilder g("main", "chain");
    auto x = g.argument(t);
    auto v = x;
    for (int64_t i = 0; i < n; ++i) v = llvm::cantFail(g.op("tosa.add", {v, x}, {}, {t}))[0];
    auto t0 = std::chrono::steady_clock::now();
    auto m = llvm::cantFail(rt->loadProgram(llvm::cantFail(g.finish({v}))));
    llvm::cantFail(m->compile("main", {t}).takeError());
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  state.counters["ops"] = double(n);
  state.counters["compile_ms_per_1k_ops"] = ms / double(state.iterations()) / (double(n) / 1000);
}
BENCHMARK(BM_CompileChain)
    ->Args({1000, 0})->Args({10000, 0})->Args({100000, 0})->Args({1000, 1})->Args({10000, 1})->Args({100000, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

BENCHMARK_MAIN();
