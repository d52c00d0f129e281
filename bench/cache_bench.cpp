// Compile-cache latency (issue: compile cache).
//
//   BM_SignatureHashAndLookup  build + hash a 4-input shape signature and find
//                              the compiled code for it (target <= 50 ns)
//   BM_FirstCallColdVsWarm     per built-in model, in one run: the first call
//                              with an empty cache (compile) and the first call
//                              of a fresh Runtime + Module over a warm disk cache
//                              (what a new process does); counters cold_ms,
//                              warm_ms, speedup (target >= 20x) and
//                              mlir_pipeline_runs_warm (must be 0)
#include "bench/BenchCommon.h"
#include "cache/CacheKey.h"
#include "cache/CacheKey.h"
#include "jit/CompileService.h"
#include "api/Kiln.h"
#include "lowering/models/BuiltinModels.h"

#include "llvm/Support/FileSystem.h"

#include <benchmark/benchmark.h>

#include <chrono>

using namespace kiln;

static void BM_SignatureHashAndLookup(benchmark::State &state) {
  // A module compiled for one 4-input signature; the benchmark measures the
  // call path's lookup: signature from the input tensors, hash, table probe.
  const char *mlir = R"mlir(
func.func @main(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %c: tensor<?x8xf32>, %d: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = tosa.add %a, %b : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %1 = tosa.add %c, %d : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %2 = tosa.add %0, %1 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %2 : tensor<?x8xf32>
}
)mlir";
  auto rt = bench::makeRuntime();
  auto m = llvm::cantFail(rt->loadModule(mlir, "add4"));
  std::vector<Tensor> in(4, Tensor::empty(DType::f32, {2, 8}));
  std::vector<TensorType> types(4, in[0].type());
  llvm::cantFail(m->compile("main", types).takeError());
  for (int64_t b = 3; b < 10; ++b)  // more signatures in the table
    llvm::cantFail(m->compile("main", std::vector<TensorType>(4, TensorType{DType::f32, {b, 8}})).takeError());
  for (auto _ : state) {
    auto fn = m->compile("main", types);  // the same lookup Module::call does first
    benchmark::DoNotOptimize(fn->get());
    llvm::consumeError(fn.takeError());
  }
}
BENCHMARK(BM_SignatureHashAndLookup);

static void BM_SignatureHashOnly(benchmark::State &state) {
  std::vector<Tensor> in = {Tensor::empty(DType::f32, {1, 224, 224, 3}), Tensor::empty(DType::f32, {64}),
                            Tensor::empty(DType::i64, {1, 7}), Tensor::empty(DType::f32, {3, 3, 3})};
  for (auto _ : state) {
    auto sig = cache::ShapeSignature::of(in);
    benchmark::DoNotOptimize(sig.hash());
  }
}
BENCHMARK(BM_SignatureHashOnly);

static void BM_FirstCallColdVsWarm(benchmark::State &state) {
  const auto *model = models::findBuiltinModel(state.range(0) == 0 ? "mlp" : "cnn");
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("kiln-cache-bench", dir);
  auto firstCall = [&](bool clearFirst, uint64_t *pipelineRuns) {
    RuntimeOptions o;
    o.cacheDir = dir.str().str();
    o.cacheMode = CacheMode::kReadWrite;
    auto rt = llvm::cantFail(Runtime::create(o));
    if (clearFirst) llvm::cantFail(rt->compileService().disk().clear().takeError());
    auto t0 = std::chrono::steady_clock::now();
    auto m = llvm::cantFail(rt->loadModule(model->mlir, model->name));
    TensorType t = m->functions()[0].args[0].type;
    for (int64_t &d : t.shape)
      if (d < 0) d = 1;
    Tensor x = Tensor::empty(t.dtype, t.shape);
    std::memset(x.rawData(), 0, x.byteSize());
    auto out = m->call("main", {x});
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!out) state.SkipWithError(llvm::toString(out.takeError()).c_str());
    if (pipelineRuns) *pipelineRuns = m->pipelineRuns();
    return ms;
  };
  double cold = 0, warm = 0;
  uint64_t warmRuns = 0, runs = 0;
  for (auto _ : state) {
    cold += firstCall(/*clearFirst=*/true, nullptr);
    warm += firstCall(/*clearFirst=*/false, &runs);
    warmRuns += runs;
  }
  double n = double(state.iterations());
  state.counters["cold_ms"] = cold / n;
  state.counters["warm_ms"] = warm / n;
  state.counters["speedup"] = cold / warm;
  state.counters["mlir_pipeline_runs_warm"] = double(warmRuns);
  state.SetLabel(model->name);
  llvm::sys::fs::remove_directories(dir);
}
BENCHMARK(BM_FirstCallColdVsWarm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(5);

BENCHMARK_MAIN();
