// Per-op placement: toggling an op between JIT and kernel changes where it
// runs and never what it computes; ops without a lowering run on kernels;
// a cluster whose compilation fails falls back to kernels.
#include "api/Eager.h"
#include "api/Kernels.h"
#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "jit/CompileService.h"
#include "jit/Compiler.h"
#include "jit/PlacementTuner.h"
#include "kernels/KernelRegistry.h"
#include "lowering/graph/Partition.h"
#include "lowering/models/BuiltinModels.h"
#include "ops/OpTable.h"
#include "tests/TestRuntime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

using namespace kiln;

namespace {

std::unique_ptr<Runtime> runtimeWith(const std::string &modes, std::set<std::string> failClustersWith = {},
                                     WarningSink warnings = nullptr) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  if (!modes.empty()) o.placement = llvm::cantFail(ops::parseOpModes(modes));
  // Exact placements: no measuring unless the modes ask for it.
  if (!o.placement.measure) o.placement.measure = false;
  o.warnings = std::move(warnings);
  jit::FaultInjection faults;
  faults.failClustersWith = std::move(failClustersWith);
  return llvm::cantFail(Runtime::createWithFaults(o, faults));
}


struct Result {
  std::vector<Tensor> outputs;
  std::string placement;
  jit::CompileStats stats;
};

Result runModel(Runtime &rt, const std::string &mlir, const std::string &fn, std::vector<Tensor> inputs) {
  Result r;
  auto m = KILN_TAKE(rt.loadModule(mlir, "model"));
  if (!m) return r;
  r.outputs = KILN_TAKE(m->call(fn, inputs));
  std::vector<TensorType> types;
  for (auto &t : inputs) types.push_back(t.type());
  auto c = KILN_TAKE(m->compile(fn, types));
  if (c) {
    r.placement = c->placementSummary();
    r.stats = c->stats;
  }
  return r;
}

/// `main` of `program` specialized to `in` and partitioned as the compiler
/// does (the kernel registry, anchors one per cluster), with `won` the ops
/// placement by measurement found faster on their kernels.
std::unique_ptr<lowering::PartitionedFunction> partitionMain(lowering::Program &program,
                                                             const std::vector<TensorType> &in,
                                                             const ops::PlacementOptions &modes,
                                                             const std::map<std::string, std::string> &won) {
  lowering::StageTimes times;
  auto spec = KILN_TAKE(program.specialize("main", in, times));
  EXPECT_TRUE(spec);
  return spec ? KILN_TAKE(program.partition(*spec, modes, jit::registryOracle(), {}, 1, won)) : nullptr;
}

/// Drops the compiled code of the compile cache in `dir` and keeps its
/// placement decisions (as when another model meets the same ops); returns
/// the decisions' entry.
cache::DiskEntryInfo dropCompiledCode(const std::string &dir) {
  cache::DiskCacheOptions d;
  d.dir = dir;
  auto disk = cache::DiskCache::open(d);
  cache::DiskEntryInfo record;
  for (const cache::DiskEntryInfo &e : disk->list()) {
    if (e.valid && e.key.function == "kiln.placement") record = e;
    else disk->remove(e.key, "test: code dropped");
  }
  return record;
}

size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

}  // namespace

TEST(Placement, ModelsGiveTheSameOutputsOnJitKernelsAndMixed) {
  for (const char *name : {"mlp", "cnn"}) {
    const auto *model = models::findBuiltinModel(name);
    Tensor x = std::string(name) == "mlp" ? test::randomTensor({5, 64}, 1) : test::randomTensor({1, 16, 16, 3}, 2);
    auto jitRt = runtimeWith("*=jit");
    auto kernelRt = runtimeWith("*=kernel");
    auto mixedRt = runtimeWith("tosa.matmul=kernel,tosa.conv2d=kernel,tosa.exp=kernel");
    Result a = runModel(*jitRt, model->mlir, "main", {x});
    Result b = runModel(*kernelRt, model->mlir, "main", {x});
    Result c = runModel(*mixedRt, model->mlir, "main", {x});
    ASSERT_EQ(a.outputs.size(), 1u);
    ASSERT_EQ(b.outputs.size(), 1u);
    ASSERT_EQ(c.outputs.size(), 1u);
    EXPECT_TRUE(test::allClose(test::asDoubles(b.outputs[0]), test::asDoubles(a.outputs[0]), 1e-5, 1e-6)) << name;
    EXPECT_TRUE(test::allClose(test::asDoubles(c.outputs[0]), test::asDoubles(a.outputs[0]), 1e-5, 1e-6)) << name;
    // One JIT kernel per anchor op: mlp's two matmuls; cnn's two convs, two
    // poolings and the matmul.
    std::string kernels = std::string(name) == "mlp" ? " JIT in 2 kernels" : " JIT in 5 kernels";
    EXPECT_NE(a.placement.find(kernels + ", 0 handwritten"), std::string::npos) << a.placement;
    EXPECT_NE(b.placement.find(": 0 JIT in 0 kernels"), std::string::npos) << b.placement;
    EXPECT_NE(c.placement.find("tosa.exp x1: mode=kernel"), std::string::npos) << c.placement;
  }
}

TEST(Placement, SummaryCountsOpsClustersAndReasons) {
  auto rt = runtimeWith("tosa.matmul=kernel");
  Result r = runModel(*rt, models::findBuiltinModel("mlp")->mlir, "main", {test::randomTensor({2, 64}, 3)});
  // mlp: reshape, matmul, add, clamp, matmul, add, reshape, softmax (6 ops) = 13 ops;
  // the two matmuls split the JIT ops into three clusters.
  EXPECT_EQ(r.placement.substr(0, r.placement.find('\n')),
            "13 ops: 11 JIT in 3 kernels, 2 handwritten (tosa.matmul x2: mode=kernel)");
}

TEST(Placement, OpWithoutLoweringRunsOnItsKernel) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = tosa.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = tosa.custom %y {operator_name = "gelu", domain_name = "kiln", implementation_attrs = ""} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = tosa.exp %g : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}
)mlir";
  Tensor x = test::randomTensor({2, 8}, 4);
  Result r = runModel(test::sharedRuntime(), mlir, "main", {x});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.placement, "3 ops: 2 JIT in 2 kernels, 1 handwritten (tosa.custom:kiln.gelu x1: no lowering)");
  for (int i = 0; i < 16; ++i) {
    double v = 2.0 * x.data<float>()[i];
    double want = std::exp(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    EXPECT_NEAR(r.outputs[0].data<float>()[i], want, 1e-5 * want);
  }
}

TEST(Placement, FailedClusterCompileFallsBackToKernels) {
  std::vector<std::string> warnings;
  std::mutex warningsMu;
  auto rt = runtimeWith("", {"tosa.exp"},  // compiling any cluster with tosa.exp fails
                        [&](const std::string &w) {
                          std::lock_guard<std::mutex> lock(warningsMu);
                          warnings.push_back(w);
                        });
  Tensor x = test::randomTensor({1, 6, 6, 2}, 5);
  auto m = KILN_TAKE(rt->loadModuleFromFile(KILN_TEST_INPUTS "/conv_softmax.mlir"));
  ASSERT_TRUE(m);
  auto out = KILN_TAKE(m->call("predict", {x}));
  auto fn = KILN_TAKE(m->compile("predict", {x.type()}));
  ASSERT_TRUE(fn);
  EXPECT_EQ(fn->stats.jitFallbacks, 1);
  EXPECT_EQ(rt->compileService().stats().jitFallbacks, 1u);
  ASSERT_EQ(fn->stats.warnings.size(), 1u);
  EXPECT_NE(fn->stats.warnings[0].find("JIT compilation of cluster"), std::string::npos) << fn->stats.warnings[0];
  EXPECT_NE(fn->stats.warnings[0].find("fall back to handwritten kernels"), std::string::npos);
  EXPECT_NE(fn->placementSummary().find("JIT compile failed"), std::string::npos) << fn->placementSummary();
  // The warning went to the runtime's sink, once.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], fn->stats.warnings[0]);
  // Same numbers as the all-JIT compile.
  auto m2 = KILN_TAKE(test::sharedRuntime().loadModuleFromFile(KILN_TEST_INPUTS "/conv_softmax.mlir"));
  auto want = KILN_TAKE(m2->call("predict", {x}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(want[0]), 1e-5, 1e-6));
}

TEST(Placement, OpModesAreParsedAndKeyTheCache) {
  auto bad = ops::parseOpModes("tosa.conv2d=fast");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("mode 'fast' is not jit, kernel or auto"), std::string::npos);
  auto bad2 = ops::parseOpModes("conv2d=kernel");
  ASSERT_FALSE(bool(bad2));
  EXPECT_NE(llvm::toString(bad2.takeError()).find("not an op name"), std::string::npos);
  auto ok = llvm::cantFail(ops::parseOpModes(" tosa.gather=jit , *=kernel "));
  EXPECT_EQ(ok.canonical(), "*=kernel,tosa.gather=jit");
  EXPECT_EQ(ok.modeFor("tosa.gather"), ops::OpMode::kJit);
  EXPECT_EQ(ok.modeFor("tosa.add"), ops::OpMode::kKernel);

  auto a = runtimeWith("");
  auto b = runtimeWith("tosa.matmul=kernel");
  const std::string mlp = models::findBuiltinModel("mlp")->mlir;
  auto ma = KILN_TAKE(a->loadModule(mlp, "mlp"));
  auto mb = KILN_TAKE(b->loadModule(mlp, "mlp"));
  auto ka = KILN_TAKE(ma->cacheKey("main", {TensorType{DType::f32, {1, 64}}}));
  auto kb = KILN_TAKE(mb->cacheKey("main", {TensorType{DType::f32, {1, 64}}}));
  EXPECT_EQ(ka.firstDifference(kb), "op_modes");
}

TEST(Placement, MixedPlansRoundTripThroughTheDiskCache) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("kiln-placement", dir);
  auto make = [&] {
    RuntimeOptions o;
    o.cacheDir = dir.str().str();
    o.cacheMode = CacheMode::kReadWrite;
    o.placement = llvm::cantFail(ops::parseOpModes("tosa.conv2d=kernel"));
    return llvm::cantFail(Runtime::create(o));
  };
  Tensor x = test::randomTensor({1, 16, 16, 3}, 6);
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  std::vector<Tensor> cold;
  {
    auto rt = make();
    auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
    cold = KILN_TAKE(m->call("main", {x}));
  }
  auto rt = make();
  auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
  auto warm = KILN_TAKE(m->call("main", {x}));
  EXPECT_EQ(m->pipelineRuns(), 0u);
  EXPECT_EQ(rt->compileService().stats().diskHits, 1u);
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  EXPECT_NE(fn->placementSummary().find("tosa.conv2d x2: mode=kernel"), std::string::npos);
  ASSERT_EQ(warm.size(), 1u);
  EXPECT_EQ(0, std::memcmp(warm[0].rawData(), cold[0].rawData(), cold[0].byteSize()));
  llvm::sys::fs::remove_directories(dir);
}

TEST(Kernels, ShapeFunctionsRejectBadUsesWithClearMessages) {
  HostExecutor ex(1);
  kernels::AttrMap none;
  auto r = kernels::runKernel("tosa.add", {Tensor::empty(DType::f32, {2, 3}), Tensor::empty(DType::f32, {2, 4})},
                              none, ex);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("tosa.add: dimension 1 is 3 in one operand and 4 in another"),
            std::string::npos);
  auto r2 = kernels::runKernel("tosa.matmul", {Tensor::empty(DType::f32, {1, 2, 3}), Tensor::empty(DType::f32, {1, 4, 5})},
                               none, ex);
  ASSERT_FALSE(bool(r2));
  EXPECT_NE(llvm::toString(r2.takeError()).find("need [N,H,C] x [N,C,W]"), std::string::npos);
  auto r3 = kernels::runKernel("tosa.nope", {}, none, ex);
  ASSERT_FALSE(bool(r3));
  EXPECT_NE(llvm::toString(r3.takeError()).find("no handwritten kernel for 'tosa.nope'"), std::string::npos);
  kernels::AttrMap axis;
  axis.set("axis", int64_t(5));
  auto r4 = kernels::runKernel("tosa.reduce_sum", {Tensor::empty(DType::f32, {2, 3})}, axis, ex);
  ASSERT_FALSE(bool(r4));
  EXPECT_NE(llvm::toString(r4.takeError()).find("axis 5 out of range for rank 2"), std::string::npos);
  // Gather indices out of range: an error, not a crash.
  std::vector<int32_t> idx = {0, 7};
  auto r5 = kernels::runKernel("tosa.gather",
                               {Tensor::empty(DType::f32, {1, 3, 2}), Tensor::fromVector<int32_t>(DType::i32, {1, 2}, idx)},
                               none, ex);
  ASSERT_FALSE(bool(r5));
  EXPECT_NE(llvm::toString(r5.takeError()).find("index 7 at [0, 1] is outside [0, 3)"), std::string::npos);
}

namespace {
// A user kernel: y = 2x + 1 over f32, for the custom op acme.twice_plus_one.
llvm::Expected<std::vector<TensorType>> twiceShape(llvm::ArrayRef<TensorType> in, const ops::AttrMap &) {
  if (in.size() != 1 || in[0].dtype != DType::f32)
    return error(ErrorCode::kUnsupported, "acme.twice_plus_one takes one f32 tensor");
  return std::vector<TensorType>{in[0]};
}
llvm::Error twiceCompute(const KernelArgs &a) {
  const float *x = static_cast<const float *>(a.inputs[0]);
  float *y = static_cast<float *>(a.outputs[0]);
  for (int64_t i = 0; i < a.inputTypes[0].numElements(); ++i) y[i] = 2 * x[i] + 1;
  return llvm::Error::success();
}
}  // namespace

TEST(Kernels, UserKernelsRegisterOnceAndRunInGraphsAndEagerly) {
  static const bool registered = [] {
    llvm::cantFail(registerKernel({"tosa.custom:acme.twice_plus_one", "loops", &twiceShape, &twiceCompute}));
    return true;
  }();
  (void)registered;
  // Registering twice, or something that is not an op, is an error.
  Status dup = toStatus(registerKernel({"tosa.custom:acme.twice_plus_one", "loops", &twiceShape, &twiceCompute}));
  EXPECT_EQ(dup.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(dup.message.find("already has a kernel (loops)"), std::string::npos) << dup.message;
  Status bad = toStatus(registerKernel({"twice", "loops", &twiceShape, &twiceCompute}));
  EXPECT_NE(bad.message.find("not an op name"), std::string::npos) << bad.message;
  Status undeclared = toStatus(registerKernel({"tosa.frobnicate", "loops", &twiceShape, &twiceCompute}));
  EXPECT_EQ(undeclared.message, "kernel for 'tosa.frobnicate': the op is not in kiln's op table (ops/Ops.def)");

  const char *mlir = R"mlir(
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %y = tosa.custom %x {operator_name = "twice_plus_one", domain_name = "acme", implementation_attrs = ""} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
)mlir";
  Tensor x = test::randomTensor({3, 4}, 8);
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(mlir, "user"));
  ASSERT_TRUE(m);
  auto out = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], 2 * x.data<float>()[i] + 1);
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_EQ(fn->plan.steps.size(), 1u);
  EXPECT_EQ(fn->plan.steps[0].kernel, "acme_twice_plus_one_f32_loops");
  EXPECT_EQ(fn->executable->steps()[0].name, "kernel:acme_twice_plus_one_f32_loops");

  eager::Context ctx(test::sharedRuntime());
  auto y = ctx.execute("tosa.custom:acme.twice_plus_one", {x}).value();
  ASSERT_TRUE(bool(y));
  EXPECT_FLOAT_EQ(y->data<float>()[5], 2 * x.data<float>()[5] + 1);
}

TEST(Kernels, NamesSayOpDtypeAndImplementation) {
  EXPECT_EQ(kernels::registry().lookup("tosa.conv2d")->nameFor({TensorType{DType::f32, {1, 8, 8, 3}}}),
            "conv2d_f32_im2col_eigen");
  EXPECT_EQ(kernels::registry().lookup("tosa.add")->nameFor({TensorType{DType::i32, {4}}}), "add_i32_eigen");
  EXPECT_EQ(kernels::registry().lookup("tosa.custom:kiln.gelu")->nameFor({TensorType{DType::f32, {4}}}),
            "kiln_gelu_f32_cpu");
}

TEST(OpTable, EveryKernelOpIsDeclaredAndEveryOpIsWellFormed) {
  for (const std::string &op : kernels::registry().ops())
    EXPECT_NE(ops::lookupOp(op), nullptr) << op << " has a kernel but is not in ops/Ops.def";
  std::set<std::string> names;
  for (const ops::OpSpec &s : ops::opTable()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " is declared twice";
    EXPECT_EQ(s.name.rfind("tosa.", 0), 0u) << s.name;
    for (size_t i = 0; i < s.operands.size(); ++i)
      EXPECT_TRUE(!s.operands[i].variadic || i + 1 == s.operands.size()) << s.name << ": variadic operand not last";
    // What placement believes is exactly the table.
    EXPECT_EQ(lowering::tosaOpHasLowering(s.name), s.lowers) << s.name;
  }
  EXPECT_FALSE(lowering::tosaOpHasLowering("tosa.custom:kiln.gelu"));
  EXPECT_EQ(ops::lookupOp("tosa.custom:acme.x"), ops::lookupOp("tosa.custom"));
  // Folded operands and attribute types drive the IR writer.
  const ops::OpSpec *conv = ops::lookupOp("tosa.conv2d");
  ASSERT_NE(conv, nullptr);
  EXPECT_TRUE(conv->operands[3].folded && conv->operands[3].name == "input_zp");
  EXPECT_FALSE(conv->operands[0].folded);
  ASSERT_NE(conv->attr("pad"), nullptr);
  EXPECT_EQ(conv->attr("pad")->type, ops::AttrType::kI64Array);
  EXPECT_EQ(ops::lookupOp("tosa.transpose")->attr("perms")->type, ops::AttrType::kI32Array);
}

namespace {
std::atomic<int> i16AddCalls{0};
llvm::Expected<std::vector<TensorType>> i16AddShape(llvm::ArrayRef<TensorType> in, const ops::AttrMap &) {
  if (in.size() != 2 || in[0] != in[1]) return error(ErrorCode::kUnsupported, "same-shape operands only");
  return std::vector<TensorType>{in[0]};
}
llvm::Error i16AddCompute(const KernelArgs &a) {
  ++i16AddCalls;
  auto *x = static_cast<const int16_t *>(a.inputs[0]), *y = static_cast<const int16_t *>(a.inputs[1]);
  auto *z = static_cast<int16_t *>(a.outputs[0]);
  for (int64_t i = 0; i < a.inputTypes[0].numElements(); ++i) z[i] = int16_t(x[i] + y[i]);
  return llvm::Error::success();
}
}  // namespace

TEST(Kernels, UserKernelsRegisterPerDtypeBesideTheBuiltIns) {
  static const bool registered = [] {
    KernelDef def{"tosa.add", "counting", &i16AddShape, &i16AddCompute};
    def.dtypes = {DType::i16};
    llvm::cantFail(registerKernel(def));
    return true;
  }();
  (void)registered;
  KernelDef again{"tosa.add", "other", &i16AddShape, &i16AddCompute};
  again.dtypes = {DType::i16, DType::i8};
  EXPECT_EQ(toStatus(registerKernel(again)).message, "'tosa.add' already has a kernel for i16 (counting)");
  EXPECT_EQ(toStatus(registerKernel({"tosa.add", "other", &i16AddShape, &i16AddCompute})).message,
            "'tosa.add' already has a kernel (eigen)");

  // Graphs: the i16 use of tosa.add runs the user's kernel, the f32 use the built-in one.
  auto rt = runtimeWith("tosa.add=kernel");
  for (DType d : {DType::i16, DType::f32}) {
    std::string t = "tensor<2x3x" + std::string(dtypeName(d)) + ">";
    std::string mlir = "func.func @main(%a: " + t + ", %b: " + t + ") -> " + t + " {\n  %c = tosa.add %a, %b : (" +
                       t + ", " + t + ") -> " + t + "\n  return %c : " + t + "\n}\n";
    auto m = KILN_TAKE(rt->loadModule(mlir, "add"));
    Tensor a = Tensor::empty(d, {2, 3}), b = Tensor::empty(d, {2, 3});
    for (int i = 0; i < 6; ++i) {
      if (d == DType::i16) a.data<int16_t>()[i] = int16_t(i), b.data<int16_t>()[i] = int16_t(10 * i);
      else a.data<float>()[i] = float(i), b.data<float>()[i] = float(10 * i);
    }
    int before = i16AddCalls;
    auto out = KILN_TAKE(m->call("main", {a, b}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].elementAsDouble(5), 55.0);
    auto fn = KILN_TAKE(m->compile("main", {a.type(), b.type()}));
    EXPECT_EQ(fn->plan.steps[0].kernel, d == DType::i16 ? "add_i16_counting" : "add_f32_eigen");
    EXPECT_EQ(i16AddCalls - before, d == DType::i16 ? 1 : 0);
  }
  // Eager dispatch chooses the same way.
  eager::Context ctx(test::sharedRuntime());
  Tensor a = Tensor::empty(DType::i16, {3}), b = Tensor::empty(DType::i16, {3});
  for (int i = 0; i < 3; ++i) a.data<int16_t>()[i] = int16_t(i), b.data<int16_t>()[i] = 1;
  int before = i16AddCalls;
  auto y = ctx.add(a, b).value();
  ASSERT_TRUE(bool(y));
  EXPECT_EQ(y->data<int16_t>()[2], 3);
  EXPECT_EQ(i16AddCalls - before, 1);
}

// Issue 14, item 3: one NaN semantics in generated code and kernels —
// TOSA's default nan_mode PROPAGATE (a NaN operand gives NaN; argmax picks
// the first NaN) and NaN cast to an integer saturating to its largest value,
// as MLIR's tosa-to-linalg lowering does. Checked bit for bit, per op.
TEST(Placement, NaNsGiveTheSameResultsInGeneratedCodeAndKernels) {
  const char *mlir = R"mlir(
func.func @main(%a: tensor<1x2x4x1xf32>, %b: tensor<1x2x4x1xf32>) -> (tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>,
    tensor<1x2x1xi32>, tensor<1x2x4x1xi32>, tensor<1x2x4x1xi8>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>,
    tensor<1x1x2x1xf32>, tensor<1x2x4x1xf32>) {
  %0 = tosa.maximum %a, %b : (tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %1 = tosa.minimum %a, %b : (tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %2 = tosa.argmax %a {axis = 2 : i32} : (tensor<1x2x4x1xf32>) -> tensor<1x2x1xi32>
  %3 = tosa.cast %a : (tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xi32>
  %4 = tosa.cast %b : (tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xi8>
  %5 = tosa.reduce_max %a {axis = 2 : i32} : (tensor<1x2x4x1xf32>) -> tensor<1x2x1x1xf32>
  %6 = tosa.reduce_min %b {axis = 2 : i32} : (tensor<1x2x4x1xf32>) -> tensor<1x2x1x1xf32>
  %7 = tosa.max_pool2d %a {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x2x4x1xf32>) -> tensor<1x1x2x1xf32>
  %8 = tosa.clamp %a {min_val = 0.0 : f32, max_val = 2.5 : f32} : (tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>, tensor<1x2x1xi32>,
    tensor<1x2x4x1xi32>, tensor<1x2x4x1xi8>, tensor<1x2x1x1xf32>, tensor<1x2x1x1xf32>, tensor<1x1x2x1xf32>,
    tensor<1x2x4x1xf32>
}
)mlir";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::fromVector<float>(DType::f32, {1, 2, 4, 1}, {1, nan, 3, 2, -1, 0.5f, 7, 4});
  Tensor b = Tensor::fromVector<float>(DType::f32, {1, 2, 4, 1}, {nan, 2, 1, nan, 5, 1, 0.25f, 300});
  auto jitRt = runtimeWith("*=jit");
  auto kernelRt = runtimeWith("*=kernel");
  Result j = runModel(*jitRt, mlir, "main", {a, b});
  Result k = runModel(*kernelRt, mlir, "main", {a, b});
  ASSERT_EQ(j.outputs.size(), 9u);
  ASSERT_EQ(k.outputs.size(), 9u);
  EXPECT_NE(k.placement.find("0 JIT"), std::string::npos) << k.placement;  // every op on a kernel
  const char *names[] = {"maximum", "minimum", "argmax", "cast f32->i32", "cast f32->i8",
                         "reduce_max", "reduce_min", "max_pool2d", "clamp"};
  for (size_t i = 0; i < 9; ++i) {
    ASSERT_EQ(j.outputs[i].byteSize(), k.outputs[i].byteSize()) << names[i];
    EXPECT_EQ(std::memcmp(j.outputs[i].rawData(), k.outputs[i].rawData(), j.outputs[i].byteSize()), 0)
        << names[i] << ": generated code " << ::testing::PrintToString(test::asDoubles(j.outputs[i]))
        << " vs kernel " << ::testing::PrintToString(test::asDoubles(k.outputs[i]));
  }
  // The semantics themselves.
  EXPECT_TRUE(std::isnan(j.outputs[0].data<float>()[0]) && std::isnan(j.outputs[0].data<float>()[1]));
  EXPECT_EQ(j.outputs[2].data<int32_t>()[0], 1);  // the first NaN
  EXPECT_EQ(j.outputs[3].data<int32_t>()[1], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(j.outputs[4].data<int8_t>()[0], std::numeric_limits<int8_t>::max());
  EXPECT_EQ(j.outputs[4].data<int8_t>()[7], std::numeric_limits<int8_t>::max());  // 300 saturates
  EXPECT_TRUE(std::isnan(j.outputs[7].data<float>()[0]));
}

// Shift amounts outside [0, bits) — undefined in TOSA, poison in LLVM — give
// 0 (left, logical right) or the sign (arithmetic right), the same in
// generated code and kernels; boolean inputs must hold 0 or 1.
TEST(Placement, OutOfRangeShiftsAndBadBooleansAreDefined) {
  const char *mlir = R"mlir(
func.func @main(%a: tensor<6xi32>, %s: tensor<6xi32>, %a8: tensor<6xi8>, %s8: tensor<6xi8>)
    -> (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi8>, tensor<6xi8>) {
  %0 = tosa.logical_left_shift %a, %s : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %1 = tosa.logical_right_shift %a, %s : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %2 = tosa.arithmetic_right_shift %a, %s {round = false} : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %3 = tosa.logical_left_shift %a8, %s8 : (tensor<6xi8>, tensor<6xi8>) -> tensor<6xi8>
  %4 = tosa.arithmetic_right_shift %a8, %s8 {round = false} : (tensor<6xi8>, tensor<6xi8>) -> tensor<6xi8>
  return %0, %1, %2, %3, %4 : tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi8>, tensor<6xi8>
}
)mlir";
  Tensor a = Tensor::fromVector<int32_t>(DType::i32, {6}, {-7, 5, -1024, 3, 1, -2});
  Tensor s = Tensor::fromVector<int32_t>(DType::i32, {6}, {1, 31, 32, 40, -1, 2147483647});
  Tensor a8 = Tensor::fromVector<int8_t>(DType::i8, {6}, {-7, 5, -100, 3, 1, -2});
  Tensor s8 = Tensor::fromVector<int8_t>(DType::i8, {6}, {1, 7, 8, 9, -1, 127});
  auto jitRt = runtimeWith("*=jit");
  auto kernelRt = runtimeWith("*=kernel");
  Result j = runModel(*jitRt, mlir, "main", {a, s, a8, s8});
  Result k = runModel(*kernelRt, mlir, "main", {a, s, a8, s8});
  ASSERT_EQ(j.outputs.size(), 5u);
  ASSERT_EQ(k.outputs.size(), 5u);
  EXPECT_NE(k.placement.find("0 JIT"), std::string::npos) << k.placement;
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(test::asDoubles(j.outputs[i]), test::asDoubles(k.outputs[i])) << "result " << i;
  EXPECT_EQ(test::asDoubles(j.outputs[0]), (std::vector<double>{-14, double(int32_t(5u << 31)), 0, 0, 0, 0}));
  EXPECT_EQ(test::asDoubles(j.outputs[2]), (std::vector<double>{-4, 0, -1, 0, 0, -1}));
  EXPECT_EQ(test::asDoubles(j.outputs[4]), (std::vector<double>{-4, 0, -1, 0, 0, -1}));

  const char *select = R"mlir(
func.func @main(%c: tensor<3xi1>, %a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %0 = tosa.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
)mlir";
  Tensor c = Tensor::empty(DType::i1, {3});
  auto *bytes = static_cast<uint8_t *>(c.rawData());
  bytes[0] = 1;
  bytes[1] = 2;
  bytes[2] = 0;
  auto m = KILN_TAKE(jitRt->loadModule(select, "select"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("main", {c, test::randomTensor({3}, 1), test::randomTensor({3}, 2)}));
  EXPECT_NE(msg.find("holds 2 at element 1: booleans must be 0 or 1"), std::string::npos) << msg;
}

// Issue 14, item 2: tosa.rescale reading its multiplier and shift from
// dense_resource blobs (per channel) gives the right values, the same on
// every run.
TEST(Placement, RescaleWithBlobMultipliersIsRightEveryRun) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<4xi8>) -> tensor<4xi8> {
  %m = "tosa.const"() <{values = dense_resource<mult> : tensor<4xi32>}> : () -> tensor<4xi32>
  %s = "tosa.const"() <{values = dense_resource<shift> : tensor<4xi8>}> : () -> tensor<4xi8>
  %izp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %ozp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r = tosa.rescale %x, %m, %s, %izp, %ozp {scale32 = true, rounding_mode = DOUBLE_ROUND, per_channel = true, input_unsigned = false, output_unsigned = false} : (tensor<4xi8>, tensor<4xi32>, tensor<4xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<4xi8>
  return %r : tensor<4xi8>
}
{-#
  dialect_resources: {
    builtin: {
      mult: "0x0400000000000040000000400000004000000040",
      shift: "0x010000001F1F1E1E"
    }
  }
#-}
)mlir";
  Tensor x = Tensor::fromVector<int8_t>(DType::i8, {4}, {4, 6, 3, -5});
  for (const char *modes : {"*=jit", "*=kernel"}) {
    auto rt = runtimeWith(modes);
    for (int run = 0; run < 3; ++run) {
      Result r = runModel(*rt, mlir, "main", {x});
      ASSERT_EQ(r.outputs.size(), 1u) << modes;
      // 2^30 / 2^31 halves, 2^30 / 2^30 keeps.
      EXPECT_EQ(test::asDoubles(r.outputs[0]), (std::vector<double>{2, 3, 3, -5})) << modes << " run " << run;
    }
  }
}

// Placement by measurement: `auto` anchor ops that a kernel also takes are
// timed both ways at compile time; the decision and its figures are in the
// plan's summary, whichever way it went, and never change the results.
TEST(Placement, MeasuredPlacementRecordsItsFiguresAndKeepsTheResults) {
  auto measured = runtimeWith("measure=on");
  for (const char *name : {"mlp", "cnn"}) {
    SCOPED_TRACE(name);
    const auto *model = models::findBuiltinModel(name);
    Tensor x = std::string(name) == "mlp" ? test::randomTensor({5, 64}, 11) : test::randomTensor({1, 16, 16, 3}, 12);
    Result on = runModel(*measured, model->mlir, "main", {x});
    Result off = runModel(test::sharedRuntime(), model->mlir, "main", {x});
    ASSERT_EQ(on.outputs.size(), 1u);
    ASSERT_EQ(off.outputs.size(), 1u);
    EXPECT_TRUE(test::allClose(test::asDoubles(on.outputs[0]), test::asDoubles(off.outputs[0]), 1e-5, 1e-6));
    // mlp: two matmuls; cnn: two convs, two poolings and a matmul, one per JIT step.
    EXPECT_EQ(on.stats.placementsMeasured, std::string(name) == "mlp" ? 2 : 5) << on.placement;
    EXPECT_EQ(off.stats.placementsMeasured, 0);
    EXPECT_EQ(off.placement.find("measured"), std::string::npos) << off.placement;
    const char *anchor = std::string(name) == "mlp" ? "measured tosa.matmul(" : "measured tosa.conv2d(";
    EXPECT_NE(on.placement.find(anchor), std::string::npos) << on.placement;
    bool stage = false;
    for (const auto &s : on.stats.stages) stage |= s.stage == "measure-placement" && s.ms > 0;
    EXPECT_TRUE(stage);
    // Each "-> kernel" decision is a kernel step placed for that reason.
    size_t wins = occurrences(on.placement, "-> kernel");
    EXPECT_EQ(int(wins), on.stats.kernelsChosen) << on.placement;
    if (wins) {
      EXPECT_NE(on.placement.find(": measured: kernel "), std::string::npos) << on.placement;
    }
  }
}

TEST(Placement, PartitionPlacesOpsThatAKernelWonOnIt) {
  auto program = KILN_TAKE(lowering::Program::parse(models::findBuiltinModel("mlp")->mlir, "mlp"));
  ASSERT_TRUE(program);
  const std::vector<TensorType> in = {TensorType{DType::f32, {3, 64}}};
  ops::PlacementOptions autoModes;  // measuring on (the default)
  auto partition = [&](const std::map<std::string, std::string> &won) {
    return partitionMain(*program, in, autoModes, won);
  };
  auto first = partition({});
  ASSERT_TRUE(first);
  // Both matmuls stay on JIT, each its step's one alternative.
  std::vector<std::string> signatures;
  for (const auto &step : first->plan.steps) {
    ASSERT_EQ(step.kind, lowering::PlanStep::kJit);
    ASSERT_EQ(step.alternatives.size(), 1u) << step.name;
    EXPECT_EQ(step.alternatives[0].op, "tosa.matmul");
    EXPECT_EQ(step.alternatives[0].kernel, "matmul_f32_eigen");
    EXPECT_EQ(step.alternatives[0].signature.rfind("tosa.matmul(1x3x", 0), 0u)
        << step.alternatives[0].signature;
    // The activations vary per call, the weight (a constant) does not: the
    // op timed alone gets it as a constant too.
    EXPECT_EQ(step.alternatives[0].constantInputs, (std::vector<bool>{false, true})) << step.name;
    EXPECT_FALSE(step.alternatives[0].aloneInStep) << step.name;  // a bias add and more fused in
    signatures.push_back(step.alternatives[0].signature);
  }
  ASSERT_EQ(signatures.size(), 2u);
  EXPECT_NE(signatures[0], signatures[1]);
  // The first matmul "won" by its kernel: placed there, with the figures as
  // the reason; the second stays a JIT alternative.
  auto second = partition({{signatures[0], "measured: kernel 1.0 us < JIT 2.0 us alone"}});
  ASSERT_TRUE(second);
  int kernelSteps = 0, alternatives = 0;
  for (const auto &step : second->plan.steps) {
    if (step.kind == lowering::PlanStep::kKernel) {
      ++kernelSteps;
      EXPECT_EQ(step.op, "tosa.matmul");
      EXPECT_EQ(step.reason, "measured: kernel 1.0 us < JIT 2.0 us alone");
    }
    for (const auto &alt : step.alternatives) {
      ++alternatives;
      EXPECT_EQ(alt.signature, signatures[1]);
    }
  }
  EXPECT_EQ(kernelSteps, 1);
  EXPECT_EQ(alternatives, 1);
  // measure=off: no alternatives, and the measurements are not applied.
  autoModes.measure = false;
  auto off = partition({{signatures[0], "measured"}});
  ASSERT_TRUE(off);
  for (const auto &step : off->plan.steps) {
    EXPECT_EQ(step.kind, lowering::PlanStep::kJit);
    EXPECT_TRUE(step.alternatives.empty());
  }
}

TEST(Placement, MeasurementsAreStoredWithTheCompiledCode) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("kiln-measure", dir);
  auto make = [&] {
    RuntimeOptions o;
    o.cacheDir = dir.str().str();
    o.cacheMode = CacheMode::kReadWrite;
    return llvm::cantFail(Runtime::create(o));
  };
  Tensor x = test::randomTensor({1, 16, 16, 3}, 13);
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  std::string coldSummary;
  {
    auto rt = make();
    auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
    auto fn = KILN_TAKE(m->compile("main", {x.type()}));
    ASSERT_TRUE(fn);
    coldSummary = fn->placementSummary();
  }
  EXPECT_NE(coldSummary.find("measured tosa.conv2d("), std::string::npos) << coldSummary;
  auto rt = make();
  auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_TRUE(fn);
  EXPECT_EQ(m->pipelineRuns(), 0u);
  EXPECT_TRUE(fn->stats.fromObject);
  EXPECT_EQ(fn->placementSummary(), coldSummary);  // the decisions and figures, not measured again
  llvm::sys::fs::remove_directories(dir);
}

// Placement decisions outlive the process: the compile cache keeps them
// (for the target) beside the code, so a later process compiling the same
// op uses (another model with the same conv shapes, or the same model once
// its code is gone) places it without timing it again. A damaged record is
// dropped with a warning, and the ops are measured again.
TEST(Placement, DecisionsOutliveTheProcessInTheCompileCache) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("kiln-decisions", dir);
  std::vector<std::string> warnings;
  std::mutex warningsMu;
  // (The machine taken as quiet: ctest runs other tests beside this one.)
  auto make = [&] {
    RuntimeOptions o;
    o.cacheDir = dir.str().str();
    o.cacheMode = CacheMode::kReadWrite;
    o.warnings = [&](const std::string &w) {
      std::lock_guard<std::mutex> lock(warningsMu);
      warnings.push_back(w);
    };
    jit::FaultInjection quiet;
    quiet.machineBusy = false;
    return llvm::cantFail(Runtime::createWithFaults(o, quiet));
  };
  auto dropCode = [&] { return dropCompiledCode(dir.str().str()); };
  Tensor x = test::randomTensor({1, 16, 16, 3}, 23);
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  auto compile = [&](Runtime &rt, std::vector<Tensor> *out) {
    auto m = KILN_TAKE(rt.loadModule(cnn, "cnn"));
    if (!m) return std::shared_ptr<const jit::CompiledFunction>();
    if (out) *out = KILN_TAKE(m->call("main", {x}));
    return KILN_TAKE(m->compile("main", {x.type()}));
  };
  std::vector<Tensor> first, second;
  std::string firstSummary;
  {
    auto rt = make();
    auto fn = compile(*rt, &first);
    ASSERT_TRUE(fn);
    EXPECT_EQ(fn->stats.placementsMeasured, 5) << fn->placementSummary();
    firstSummary = fn->placementSummary();
  }
  cache::DiskEntryInfo record = dropCode();
  ASSERT_EQ(record.key.function, "kiln.placement") << "no decisions were written";
  {
    auto rt = make();
    auto fn = compile(*rt, &second);
    ASSERT_TRUE(fn);
    EXPECT_FALSE(fn->stats.fromObject);  // compiled again ...
    EXPECT_EQ(fn->stats.placementsMeasured, 0) << fn->placementSummary();  // ... without timing
    EXPECT_EQ(occurrences(fn->placementSummary(), "(measured by an earlier process)"), 5u) << fn->placementSummary();
    EXPECT_EQ(occurrences(fn->placementSummary(), "-> kernel"), occurrences(firstSummary, "-> kernel"));
    EXPECT_EQ(fn->placementSummary().substr(0, fn->placementSummary().find('\n')),
              firstSummary.substr(0, firstSummary.find('\n')));  // the same placement
  }
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(first[0]), test::asDoubles(second[0]), 1e-5, 1e-6));
  // A damaged record: dropped with a warning; the ops are measured again
  // and the record written anew.
  record = dropCode();
  ASSERT_FALSE(record.path.empty());
  {
    std::string bytes;
    auto buf = llvm::MemoryBuffer::getFile(record.path);
    ASSERT_TRUE(bool(buf));
    bytes = (*buf)->getBuffer().str();
    bytes[bytes.size() / 2] ^= 0x5a;
    std::error_code ec;
    llvm::raw_fd_ostream os(record.path, ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }
  {
    auto rt = make();
    auto fn = compile(*rt, nullptr);
    ASSERT_TRUE(fn);
    EXPECT_EQ(fn->stats.placementsMeasured, 5) << fn->placementSummary();
  }
  {
    std::lock_guard<std::mutex> lock(warningsMu);
    EXPECT_TRUE(llvm::any_of(warnings, [](const std::string &w) { return w.find("checksum") != std::string::npos; }))
        << llvm::join(warnings, "\n");
  }
  EXPECT_EQ(dropCode().key.function, "kiln.placement");
  llvm::sys::fs::remove_directories(dir);
}

// Decisions timed while the machine was busy (another process's threads
// runnable: a build, another replica compiling) hold for their process
// but not for the next: it times those ops again, and its quiet decisions
// replace them on disk. (A busy machine slows a parallel JIT kernel more
// than a kernel: ResNet-50's layer-4 3x3 convs were once placed on Eigen
// at 3.4 ms a call against 1.1 ms on JIT, timed beside a build, and every
// later process took that decision.)
TEST(Placement, DecisionsTimedOnABusyMachineAreTimedAgainLater) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("kiln-busy-decisions", dir);
  auto make = [&](bool busy) {
    RuntimeOptions o;
    o.cacheDir = dir.str().str();
    o.cacheMode = CacheMode::kReadWrite;
    jit::FaultInjection f;
    f.machineBusy = busy;
    return llvm::cantFail(Runtime::createWithFaults(o, f));
  };
  auto dropCode = [&] { dropCompiledCode(dir.str().str()); };
  Tensor x = test::randomTensor({1, 16, 16, 3}, 23);
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  auto compile = [&](bool busy) {
    auto rt = make(busy);
    auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
    if (!m) return std::shared_ptr<const jit::CompiledFunction>();
    return KILN_TAKE(m->compile("main", {x.type()}));
  };
  auto busyFn = compile(true);
  ASSERT_TRUE(busyFn);
  EXPECT_EQ(busyFn->stats.placementsMeasured, 5) << busyFn->placementSummary();
  EXPECT_EQ(occurrences(busyFn->placementSummary(), "timed while the machine was busy"), 5u)
      << busyFn->placementSummary();
  dropCode();
  auto quietFn = compile(false);  // times them again ...
  ASSERT_TRUE(quietFn);
  EXPECT_EQ(quietFn->stats.placementsMeasured, 5) << quietFn->placementSummary();
  EXPECT_EQ(occurrences(quietFn->placementSummary(), "(measured by an earlier process)"), 0u);
  EXPECT_EQ(occurrences(quietFn->placementSummary(), "busy"), 0u) << quietFn->placementSummary();
  dropCode();
  auto laterFn = compile(true);  // ... and those quiet decisions are taken, even on a busy machine
  ASSERT_TRUE(laterFn);
  EXPECT_EQ(laterFn->stats.placementsMeasured, 0) << laterFn->placementSummary();
  EXPECT_EQ(occurrences(laterFn->placementSummary(), "(measured by an earlier process)"), 5u)
      << laterFn->placementSummary();
  llvm::sys::fs::remove_directories(dir);
}

// The machine's load as placement sees it: another process's runnable
// thread (this process's own threads are not load: its executor's
// workers spin between loops).
TEST(Placement, AnotherProcessThatWantsACoreIsLoad) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) {
    }
  }
  int seen = 0;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    seen += jit::PlacementTuner::otherRunnableThreads() >= 1;
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(seen, 5);
}

// What a seeded record may say: kiln's JSON form, each decision's fields in
// range and consistent with the rule measure() decides by; anything else
// is skipped (a record cannot force a kernel its own figures do not pick).
TEST(Placement, SeededDecisionsAreCheckedBeforeTheyCount) {
  jit::PlacementTuner t(nullptr);
  EXPECT_FALSE(bool(llvm::expectedToOptional(t.seed("not json"))));
  EXPECT_FALSE(bool(llvm::expectedToOptional(t.seed(R"({"version": 2, "decisions": []})"))));
  EXPECT_FALSE(bool(llvm::expectedToOptional(t.seed(R"([1, 2])"))));
  auto entry = [](const std::string &sig, double stepMs, double kernelMs, double aloneMs, bool wins) {
    return "{\"signature\": \"" + sig + "\", \"op\": \"tosa.conv2d\", \"kernel\": \"k\", \"step\": \"cluster0, 1 op\", " +
           "\"step_ms\": " + std::to_string(stepMs) + ", \"kernel_ms\": " + std::to_string(kernelMs) +
           ", \"alone_ms\": " + std::to_string(aloneMs) + ", \"kernel_wins\": " + (wins ? "true" : "false") + "}";
  };
  std::string json = R"({"version": 1, "decisions": [)" + entry("a", 1.0, 2.0, -1, false) + ", " +
                     entry("b", 1.0, 0.5, 1.0, true) + ", " +
                     entry("c", 1.0, 0.99, 1.0, true) + ", " +   // does not beat the op by 10%: not a win
                     entry("d", -5, 0.5, 1.0, true) + ", " +     // out of range
                     entry("e", 1.0, 2.0, -1, true) + ", " +     // a win with no op-alone time
                     entry("h", 1.0, 0.5, 1.0, true).insert(1, R"("busy": true, )") + ", " +  // timed on a busy machine
                     entry("i", 1.0, 0.5, 1.0, true).insert(1, R"("busy": 1, )") + ", " +     // not a boolean
                     R"({"signature": "f", "op": "x"}, 7, "g"]})";
  auto added = llvm::expectedToOptional(t.seed(json));
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(*added, 2u);
  auto wins = t.kernelWins();
  ASSERT_EQ(wins.size(), 1u);
  EXPECT_EQ(wins.begin()->first, "b");
  EXPECT_EQ(t.takeNewDecisions(), 0u);  // seeded, not made here: nothing new to write
  // Round trip, and a decision already made is not replaced.
  jit::PlacementTuner u(nullptr);
  EXPECT_EQ(llvm::expectedToOptional(u.seed(t.toJson())).value_or(99), 2u);
  EXPECT_EQ(llvm::expectedToOptional(u.seed(t.toJson())).value_or(99), 0u);
  EXPECT_EQ(u.kernelWins(), wins);
}

TEST(Placement, MeasureIsAnOptionOfTheOpModesAndKeysTheCache) {
  auto off = llvm::cantFail(ops::parseOpModes("tosa.conv2d=kernel,measure=off"));
  EXPECT_FALSE(off.measuring());
  EXPECT_EQ(off.canonical(), "tosa.conv2d=kernel,measure=off");
  EXPECT_TRUE(llvm::cantFail(ops::parseOpModes("")).measuring());
  auto bad = ops::parseOpModes("measure=sometimes");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("measure takes on or off"), std::string::npos);
  ops::PlacementOptions merged = llvm::cantFail(ops::parseOpModes("measure=off"));
  merged.merge(llvm::cantFail(ops::parseOpModes("measure=on")));
  EXPECT_TRUE(merged.measuring());
  // winograd, padrows, panels and attention take on|off the same way: off in a spec
  // (canonical after the toggle written before it), on by default, any other
  // value refused, and off wins when merged.
  struct Toggle {
    const char *name, *before, *bad;
    bool (ops::PlacementOptions::*on)() const;
  };
  for (const Toggle &t : {Toggle{"winograd", "measure", "fast", &ops::PlacementOptions::winogradOn},
                          Toggle{"padrows", "winograd", "1", &ops::PlacementOptions::padRowsOn},
                          Toggle{"panels", "padrows", "yes", &ops::PlacementOptions::panelsOn},
                          Toggle{"attention", "panels", "fused", &ops::PlacementOptions::attentionOn}}) {
    SCOPED_TRACE(t.name);
    std::string name = t.name, before = t.before;
    auto toggledOff = llvm::cantFail(ops::parseOpModes(name + "=off," + before + "=off"));
    EXPECT_FALSE((toggledOff.*t.on)());
    EXPECT_EQ(toggledOff.canonical(), before + "=off," + name + "=off");
    EXPECT_TRUE((llvm::cantFail(ops::parseOpModes("")).*t.on)());
    std::string badItem = name + "=" + t.bad;
    auto refused = ops::parseOpModes(badItem);
    ASSERT_FALSE(bool(refused));
    EXPECT_NE(llvm::toString(refused.takeError()).find("op mode '" + badItem + "': " + name + " takes on or off"),
              std::string::npos);
    merged.merge(toggledOff);
    EXPECT_FALSE((merged.*t.on)());
  }

  auto a = runtimeWith("measure=on");
  auto b = runtimeWith("measure=off");
  const std::string mlp = models::findBuiltinModel("mlp")->mlir;
  auto ka = KILN_TAKE(KILN_TAKE(a->loadModule(mlp, "mlp"))->cacheKey("main", {TensorType{DType::f32, {1, 64}}}));
  auto kb = KILN_TAKE(KILN_TAKE(b->loadModule(mlp, "mlp"))->cacheKey("main", {TensorType{DType::f32, {1, 64}}}));
  EXPECT_EQ(ka.firstDifference(kb), "op_modes");
}

// kiln-split-conv-padding moves a JIT conv's padding into a tosa.pad after
// placement; placement by measurement still names and times the conv as the
// graph has it (padded, on its unpadded input), and a conv a kernel won
// keeps its padding (the kernel pads by itself).
TEST(Placement, MeasuredConvsAreTheGraphsOpsBeforeTheirPaddingIsSplit) {
  // ResNet-50: 3x3 convs whose padding moves into the cluster that
  // produces their input (the shapes then differ from the conv's own).
  auto program = KILN_TAKE(models::findBuiltinModel("resnet50")->build());
  ASSERT_TRUE(program);
  const std::vector<TensorType> in = {TensorType{DType::f32, {1, 224, 224, 3}}};
  auto partition = [&](const std::map<std::string, std::string> &won) {
    return partitionMain(*program, in, ops::PlacementOptions{}, won);
  };
  auto first = partition({});
  ASSERT_TRUE(first);
  const lowering::PlanStep::Alternative *conv = nullptr;
  int convs = 0;
  for (const auto &step : first->plan.steps)
    for (const auto &alt : step.alternatives) {
      // Every alternative is the op as its kernel would run it: the
      // kernel's shape function gives the plan's result types.
      auto choice = kernels::registry().select(alt.op, alt.inputs, alt.attrs);
      ASSERT_TRUE(bool(choice)) << alt.signature;
      EXPECT_EQ(choice->results, alt.results) << alt.signature;
      convs += alt.op == "tosa.conv2d";
      if (alt.op == "tosa.conv2d" && !conv) {
        conv = &alt;
        // The stem's cluster pads the graph's input for it.
        EXPECT_NE(std::find(step.ops.begin(), step.ops.end(), "tosa.pad"), step.ops.end());
      }
    }
  EXPECT_EQ(convs, 53);  // every conv of ResNet-50
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->inputs[0], in[0]);  // unpadded
  std::vector<int64_t> stemPad = std::get<std::vector<int64_t>>(conv->attrs.all().at("pad"));
  EXPECT_NE(stemPad, (std::vector<int64_t>{0, 0, 0, 0}));
  // The kernel "won": the conv runs on it, padded by the kernel, no tosa.pad.
  std::string signature = conv->signature;
  auto second = partition({{signature, "measured: kernel 1.0 us < JIT 2.0 us alone"}});
  ASSERT_TRUE(second);
  int kernelConvs = 0;
  for (const auto &step : second->plan.steps) {
    if (step.kind == lowering::PlanStep::kKernel && step.op == "tosa.conv2d") {
      ++kernelConvs;
      EXPECT_EQ(std::get<std::vector<int64_t>>(step.attrs.all().at("pad")), stemPad);
      EXPECT_EQ(second->plan.values[step.inputs[0]].type, in[0]);
    }
    if (step.kind == lowering::PlanStep::kJit && step.ops.size() == 1) {
      EXPECT_NE(step.ops[0], "tosa.pad");
    }
  }
  EXPECT_EQ(kernelConvs, 1);
}

// The whole loop when a kernel wins (injected, so that the test does not
// depend on timings): measured after the first compile, partitioned and
// compiled again with the convs on their kernel (padding and all), same
// results, and the decisions in the summary.
TEST(Placement, KernelsThatWinMeasurementRunTheOpsAfterASecondPartition) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  jit::FaultInjection faults;
  faults.kernelsWinMeasurement = {"tosa.conv2d"};
  auto rt = llvm::cantFail(Runtime::createWithFaults(o, faults));
  Tensor x = test::randomTensor({1, 16, 16, 3}, 17);
  const std::string cnn = models::findBuiltinModel("cnn")->mlir;
  Result won = runModel(*rt, cnn, "main", {x});
  Result jit = runModel(test::sharedRuntime(), cnn, "main", {x});
  ASSERT_EQ(won.outputs.size(), 1u);
  ASSERT_EQ(jit.outputs.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(won.outputs[0]), test::asDoubles(jit.outputs[0]), 1e-5, 1e-6));
  EXPECT_EQ(won.stats.kernelsChosen, 2) << won.placement;
  EXPECT_NE(won.placement.find("2 handwritten (tosa.conv2d x"), std::string::npos) << won.placement;
  EXPECT_NE(won.placement.find("measured: kernel "), std::string::npos) << won.placement;
  EXPECT_EQ(occurrences(won.placement, "-> kernel"), 2u) << won.placement;
  // The kernels pad by themselves: no tosa.pad is left for them.
  auto m = KILN_TAKE(rt->loadModule(cnn, "cnn"));
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_TRUE(fn);
  for (const auto &step : fn->plan.steps) {
    if (step.kind == lowering::PlanStep::kKernel) {
      EXPECT_EQ(step.op, "tosa.conv2d");
      EXPECT_NE(std::get<std::vector<int64_t>>(step.attrs.all().at("pad")), (std::vector<int64_t>{0, 0, 0, 0}));
    }
    for (const std::string &op : step.ops) EXPECT_NE(op, "tosa.pad") << step.name;
  }
}

// A conv that placement by measurement moves onto its kernel reads its
// hoisted filter through a layout read-back (the filter was stored HWCF for
// the generated code it was compiled for first). That read-back
// reads weights only: it runs once when the executable is built, and its
// result is a constant of the executable, not a step of every call. The
// results are those of the all-JIT placement.
TEST(Placement, StepsThatReadOnlyWeightsRunOnceNotPerCall) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::string filter = "\"0x";  // raw little-endian floats
  for (int i = 0; i < 32 * 3 * 3 * 16; ++i) {
    float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    char hex[9];
    for (int b = 0; b < 4; ++b) std::snprintf(hex + 2 * b, 3, "%02X", (bits >> (8 * b)) & 0xFF);
    filter += hex;
  }
  filter += "\"";
  std::string mlir = R"mlir(
func.func @main(%x: tensor<1x8x8x16xf32>) -> tensor<1x8x8x32xf32> {
  %w = "tosa.const"() <{values = dense<)mlir" + filter + R"mlir(> : tensor<32x3x3x16xf32>}> : () -> tensor<32x3x3x16xf32>
  %b = "tosa.const"() <{values = dense<0.5> : tensor<32xf32>}> : () -> tensor<32xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, tensor<32x3x3x16xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x32xf32>
  return %y : tensor<1x8x8x32xf32>
}
)mlir";
  Tensor x = test::randomTensor({1, 8, 8, 16}, 3);
  auto jitRt = runtimeWith("*=jit");
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  jit::FaultInjection faults;
  faults.kernelsWinMeasurement = {"tosa.conv2d"};
  auto kernelRt = llvm::cantFail(Runtime::createWithFaults(o, faults));
  Result want = runModel(*jitRt, mlir, "main", {x});
  auto m = KILN_TAKE(kernelRt->loadModule(mlir, "model"));
  ASSERT_TRUE(m);
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_TRUE(fn);
  size_t weightSteps = 0;
  for (const lowering::PlanStep &s : fn->plan.steps)
    if (s.kind == lowering::PlanStep::kJit) ++weightSteps;
  ASSERT_GE(weightSteps, 1u) << "the plan has no read-back of the filter: " << fn->placementSummary();
  for (const StepDesc &s : fn->executable->steps()) EXPECT_EQ(s.name.rfind("jit:", 0), std::string::npos) << s.name;
  EXPECT_EQ(fn->executable->numSteps(), fn->plan.steps.size() - weightSteps);
  for (int call = 0; call < 2; ++call) {
    auto out = KILN_TAKE(m->call("main", {x}));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(want.outputs.size(), 1u);
    for (int64_t i = 0; i < out[0].numElements(); ++i)
      ASSERT_NEAR(out[0].data<float>()[i], want.outputs[0].data<float>()[i], 1e-4) << i;
  }
}

// A tosa.clamp on kernels that reads only a conv's (or a depthwise conv's)
// result runs inside the conv's kernel step: one step where there were
// two, and the same results as generated code. A clamp of a conv whose
// result another op reads too, and a clamp of a function argument, stay
// steps of their own.
TEST(Placement, KernelPlansFuseTheClampAfterAConv) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<1x9x9x16xf32>, %v: tensor<1x9x9x32xf32>) -> (tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>) {
  %w = "tosa.const"() <{values = dense<0.03> : tensor<32x3x3x16xf32>}> : () -> tensor<32x3x3x16xf32>
  %b = "tosa.const"() <{values = dense<-0.2> : tensor<32xf32>}> : () -> tensor<32xf32>
  %b2 = "tosa.const"() <{values = dense<0.1> : tensor<32xf32>}> : () -> tensor<32xf32>
  %dw = "tosa.const"() <{values = dense<0.11> : tensor<3x3x32x1xf32>}> : () -> tensor<3x3x32x1xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x9x9x16xf32>, tensor<32x3x3x16xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x9x9x32xf32>
  %r = tosa.clamp %c {min_val = 0.0 : f32, max_val = 0.25 : f32} : (tensor<1x9x9x32xf32>) -> tensor<1x9x9x32xf32>
  %d = tosa.depthwise_conv2d %r, %dw, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x9x9x32xf32>, tensor<3x3x32x1xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x9x9x32xf32>
  %s = tosa.clamp %d {min_val = -0.1 : f32, max_val = 3.0e38 : f32} : (tensor<1x9x9x32xf32>) -> tensor<1x9x9x32xf32>
  %e = tosa.conv2d %x, %w, %b2, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x9x9x16xf32>, tensor<32x3x3x16xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x9x9x32xf32>
  %t = tosa.clamp %e {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x9x9x32xf32>) -> tensor<1x9x9x32xf32>
  %u = tosa.clamp %v {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x9x9x32xf32>) -> tensor<1x9x9x32xf32>
  return %s, %t, %e, %u : tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>, tensor<1x9x9x32xf32>
}
)mlir";
  Tensor x = test::randomTensor({1, 9, 9, 16}, 5), v = test::randomTensor({1, 9, 9, 32}, 6);
  auto jitRt = runtimeWith("*=jit");
  auto kernelRt = runtimeWith("*=kernel");
  Result want = runModel(*jitRt, mlir, "main", {x, v});
  auto m = KILN_TAKE(kernelRt->loadModule(mlir, "model"));
  ASSERT_TRUE(m);
  auto fn = KILN_TAKE(m->compile("main", {x.type(), v.type()}));
  ASSERT_TRUE(fn);
  std::vector<std::string> ops;
  for (const StepDesc &s : fn->executable->steps()) ops.push_back(s.ops);
  std::vector<std::string> expected = {"tosa.conv2d, tosa.clamp", "tosa.depthwise_conv2d, tosa.clamp", "tosa.conv2d",
                                       "tosa.clamp", "tosa.clamp"};
  EXPECT_EQ(ops, expected);
  bool described = false;
  for (const StepDesc &s : fn->executable->steps())
    described |= s.strategy.find("the tosa.clamp after it, fused") != std::string::npos;
  EXPECT_TRUE(described);
  auto out = KILN_TAKE(m->call("main", {x, v}));
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(want.outputs.size(), 4u);
  for (size_t r = 0; r < 4; ++r)
    for (int64_t i = 0; i < out[r].numElements(); ++i)
      ASSERT_NEAR(out[r].data<float>()[i], want.outputs[r].data<float>()[i], 1e-5) << "result " << r << ", " << i;
}

// A kernel plan's reshape of a value computed per call is a view of it:
// no step, its readers read the value's buffer under the reshape's type.
// Chains of reshapes, a reshape of an argument and two reshapes of one
// value (also a result) all read right; a reshape that is itself a result
// keeps its step (results have buffers of their own).
TEST(Placement, KernelPlansReadReshapesAsViews) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<4x6xf32>) -> (tensor<24xf32>, tensor<3x8xf32>, tensor<24xf32>, tensor<4x6xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %s1 = tosa.const_shape {values = dense<[2, 12]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s2 = tosa.const_shape {values = dense<[24]> : tensor<1xindex>} : () -> !tosa.shape<1>
  %s3 = tosa.const_shape {values = dense<[3, 8]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %a = tosa.add %x, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %r = tosa.reshape %a, %s1 : (tensor<4x6xf32>, !tosa.shape<2>) -> tensor<2x12xf32>
  %m = tosa.mul %r, %r, %shift : (tensor<2x12xf32>, tensor<2x12xf32>, tensor<1xi8>) -> tensor<2x12xf32>
  %q = tosa.reshape %m, %s2 : (tensor<2x12xf32>, !tosa.shape<1>) -> tensor<24xf32>
  %q2 = tosa.reshape %q, %s3 : (tensor<24xf32>, !tosa.shape<2>) -> tensor<3x8xf32>
  %xr = tosa.reshape %x, %s3 : (tensor<4x6xf32>, !tosa.shape<2>) -> tensor<3x8xf32>
  %ab = tosa.add %q2, %xr : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %e = tosa.exp %q : (tensor<24xf32>) -> tensor<24xf32>
  %res = tosa.reshape %a, %s2 : (tensor<4x6xf32>, !tosa.shape<1>) -> tensor<24xf32>
  return %e, %ab, %res, %a : tensor<24xf32>, tensor<3x8xf32>, tensor<24xf32>, tensor<4x6xf32>
}
)mlir";
  Tensor x = test::randomTensor({4, 6}, 11);
  auto kernelRt = runtimeWith("*=kernel");
  auto m = KILN_TAKE(kernelRt->loadModule(mlir, "model"));
  ASSERT_TRUE(m);
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  ASSERT_TRUE(fn);
  int reshapes = 0;
  for (const StepDesc &s : fn->executable->steps()) reshapes += s.ops == "tosa.reshape";
  EXPECT_EQ(reshapes, 1);  // the one whose result is returned
  auto out = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(out.size(), 4u);
  const float *xs = x.data<float>();
  for (int64_t i = 0; i < 24; ++i) {
    float a = 2 * xs[i];
    EXPECT_NEAR(out[0].data<float>()[i], std::exp(a * a), 1e-4f * std::exp(a * a)) << i;
    EXPECT_NEAR(out[1].data<float>()[i], a * a + xs[i], 1e-5f) << i;
    EXPECT_EQ(out[2].data<float>()[i], a) << i;
    EXPECT_EQ(out[3].data<float>()[i], a) << i;
  }
}

// A kernel plan's conv filters start packing before its function is
// specialized; a compile that then fails (an op no kernel takes, whose
// JIT compile fails) returns its error with the packing stopped, and the module
// still compiles and runs under a placement that allows JIT.
TEST(Placement, KernelPlanThatFailsAfterItsFiltersStartedPackingReportsIt) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<1x8x8x16xf32>) -> tensor<1x15x15x32xf32> {
  %w = "tosa.const"() <{values = dense<0.02> : tensor<32x3x3x16xf32>}> : () -> tensor<32x3x3x16xf32>
  %w2 = "tosa.const"() <{values = dense<0.03> : tensor<32x1x1x16xf32>}> : () -> tensor<32x1x1x16xf32>
  %b = "tosa.const"() <{values = dense<0.1> : tensor<32xf32>}> : () -> tensor<32xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, tensor<32x3x3x16xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x32xf32>
  %d = tosa.conv2d %x, %w2, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, tensor<32x1x1x16xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x32xf32>
  %e = tosa.add %c, %d : (tensor<1x8x8x32xf32>, tensor<1x8x8x32xf32>) -> tensor<1x8x8x32xf32>
  %sc = tosa.const_shape {values = dense<[2, 1, 2, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %off = tosa.const_shape {values = dense<[0, 0]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %f = "tosa.resize"(%e, %sc, %off, %off) <{mode = #tosa.resize_mode<NEAREST_NEIGHBOR>}> : (tensor<1x8x8x32xf32>, !tosa.shape<4>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<1x15x15x32xf32>
  return %f : tensor<1x15x15x32xf32>
}
)mlir";
  Tensor x = test::randomTensor({1, 8, 8, 16}, 12);
  // tosa.resize has no kernel: it stays JIT code, whose compile fails here.
  auto kernelRt = runtimeWith("*=kernel", {"tosa.resize"});
  auto m = KILN_TAKE(kernelRt->loadModule(mlir, "model"));
  ASSERT_TRUE(m);
  auto fn = m->compile("main", {x.type()});
  ASSERT_FALSE(fn);
  EXPECT_NE(toStatus(fn.takeError()).message.find("tosa.resize"), std::string::npos);
  auto jitRt = runtimeWith("*=jit,tosa.conv2d=kernel");
  Result r = runModel(*jitRt, mlir, "main", {x});
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].numElements(), 15 * 15 * 32);
}

// The transpose kernel copies rows along the output's last dimension
// (a memcpy where that is the input's innermost, a strided copy else):
// every permutation of ranks 1-4, element sizes 1, 4 and 8, against the
// index arithmetic itself.
TEST(Kernels, TransposeMatchesIndexArithmeticForEveryPermutation) {
  HostExecutor ex(2);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{5}, {3, 7}, {2, 3, 5}, {2, 3, 4, 5}, {1, 17, 9, 3}}) {
    std::vector<int64_t> perm(shape.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
    do {
      for (DType t : {DType::i8, DType::f32, DType::i64}) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        Tensor x = Tensor::empty(t, shape);
        size_t es = x.byteSize() / size_t(n);
        auto *xb = static_cast<uint8_t *>(x.rawData());
        for (size_t i = 0; i < x.byteSize(); ++i) xb[i] = uint8_t(i * 31 + 7);
        kernels::AttrMap attrs;
        attrs.set("perms", perm);
        auto out = kernels::runKernel("tosa.transpose", {x}, attrs, ex);
        ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
        const Tensor &y = (*out)[0];
        std::vector<int64_t> ys;
        for (int64_t p : perm) ys.push_back(shape[size_t(p)]);
        ASSERT_EQ(std::vector<int64_t>(y.shape().begin(), y.shape().end()), ys);
        std::vector<int64_t> is(shape.size(), 1);
        for (size_t d = shape.size() - 1; d-- > 0;) is[d] = is[d + 1] * shape[d + 1];
        const auto *yb = static_cast<const uint8_t *>(y.rawData());
        for (int64_t i = 0; i < n; ++i) {
          int64_t r = i, off = 0;
          for (size_t d = ys.size(); d-- > 0;) {
            off += (r % ys[d]) * is[size_t(perm[d])];
            r /= ys[d];
          }
          ASSERT_EQ(0, std::memcmp(yb + size_t(i) * es, xb + size_t(off) * es, es))
              << "element " << i << " of a rank-" << shape.size() << " transpose";
        }
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

// A kernel wins over the op alone on JIT by 10% and by 5 us a call: below
// that, the step it adds and the fusion it breaks cost more than it saves.
TEST(Placement, AKernelMustSaveTenPercentAndFiveMicroseconds) {
  using jit::PlacementTuner;
  EXPECT_TRUE(PlacementTuner::kernelBeatsAlone(0.004, 0.035));   // 1x1-map conv: 4 us against 35
  EXPECT_TRUE(PlacementTuner::kernelBeatsAlone(0.5, 1.0));
  EXPECT_FALSE(PlacementTuner::kernelBeatsAlone(0.0003, 0.0006));  // twice as fast, 0.3 us saved
  EXPECT_FALSE(PlacementTuner::kernelBeatsAlone(0.0011, 0.0047));  // 3.6 us saved
  EXPECT_FALSE(PlacementTuner::kernelBeatsAlone(0.95, 1.0));      // within the 10% margin
  EXPECT_FALSE(PlacementTuner::kernelBeatsAlone(1.0, 1.0));
}

// A step whose other ops only read the weight in another layout (the filter
// transposed for the generated code) is the op alone: measuring needs no
// compile of the op by itself. With an activation fused in, it is not.
TEST(Placement, AStepOfTheOpAndItsWeightLayoutIsTheOpAlone) {
  auto conv = [](bool clamp) {
    std::string w;
    for (int i = 0; i < 8 * 4; ++i) w += (i ? ", " : "") + std::to_string(0.01 * (i % 7));
    std::string src = R"(
func.func @main(%x: tensor<1x8x8x4xf32>) -> tensor<1x8x8x8xf32> {
  %w = "tosa.const"() <{values = dense<[)" + w + R"(]> : tensor<32xf32>}> : () -> tensor<32xf32>
  %s = tosa.const_shape {values = dense<[8, 1, 1, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %w, %s : (tensor<32xf32>, !tosa.shape<4>) -> tensor<8x1x1x4xf32>
  %b = "tosa.const"() <{values = dense<0.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<8x1x1x4xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x8xf32>
)";
    src += clamp ? "  %r = tosa.clamp %y {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x8x8x8xf32>) -> "
                   "tensor<1x8x8x8xf32>\n  return %r : tensor<1x8x8x8xf32>\n}\n"
                 : "  return %y : tensor<1x8x8x8xf32>\n}\n";
    return src;
  };
  for (bool clamp : {false, true}) {
    auto program = KILN_TAKE(lowering::Program::parse(conv(clamp), "conv"));
    ASSERT_TRUE(program);
    auto part = partitionMain(*program, {TensorType{DType::f32, {1, 8, 8, 4}}}, ops::PlacementOptions(), {});
    ASSERT_TRUE(part);
    int convs = 0;
    for (const auto &step : part->plan.steps)
      for (const auto &alt : step.alternatives) {
        ASSERT_EQ(alt.op, "tosa.conv2d");
        ++convs;
        EXPECT_EQ(alt.aloneInStep, !clamp) << llvm::join(step.ops, ", ");
        EXPECT_EQ(alt.constantInputs, (std::vector<bool>{false, true, true})) << llvm::join(step.ops, ", ");
      }
    EXPECT_EQ(convs, 1) << clamp;
  }
}
