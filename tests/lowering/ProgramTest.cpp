// lowering::Program: import, signatures, specialization, hoisting, bytecode.
#include "lowering/pipelines/Pipelines.h"
#include "lowering/graph/Program.h"
#include "lowering/ir/ThreadDiagnostics.h"
#include "tests/TestRuntime.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace kiln;
using namespace kiln::lowering;

namespace {
const char *kModule = R"mlir(
func.func @main(%x: tensor<?x8xf32> {kiln.name = "features"}, %i: tensor<3xi32>) -> (tensor<?x8xf32>, tensor<3xi32>) {
  %w = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<1x8xf32>}> : () -> tensor<1x8xf32>
  %s = "tosa.const"() <{values = dense<2.0> : tensor<1x8xf32>}> : () -> tensor<1x8xf32>
  %y = tosa.add %x, %w : (tensor<?x8xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  %z = tosa.sub %y, %s : (tensor<?x8xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  return %z, %i : tensor<?x8xf32>, tensor<3xi32>
}
func.func private @helper(%x: tensor<1xf32>) -> tensor<1xf32> {
  return %x : tensor<1xf32>
}
)mlir";
}  // namespace

TEST(Program, SignaturesOfPublicFunctions) {
  auto p = KILN_TAKE(Program::parse(kModule, "sig.mlir"));
  ASSERT_TRUE(p);
  ASSERT_EQ(p->functions().size(), 1u);  // @helper is private
  const FunctionSignature &f = p->functions()[0];
  EXPECT_EQ(f.name, "main");
  EXPECT_EQ(f.location, "sig.mlir:2:1");
  ASSERT_EQ(f.args.size(), 2u);
  EXPECT_EQ(f.args[0].name, "features");
  EXPECT_EQ(f.args[0].type.str(), "?x8xf32");
  EXPECT_EQ(f.args[1].type.str(), "3xi32");
  EXPECT_EQ(f.results[0].str(), "?x8xf32");
  EXPECT_TRUE(f.unsupported.empty());
}

TEST(Program, SpecializeMakesEverythingStaticAndHoistsWeights) {
  auto p = KILN_TAKE(Program::parse(kModule, "sig.mlir"));
  ASSERT_TRUE(p);
  StageTimes times;
  auto spec = KILN_TAKE(p->specialize(
      "main", {kiln::TensorType{DType::f32, {5, 8}}, kiln::TensorType{DType::i32, {3}}}, times));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->resultTypes[0].str(), "5x8xf32");
  EXPECT_EQ(spec->resultTypes[1].str(), "3xi32");
  // min-elements defaults to 16: the 8-element constant and the splat stay.
  EXPECT_TRUE(spec->weights.empty());
  std::string graph = spec->printGraph();
  EXPECT_NE(graph.find("@kiln_fn(%arg0: tensor<5x8xf32>"), std::string::npos) << graph;
  EXPECT_EQ(graph.find("tensor<?x8xf32>"), std::string::npos) << graph;
  EXPECT_EQ(graph.find("@helper"), std::string::npos) << graph;  // dead private function
  ASSERT_FALSE(times.empty());
  EXPECT_EQ(times[0].stage, "specialize");
}

// The cache key's graph hoists the weights as a kernel plan's
// specialization does (plain layouts); that specialization takes its module
// instead of cloning and hoisting again. What it makes, and the weights it
// binds, are what a program that never computed the key makes; a second
// specialization, and one with other layouts, clone afresh.
TEST(Program, SpecializationAfterTheCacheKeyMatchesOneWithout) {
  // Weights that are not splats (splats stay in the graph), 64 wide (rows
  // padded under padMatmulWeights), as hex literals (the loader makes them
  // blobs, whose bytes a key must not hash when they are weights).
  auto hexOf = [](int n, float scale) {
    std::string v = "0x";
    for (int i = 0; i < n; ++i) {
      float f = scale * float(i % 7 + 1);
      unsigned char bytes[4];
      std::memcpy(bytes, &f, 4);
      char two[3];
      for (unsigned char c : bytes) {
        std::snprintf(two, sizeof two, "%02X", c);
        v += two;
      }
    }
    return v;
  };
  auto model = [&](float weightScale) {
    return R"mlir(
func.func @main(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = "tosa.const"() <{values = dense<")mlir" + hexOf(64 * 64, weightScale) + R"mlir("> : tensor<1x64x64xf32>}> : () -> tensor<1x64x64xf32>
  %b = "tosa.const"() <{values = dense<")mlir" + hexOf(64, 0.5f) + R"mlir("> : tensor<1x64xf32>}> : () -> tensor<1x64xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s1 = tosa.const_shape {values = dense<[1, -1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s2 = tosa.const_shape {values = dense<[-1, 64]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %x3 = tosa.reshape %x, %s1 : (tensor<?x64xf32>, !tosa.shape<3>) -> tensor<1x?x64xf32>
  %m = tosa.matmul %x3, %w, %z, %z : (tensor<1x?x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x?x64xf32>
  %m2 = tosa.reshape %m, %s2 : (tensor<1x?x64xf32>, !tosa.shape<2>) -> tensor<?x64xf32>
  %y = tosa.add %m2, %b : (tensor<?x64xf32>, tensor<1x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
)mlir";
  };
  const std::string mlir = model(0.01f);
  const std::vector<kiln::TensorType> in = {kiln::TensorType{DType::f32, {4, 64}}};
  auto fresh = KILN_TAKE(Program::parse(mlir, "m.mlir"));
  auto keyed = KILN_TAKE(Program::parse(mlir, "m.mlir"));
  ASSERT_TRUE(fresh && keyed);
  std::string graph = KILN_TAKE(keyed->canonicalGraph("main"));
  ASSERT_FALSE(graph.empty());
  EXPECT_EQ(graph.find("kiln.weight"), std::string::npos) << graph;  // the weights' values are not in it
  auto retrained = KILN_TAKE(Program::parse(model(0.02f), "m.mlir"));  // the same graph, other weights
  ASSERT_TRUE(retrained);
  EXPECT_EQ(KILN_TAKE(retrained->canonicalGraph("main")), graph);
  StageTimes times;
  auto want = KILN_TAKE(fresh->specialize("main", in, times));
  auto got = KILN_TAKE(keyed->specialize("main", in, times));
  ASSERT_TRUE(want && got);
  EXPECT_EQ(got->printGraph(), want->printGraph());
  ASSERT_EQ(got->weights.size(), 2u);
  ASSERT_EQ(got->weights.size(), want->weights.size());
  for (size_t i = 0; i < got->weights.size(); ++i) {
    ASSERT_EQ(got->weights[i].type(), want->weights[i].type());
    EXPECT_EQ(std::memcmp(got->weights[i].rawData(), want->weights[i].rawData(), got->weights[i].byteSize()), 0);
  }
  // Again (nothing left to take), and with other layouts after a new key.
  auto again = KILN_TAKE(keyed->specialize("main", in, times));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->printGraph(), want->printGraph());
  auto other = KILN_TAKE(Program::parse(mlir, "m.mlir"));
  ASSERT_TRUE(other);
  EXPECT_EQ(KILN_TAKE(other->canonicalGraph("main")), graph);
  WeightLayouts padded;
  padded.padMatmulWeights = true;
  auto paddedWant = KILN_TAKE(fresh->specialize("main", in, times, padded));
  auto paddedGot = KILN_TAKE(other->specialize("main", in, times, padded));
  ASSERT_TRUE(paddedWant && paddedGot);
  EXPECT_EQ(paddedGot->printGraph(), paddedWant->printGraph());
  EXPECT_NE(paddedGot->printGraph(), want->printGraph());  // the padding is there
}

TEST(Program, BytecodeLoadsLikeText) {
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  ASSERT_TRUE(mlir::succeeded(mlir::writeBytecodeToFile(*module, os)));
  ASSERT_TRUE(llvm::StringRef(bytes).starts_with("ML\xef\x52"));

  auto m = KILN_TAKE(test::sharedRuntime().loadModule(bytes, "model.mlirbc"));
  ASSERT_TRUE(m);
  Tensor x = Tensor::empty(DType::f32, {2, 8});
  for (int i = 0; i < 16; ++i) x.data<float>()[i] = float(i);
  std::vector<int32_t> iv = {7, 8, 9};
  auto out = KILN_TAKE(m->call("main", {x, Tensor::fromVector<int32_t>(DType::i32, {3}, iv)}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data<float>()[9], 9.0f + 2.0f - 2.0f);  // x + w[1] - 2
  EXPECT_EQ(out[1].toVector<int32_t>(), iv);              // an input returned as is
}

TEST(Program, CheckInputsNamesArgument) {
  auto p = KILN_TAKE(Program::parse(kModule, "sig.mlir"));
  ASSERT_TRUE(p);
  std::string msg = test::errorOf(checkInputs(
      p->functions()[0], {kiln::TensorType{DType::f32, {5, 7}}, kiln::TensorType{DType::i32, {3}}}));
  EXPECT_NE(msg.find("argument 0 ('features'): expected tensor<?x8xf32>, got tensor<5x7xf32>"),
            std::string::npos)
      << msg;
}

namespace {
/// Each specialization of kModule at batch `rows`, lowered to LLVM IR text
/// (the module name left out: it is the function's). Lowerings of `p` after
/// the first run on `threads` threads at once (0: one after another).
std::vector<std::string> lowerAll(Program &p, int threads) {
  const int n = 8;
  std::vector<std::unique_ptr<SpecializedFunction>> specs;
  StageTimes times;
  for (int rows = 1; rows <= n; ++rows) {
    specs.push_back(KILN_TAKE(p.specialize("main", {kiln::TensorType{DType::f32, {rows, 8}}, kiln::TensorType{DType::i32, {3}}},
                                           times)));
    if (!specs.back()) return {};
  }
  std::vector<std::string> ir(n);
  auto lower = [&](int i) {
    llvm::LLVMContext llvm;
    StageTimes t;
    auto m = KILN_TAKE(p.lowerToLLVMIR(*specs[size_t(i)], CpuTuning::fromFeatures("+avx2,+fma"), llvm, t));
    if (!m) return;
    m->setModuleIdentifier("");
    llvm::raw_string_ostream os(ir[size_t(i)]);
    m->print(os, nullptr);
  };
  lower(0);
  if (threads == 0)
    for (int i = 1; i < n; ++i) lower(i);
  std::vector<std::thread> pool;
  std::atomic<int> next{1};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < n;) lower(i);
    });
  for (std::thread &t : pool) t.join();
  return ir;
}
}  // namespace

// The JIT lowers a model's kernels on several threads: after the first
// lowering, those of one Program share its context, and each gives the code
// it gives alone.
TEST(Program, ConcurrentLoweringsGiveWhatSerialOnesGive) {
  auto serial = KILN_TAKE(Program::parse(kModule, "serial.mlir"));
  auto concurrent = KILN_TAKE(Program::parse(kModule, "concurrent.mlir"));
  ASSERT_TRUE(serial && concurrent);
  std::vector<std::string> one = lowerAll(*serial, 0), four = lowerAll(*concurrent, 4);
  ASSERT_EQ(one.size(), 8u);
  ASSERT_EQ(four.size(), 8u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NE(one[i].find("kiln_entry"), std::string::npos) << one[i];
    EXPECT_EQ(one[i], four[i]) << "batch " << i + 1;
  }
  EXPECT_EQ(concurrent->pipelineRuns(), 16u);  // 8 specializations + 8 lowerings
}

// Diagnostics of lowerings running at once on one context each reach the
// error of their own lowering, whichever handler was registered last.
TEST(Program, EachThreadsDiagnosticsReachItsOwnHandler) {
  mlir::DialectRegistry registry;
  registerKilnDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::ENABLED);
  llvm::SourceMgr sources;
  std::mutex printing;
  // Both threads wait at each step until both reached it.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  auto bothAt = [&](int step) {
    std::unique_lock<std::mutex> lock(mu);
    ++arrived;
    cv.notify_all();
    cv.wait(lock, [&] { return arrived >= 2 * step; });
  };
  std::string text[2], first[2];
  auto run = [&](int i) {
    llvm::raw_string_ostream os(text[i]);
    ThreadDiagnostics handler(sources, printing, &ctx, os, first[i]);
    bothAt(1);  // both handlers registered before either emits
    mlir::emitError(mlir::FileLineColLoc::get(&ctx, "m.mlir", unsigned(i + 1), 1)) << "from thread " << i;
    bothAt(2);  // neither handler goes before both emitted
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(text[i].find("from thread " + std::to_string(i)), std::string::npos) << text[i];
    EXPECT_EQ(text[i].find("from thread " + std::to_string(1 - i)), std::string::npos) << text[i];
    EXPECT_EQ(first[i], "m.mlir:" + std::to_string(i + 1) + ":1");
  }
}
