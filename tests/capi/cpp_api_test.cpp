// The header-only C++ API (kiln/kiln.hpp) as a program sees it: linked
// against libkiln.so alone, no kiln internal header, no LLVM.
#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace {

std::vector<float> input() {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float((i * 5) % 9) * 0.5f - 2.0f;
  return x;
}

// The classifier's logits (samples/models/classifier.mlir).
std::vector<float> logits(const std::vector<float> &x) {
  const float b[3] = {0.5f, -0.25f, 0.125f};
  std::vector<float> out(12);
  for (int r = 0; r < 4; ++r)
    for (int n = 0; n < 3; ++n) {
      float acc = b[n];
      for (int k = 0; k < 8; ++k) acc += x[r * 8 + k] * float((3 * k + n) % 7 - 3) / 4.0f;
      out[r * 3 + n] = acc;
    }
  return out;
}

void expectNear(const std::vector<float> &a, const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << i;
}

kiln::Options quiet() { return std::move(kiln::Options().set("cache", "off").set("threads", 2)); }

}  // namespace

TEST(CppApi, VersionAndTensors) {
  EXPECT_EQ(kiln::version(), KILN_VERSION_STRING);
  kiln::Tensor t = kiln::Tensor::fromValues<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.byteSize(), 24u);
  kiln::Tensor copy = t;  // shares the memory
  copy.data<int32_t>()[0] = 42;
  EXPECT_EQ(t.values<int32_t>()[0], 42);
  EXPECT_THROW(t.data<float>(), kiln::Error);
  try {
    kiln::Tensor::zeros(kiln::DType::f32, {2, -1});
    FAIL() << "a negative dimension was accepted";
  } catch (const kiln::Error &e) {
    EXPECT_EQ(e.code(), kiln::Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("dimension 1 is -1"), std::string::npos) << e.what();
  }
}

TEST(CppApi, IntrospectAndCall) {
  kiln::Runtime rt(quiet());
  kiln::Module m = rt.load(KILN_CLASSIFIER);
  EXPECT_EQ(m.functions(), std::vector<std::string>{"main"});
  EXPECT_EQ(m.resolveFunction(), "main");
  EXPECT_EQ(m.resolveFunction("main"), "main");
  EXPECT_THROW(m.resolveFunction("missing"), kiln::Error);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "features");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{1, 4, 8}));
  ASSERT_EQ(m.outputs().size(), 2u);
  EXPECT_EQ(m.outputs()[0].name, "scores");
  EXPECT_EQ(m.outputs()[1].name, "logits");

  std::vector<float> x = input();
  kiln::Tensor in = kiln::Tensor::wrap(x.data(), {1, 4, 8});
  std::vector<kiln::Tensor> out = m.call({in});
  ASSERT_EQ(out.size(), 2u);
  expectNear(out[1].values<float>(), logits(x));

  // By name, and into the caller's memory.
  std::vector<float> scores(12, -1), raw(12, -1);
  std::vector<kiln::Tensor> into = {kiln::Tensor::wrap(scores.data(), {1, 4, 3}),
                                    kiln::Tensor::wrap(raw.data(), {1, 4, 3})};
  m.callInto("main", {in}, into);
  expectNear(raw, logits(x));
  std::vector<kiln::Tensor> named = m.call("main", {{"features", in}});
  expectNear(named[1].values<float>(), logits(x));
  try {
    m.call("main", {{"pixels", in}});
    FAIL() << "an unknown input name was accepted";
  } catch (const kiln::Error &e) {
    EXPECT_EQ(e.code(), kiln::Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("'pixels'"), std::string::npos) << e.what();
  }

  // Asynchronous calls from several threads at once.
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      kiln::AsyncCall c = m.callAsync("", {in});
      std::vector<kiln::Tensor> r = c.wait();
      if (r.size() == 2 && std::fabs(r[1].values<float>()[5] - logits(x)[5]) < 1e-4) ++good;
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(good.load(), 4);
  // onReady runs any callable once; a wrapped tensor's release runs when
  // kiln lets go of the memory.
  std::atomic<int> readies{0};
  std::atomic<bool> released{false};
  {
    kiln::Tensor owned = kiln::Tensor::wrap(x.data(), {1, 4, 8}, [&released] { released = true; });
    kiln::AsyncCall c = m.callAsync("", {owned});
    c.onReady([&readies] { ++readies; });
    c.wait();
  }
  // Both run on kiln's threads, possibly just after wait() returned.
  for (int i = 0; i < 500 && (readies.load() == 0 || !released.load()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(readies.load(), 1);
  EXPECT_TRUE(released.load());
  kiln::ModuleStats s = m.stats();
  EXPECT_EQ(s.functions_compiled, 1u);
}

TEST(CppApi, ErrorsCarryCodeAndLocation) {
  kiln::Runtime rt(quiet());
  try {
    rt.loadFromMemory("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %y : tensor<4xf32>\n}\n",
                      "bad.mlir");
    FAIL() << "malformed MLIR loaded";
  } catch (const kiln::Error &e) {
    EXPECT_EQ(e.code(), kiln::Code::invalid_argument);
    EXPECT_EQ(e.location().rfind("bad.mlir:2:", 0), 0u) << e.location();
  }
  try {
    kiln::Options().set("when_busy", "sometimes");
    FAIL();
  } catch (const kiln::Error &e) {
    EXPECT_NE(std::string(e.what()).find("wait or fail"), std::string::npos) << e.what();
  }
  // An empty module is refused at load, not at its first call.
  EXPECT_THROW(rt.loadFromMemory("", "empty.mlir"), kiln::Error);
}

TEST(CppApi, PlacementAndProfiler) {
  kiln::Runtime rt(quiet().set("op_mode", "tosa.matmul=kernel,*=jit"));
  kiln::Module m = rt.load(KILN_CLASSIFIER);
  kiln::CompileInfo info = m.compileInfo("", m.inputs());
  EXPECT_NE(info.placement.find("matmul"), std::string::npos) << info.placement;
  EXPECT_FALSE(info.fromDiskCache);
  std::string dir = ::testing::TempDir();
  std::vector<float> x = input();
  kiln::Profiler p(rt);
  for (int i = 0; i < 3; ++i) m.call({kiln::Tensor::wrap(x.data(), {1, 4, 8})});
  std::string table = p.stop(dir + "/kiln_cpp_trace.json", dir + "/kiln_cpp_report.html");
  EXPECT_NE(table.find("kernel"), std::string::npos) << table;
  std::ifstream trace(dir + "/kiln_cpp_trace.json");
  std::stringstream text;
  text << trace.rdbuf();
  EXPECT_NE(text.str().find("traceEvents"), std::string::npos);
}

TEST(CppApi, InFlightLimitWaits) {
  // max_in_flight = 1 with when_busy = wait: concurrent calls queue, all finish.
  kiln::Runtime rt(quiet().set("max_in_flight", 1));
  kiln::Module m = rt.load(KILN_CLASSIFIER);
  std::vector<float> x = input();
  kiln::Tensor in = kiln::Tensor::wrap(x.data(), {1, 4, 8});
  std::vector<kiln::AsyncCall> calls;
  std::thread t([&] {
    for (int i = 0; i < 8; ++i) m.call({in});
  });
  for (int i = 0; i < 8; ++i) calls.push_back(m.callAsync("", {in}));
  for (auto &c : calls) expectNear(c.wait()[1].values<float>(), logits(x));
  t.join();
}

TEST(CppApi, TieredFirstCallThenSwap) {
  // compile_policy = tiered: the first call runs on a kernel plan (same
  // results), the JIT compile in the background, then the swap.
  kiln::Runtime rt(quiet().set("compile_policy", "tiered"));
  kiln::Module m = rt.load(KILN_CLASSIFIER);
  std::vector<float> x = input();
  kiln::Tensor in = kiln::Tensor::wrap(x.data(), {1, 4, 8});
  expectNear(m.call({in})[1].values<float>(), logits(x));
  m.waitForBackgroundCompiles();
  kiln::TierStats t = m.tierStats();
  EXPECT_EQ(t.kernel_plan_calls, 1u);
  EXPECT_EQ(t.swaps, 1u);
  expectNear(m.call({in})[1].values<float>(), logits(x));
  EXPECT_EQ(m.tierStats().kernel_plan_calls, 1u);
  EXPECT_EQ(m.stats().functions_compiled, 1u);
}

TEST(CppApi, EagerTraceKernelsAndBuiltins) {
  kiln::Runtime rt(quiet());
  kiln::Eager eager(rt);
  kiln::Tensor a = kiln::Tensor::fromValues<float>({2, 2}, {1, -2, 3, -4});
  kiln::Value x(a);
  kiln::Value y = eager.run("tosa.add", {x, x});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));  // known at dispatch
  EXPECT_EQ(y.get().values<float>(), (std::vector<float>{2, -4, 6, -8}));
  kiln::Value s = eager.run("tosa.reduce_sum", {y}, kiln::Attrs().set("axis", 0));
  EXPECT_EQ(s.get().values<float>(), (std::vector<float>{8, -12}));
  EXPECT_THROW(eager.run("tosa.add", {x, kiln::Value(kiln::Tensor::zeros(kiln::DType::f32, {3}))}), kiln::Error);

  // Trace: clamp(x + x, 0, 5) recorded as a module.
  kiln::Module traced = eager.trace(
      [](kiln::Eager &e, const std::vector<kiln::Value> &in) {
        kiln::Value twice = e.run("tosa.add", {in[0], in[0]});
        return std::vector<kiln::Value>{
            e.run("tosa.clamp", {twice}, kiln::Attrs().set("min_val", 0.0).set("max_val", 5.0))};
      },
      {{"x", kiln::DType::f32, {2, 2}}});
  EXPECT_EQ(traced.call({a})[0].values<float>(), (std::vector<float>{2, 0, 5, 0}));
  // An exception inside the traced function is the trace's error.
  EXPECT_THROW(eager.trace([](kiln::Eager &, const std::vector<kiln::Value> &) -> std::vector<kiln::Value> {
                 throw kiln::Error(kiln::Code::unsupported, "no", "");
               },
                            {{"x", kiln::DType::f32, {2}}}),
               kiln::Error);

  // A user kernel from C++ callables, in a graph.
  kiln::registerKernel(
      "tosa.custom:acme.cpp_negate", "lambda",
      [](const std::vector<kiln::TensorInfo> &in, kiln::AttrsView) { return in; },
      [](const std::vector<kiln::KernelTensor> &in, const std::vector<kiln::KernelTensor> &out, kiln::AttrsView) {
        size_t n = 1;
        for (int64_t d : in[0].shape) n *= size_t(d);
        for (size_t i = 0; i < n; ++i) static_cast<float *>(out[0].data)[i] = -static_cast<const float *>(in[0].data)[i];
      });
  kiln::Module custom = rt.loadFromMemory(
      "func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {\n"
      "  %y = tosa.custom %x {operator_name = \"cpp_negate\", domain_name = \"acme\", implementation_attrs = \"\"} "
      ": (tensor<2x2xf32>) -> tensor<2x2xf32>\n  return %y : tensor<2x2xf32>\n}\n");
  EXPECT_EQ(custom.call({a})[0].values<float>(), (std::vector<float>{-1, 2, -3, 4}));

  std::vector<std::string> builtins = kiln::Runtime::builtinModels();
  ASSERT_GE(builtins.size(), 3u);
  kiln::Module mlp = rt.loadBuiltin("mlp");
  EXPECT_FALSE(mlp.inputs().empty());
  EXPECT_THROW(rt.loadBuiltin("alexnet"), kiln::Error);
}

TEST(CppApi, BatchSeparableSaysWhetherRequestsMayBeMerged) {
  kiln::Runtime rt;
  kiln::Module m = rt.loadFromMemory(R"(
func.func @rows(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = tosa.add %x, %x : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
func.func @total(%x: tensor<?x4xf32>) -> tensor<1x4xf32> {
  %s = tosa.reduce_sum %x {axis = 0 : i32} : (tensor<?x4xf32>) -> tensor<1x4xf32>
  return %s : tensor<1x4xf32>
})",
                                     "batch.mlir");
  std::string why;
  EXPECT_TRUE(m.batchSeparable("rows", &why));
  EXPECT_EQ(why, "");
  EXPECT_FALSE(m.batchSeparable("total", &why));
  EXPECT_NE(why.find("tosa.reduce_sum"), std::string::npos) << why;
  EXPECT_NE(why.find("batch.mlir"), std::string::npos) << why;
  try {
    m.batchSeparable("nosuch");
    FAIL() << "no error for an unknown function";
  } catch (const kiln::Error &e) {
    EXPECT_EQ(e.code(), kiln::Code::invalid_argument);
  }
}
