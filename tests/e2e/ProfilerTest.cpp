// The profiler: every executed step and compile is recorded, per-kernel
// FLOPs equal hand counts, the trace is valid Chrome trace-event JSON, and
// nothing is recorded once it stops.
#include "api/Eager.h"
#include "api/Profiler.h"
#include "tests/TestRuntime.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

using namespace kiln;

namespace {

// conv (JIT) -> add (handwritten kernel) -> reshape + matmul (JIT).
const char *kModel = R"(
func.func @main(%x: tensor<1x8x8x4xf32>, %w: tensor<8x3x3x4xf32>, %y: tensor<1x8x16xf32>) -> tensor<1x64x16xf32> {
  %b = "tosa.const"() <{values = dense<0.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<8x3x3x4xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x8xf32>
  %a = tosa.add %c, %c : (tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %shape = tosa.const_shape {values = dense<[1, 64, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %r = tosa.reshape %a, %shape : (tensor<1x8x8x8xf32>, !tosa.shape<3>) -> tensor<1x64x8xf32>
  %m = tosa.matmul %r, %y, %z, %z : (tensor<1x64x8xf32>, tensor<1x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x16xf32>
  return %m : tensor<1x64x16xf32>
}
)";

}  // namespace

TEST(Profiler, RecordsStepsAndCompilesWithHandCountedFlops) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.placement = llvm::cantFail(ops::parseOpModes("tosa.add=kernel"));
  auto rt = KILN_TAKE(Runtime::create(o));
  auto m = KILN_TAKE(rt->loadModule(kModel, "profiled.mlir"));
  ASSERT_TRUE(m);
  std::vector<Tensor> in = {test::randomTensor({1, 8, 8, 4}, 1), test::randomTensor({8, 3, 3, 4}, 2),
                            test::randomTensor({1, 8, 16}, 3)};
  const int calls = 3;
  Profile prof;
  {
    Profiler profiler(*rt, /*measurePeaks=*/false);
    for (int i = 0; i < calls; ++i) ASSERT_TRUE(KILN_TAKE(m->call("main", in)).size() == 1);
    prof = profiler.stop();
  }
  // Three kernels, each run once per call, with FLOPs counted from shapes.
  std::map<std::string, const KernelProfile *> byOps;
  for (const KernelProfile &k : prof.kernels) byOps[k.ops] = &k;
  ASSERT_EQ(prof.kernels.size(), 3u) << prof.table();
  const KernelProfile *conv = nullptr, *add = nullptr, *matmul = nullptr;
  for (const KernelProfile &k : prof.kernels) {
    if (k.ops.find("tosa.conv2d") != std::string::npos) conv = &k;
    if (k.ops == "tosa.add") add = &k;
    if (k.ops.find("tosa.matmul") != std::string::npos) matmul = &k;
  }
  ASSERT_TRUE(conv && add && matmul) << prof.table();
  EXPECT_EQ(conv->flopsPerCall, 2.0 * 8 * 8 * 8 * 3 * 3 * 4);  // 2 * N*OH*OW*F * KH*KW*C
  EXPECT_EQ(add->flopsPerCall, 8.0 * 8 * 8);                   // one per element
  EXPECT_EQ(matmul->flopsPerCall, 2.0 * 64 * 16 * 8);         // 2 * M*N*K
  EXPECT_EQ(conv->kind, "jit");
  EXPECT_EQ(add->kind, "kernel");
  EXPECT_EQ(add->outputType, "1x8x8x8xf32");
  EXPECT_NE(conv->provenance.find("profiled.mlir:"), std::string::npos) << conv->provenance;
  for (const KernelProfile &k : prof.kernels) {
    EXPECT_EQ(k.calls, calls) << k.name;
    EXPECT_GT(k.totalMs, 0) << k.name;
    // Each call's time kept: the median is one of them (three calls).
    ASSERT_EQ(k.callMs.size(), size_t(calls)) << k.name;
    EXPECT_TRUE(llvm::is_contained(k.callMs, k.medianMs())) << k.name;
    EXPECT_LE(*std::min_element(k.callMs.begin(), k.callMs.end()), k.medianMs());
    EXPECT_GE(*std::max_element(k.callMs.begin(), k.callMs.end()), k.medianMs());
  }
  EXPECT_NE(prof.table().find("median ms"), std::string::npos) << prof.table();
  KernelProfile even;
  even.callMs = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(even.medianMs(), 2.5);
  EXPECT_NE(prof.table().find("tosa.conv2d"), std::string::npos);
  // How each kernel computes: the JIT's strategy in its words (shapes,
  // register tiles), the handwritten kernel's reason; a line under each
  // row of the table.
  EXPECT_EQ(conv->strategy.rfind("conv 3x3 4->8 on 8x8", 0), 0u) << conv->strategy;
  EXPECT_EQ(matmul->strategy.rfind("matmul 64x16x8: registers ", 0), 0u) << matmul->strategy;
  EXPECT_EQ(add->strategy, "handwritten kernel (mode=kernel)");
  EXPECT_NE(prof.table().find("\n         how: matmul 64x16x8: registers "), std::string::npos) << prof.table();
  EXPECT_NE(prof.tableJson().find("\"strategy\":\"handwritten kernel (mode=kernel)\""), std::string::npos);

  // Chrome trace events: every step and the compile, complete ("X") events
  // on named thread tracks, steps carrying their ops and FLOPs.
  nlohmann::json trace = nlohmann::json::parse(prof.chromeTraceJson());
  int steps = 0, compiles = 0, kernelCompiles = 0, threadNames = 0, stages = 0, lookups = 0, other = 0;
  std::set<std::string> stageNames;
  for (const auto &e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++threadNames;
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("dur").get<double>(), 0);
    if (e.at("cat") == "compile" && e.at("name") == "compile @main") {  // the whole function
      ++compiles;
      EXPECT_EQ(e.at("args").at("kernels compiled"), "2");
      EXPECT_TRUE(e.at("args").contains("ms llvm-codegen"));
    } else if (e.at("cat") == "compile" && e.at("name").get<std::string>().rfind("compile @main.cluster", 0) == 0) {
      ++kernelCompiles;  // one per kernel, on its compiling thread
      EXPECT_TRUE(e.at("args").contains("ops"));
      EXPECT_TRUE(e.at("args").contains("ms llvm-opt"));
    } else if (e.at("cat") == "compile" && e.at("name") == "cache lookup @main") {
      ++lookups;
      EXPECT_EQ(e.at("args").at("memory"), "miss");
    } else if (e.at("cat") == "compile" && e.at("name").get<std::string>().find('@') == std::string::npos) {
      ++stages;  // a lowering stage, nested in its kernel's compile
      stageNames.insert(e.at("name").get<std::string>());
    } else if (e.at("cat") == "compile") {
      ++other;  // specialize, partition, load and link
      std::string name = e.at("name");
      EXPECT_TRUE(name == "specialize @main" || name == "partition @main" || name == "load and link @main") << name;
    } else {
      ++steps;
      EXPECT_TRUE(e.at("args").contains("ops"));
    }
  }
  EXPECT_EQ(steps, 3 * calls);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(kernelCompiles, 2);
  EXPECT_EQ(lookups, 1);
  EXPECT_EQ(other, 3);
  for (const char *stage : {"kiln-tosa-to-linalg", "kiln-cpu-tile-vectorize", "kiln-bufferize", "kiln-lower-to-llvm",
                            "llvm-opt", "llvm-codegen"})
    EXPECT_TRUE(stageNames.count(stage)) << stage;
  EXPECT_GE(stages, 2 * 6);
  EXPECT_GE(threadNames, 1);

  // Stopped: calls record nothing.
  EXPECT_EQ(rt->executor().trace(), nullptr);
  ASSERT_TRUE(KILN_TAKE(m->call("main", in)).size() == 1);
}

// Eager ops are profiled too: inline ones (JIT entry or kernel called on the
// dispatching thread) and those run on the executor.
TEST(Profiler, RecordsEagerOpsInlineAndOnTheExecutor) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  auto rt = KILN_TAKE(Runtime::create(o));
  eager::Context ctx(*rt);
  Tensor a = test::randomTensor({4, 8}, 1), b = test::randomTensor({8, 3}, 2);
  llvm::cantFail(ctx.matmul(a, b).value());  // compiled before recording
  llvm::cantFail(ctx.add(a, a).value());
  Profile prof;
  {
    Profiler profiler(*rt, /*measurePeaks=*/false);
    for (int i = 0; i < 3; ++i) {
      llvm::cantFail(ctx.matmul(a, b).value());
      llvm::cantFail(ctx.add(a, a).value());
    }
    ctx.setInlineLimit(0);  // from here on, on the executor
    llvm::cantFail(ctx.add(a, a).value());
    prof = profiler.stop();
  }
  int64_t matmuls = 0, adds = 0;
  for (const KernelProfile &k : prof.kernels) {
    if (k.ops == "tosa.matmul") matmuls += k.calls;
    if (k.ops == "tosa.add" || k.ops.find("tosa.add") != std::string::npos) adds += k.calls;
  }
  EXPECT_EQ(matmuls, 3) << prof.table();
  EXPECT_EQ(adds, 4) << prof.table();
}

TEST(Profiler, SourceLocationsAreShortenedToTheModelsOwnFrames) {
  // One file's lines once, by its name, runs joined.
  EXPECT_EQ(shortProvenance("/root/.cache/kiln/zoo/m/tosa.mlir:577:12, /root/.cache/kiln/zoo/m/tosa.mlir:586:12, "
                            "/root/.cache/kiln/zoo/m/tosa.mlir:587:12, /root/.cache/kiln/zoo/m/tosa.mlir:588:3"),
            "tosa.mlir:577, 586-588");
  // Installed packages' frames go where the model's own are there ...
  EXPECT_EQ(shortProvenance("/usr/lib/python3/dist-packages/torch/nn/functional.py:2450:3, /home/u/net.py:12:5, "
                            "/venv/lib/python3.11/site-packages/torch/nn/modules/conv.py:456:1, /home/u/net.py:14:5"),
            "net.py:12, 14");
  // ... and stay where there is nothing else.
  EXPECT_EQ(shortProvenance("/venv/lib/python3.11/site-packages/torch/nn/modules/conv.py:456:1"), "conv.py:456");
  // Long lists end with how many more; text that is no location stays.
  std::string many;
  for (int i = 0; i < 20; ++i) many += (i ? ", " : "") + std::string("a.mlir:") + std::to_string(10 * i + 1) + ":1";
  EXPECT_EQ(shortProvenance(many, 3), "a.mlir:1, 11, 21 (+17 more)");
  EXPECT_EQ(shortProvenance("unknown"), "unknown");
  EXPECT_EQ(shortProvenance(""), "");
}
