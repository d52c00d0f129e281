// A stream of calls whose shapes change from call to call, from a cold
// compile cache: the latency of every call, under one compile policy
// (wait, tiered, kernels-only). Not a Google Benchmark: the figures that
// matter are over a whole stream (p50, p99, max, compiles), which
// bench/shapes/run.py compares with ONNX Runtime on the same stream.
//
//   kiln_shape_stream MODEL FUNCTION POLICY SIZES [THREADS]
//     MODEL     an .mlir/.mlirbc file whose inputs have dynamic dims (a
//               batch, a sequence length)
//     SIZES     the stream: the size of every dynamic dim for each call,
//               "3,1,16,..." (f32 inputs uniform in [-1,1], others 0)
//   prints one line per call ("call <i> size <n> <ms>") and a summary.
#include "api/Kiln.h"
#include "jit/CompileService.h"
#include "runtime/Clock.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL FUNCTION wait|tiered|kernels-only SIZES [THREADS]\n", argv[0]);
    return 2;
  }
  std::string model = argv[1], function = argv[2];
  auto policy = parseCompilePolicy(argv[3]);
  if (!policy) {
    std::fprintf(stderr, "policy '%s': expected wait, tiered or kernels-only\n", argv[3]);
    return 2;
  }
  std::vector<int64_t> sizes;
  std::stringstream list(argv[4]);
  for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::atoll(item.c_str()));
  RuntimeOptions options;
  options.cacheMode = CacheMode::kOff;  // cold: every new size compiles (or runs on a kernel plan)
  options.compilePolicy = *policy;
  options.threads = argc > 5 ? std::atoi(argv[5]) : 0;
  auto rt = Runtime::create(options);
  if (!rt) {
    llvm::errs() << llvm::toString(rt.takeError()) << "\n";
    return 1;
  }
  auto t0 = Clock::now();
  auto m = (*rt)->loadModuleFromFile(model);
  if (!m) {
    llvm::errs() << llvm::toString(m.takeError()) << "\n";
    return 1;
  }
  double loadMs = msSince(t0);
  const FunctionSignature *sig = (*m)->signature(function);
  bool dynamic = false;
  for (const auto &arg : sig ? sig->args : std::vector<ArgumentInfo>{})
    dynamic |= std::count(arg.type.shape.begin(), arg.type.shape.end(), kDynamic) > 0;
  if (!dynamic) {
    std::fprintf(stderr, "@%s: no input has a dynamic dimension\n", function.c_str());
    return 1;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<double> ms;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<Tensor> inputs;
    for (const auto &arg : sig->args) {
      TensorType type = arg.type;
      for (size_t d = 0; d < type.shape.size(); ++d)
        if (type.shape[d] == kDynamic) type.shape[d] = sizes[i];
      Tensor t = Tensor::empty(type.dtype, type.shape);
      if (type.dtype == DType::f32)
        for (int64_t e = 0; e < t.numElements(); ++e) t.data<float>()[e] = uniform(rng);
      else
        std::fill_n(static_cast<char *>(t.rawData()), t.byteSize(), 0);
      inputs.push_back(std::move(t));
    }
    auto start = Clock::now();
    auto out = (*m)->call(function, inputs);
    ms.push_back(msSince(start));
    if (!out) {
      llvm::errs() << "call " << i << ": " << llvm::toString(out.takeError()) << "\n";
      return 1;
    }
    std::printf("call %zu size %lld %.3f\n", i, (long long)sizes[i], ms.back());
  }
  auto pct = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, size_t(p * double(v.size())))];
  };
  std::vector<double> last(ms.end() - std::min<size_t>(ms.size(), 100), ms.end());
  // Compiles counted over the stream and what was still compiling behind it.
  (*m)->waitForBackgroundCompiles();
  jit::CompileServiceStats st = (*rt)->compileService().stats();
  Module::TierStats tiers = (*m)->tierStats();
  for (const std::string &e : tiers.events) std::printf("event %s\n", e.c_str());
  std::printf("summary policy %s calls %zu load_ms %.1f p50_ms %.3f p99_ms %.3f max_ms %.3f last100_p50_ms %.3f "
              "compiles %llu compile_ms %.1f kernel_plan_calls %llu swaps %llu range_calls %llu hot_compiles %llu "
              "range_kept %llu deferred_shapes %llu hot_shape_compiles %llu plans %llu\n",
              argv[3], ms.size(), loadMs, pct(ms, 0.5), pct(ms, 0.99), pct(ms, 1.0), pct(last, 0.5),
              (unsigned long long)st.compiles, st.compileMs, (unsigned long long)tiers.kernelPlanCalls,
              (unsigned long long)tiers.swaps, (unsigned long long)tiers.rangeCalls,
              (unsigned long long)tiers.hotSizeCompiles, (unsigned long long)tiers.rangeKept,
              (unsigned long long)tiers.deferredShapes, (unsigned long long)tiers.hotShapeCompiles,
              (unsigned long long)st.kernelPlans);
  return 0;
}
