// Eager API: values, asynchronous results, errors at the read, the dispatch
// cache, eager = graph for the same op, and trace capture.
#include "api/Eager.h"

#include "kernels/KernelRegistry.h"
#include "runtime/Poison.h"

#include "cache/DiskCache.h"
#include "tests/TestRuntime.h"
#include "tests/reference/Reference.h"

#include <climits>
#include <cstdlib>
#include <random>
#include <thread>

using namespace kiln;
using namespace kiln::eager;

namespace {
Tensor get(const EagerTensor &t) {
  auto v = t.value();
  if (!v) {
    ADD_FAILURE() << llvm::toString(v.takeError());
    return Tensor();
  }
  return *v;
}
std::string errorOf(const EagerTensor &t) {
  auto v = t.value();
  if (v) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(v.takeError());
}
std::unique_ptr<Runtime> runtimeWith(const char *modes) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  if (*modes) o.placement = llvm::cantFail(ops::parseOpModes(modes));
  return llvm::cantFail(Runtime::create(o));
}
}  // namespace

TEST(Eager, OpsComputeTheReferenceAndKnowTheirTypesAtDispatch) {
  Context ctx(test::sharedRuntime());
  Tensor a = test::randomTensor({4, 8}, 1), b = test::randomTensor({8, 3}, 2), bias = test::randomTensor({1, 3}, 3);
  EagerTensor y = ctx.relu(ctx.add(ctx.matmul(a, b), bias));
  EXPECT_EQ(y.type().str(), "4x3xf32");
  ref::Vec mm = ref::matmul(a.toVector<float>(), b.toVector<float>(), 1, 4, 8, 3);
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(std::max(0.0f, mm[i] + bias.data<float>()[i % 3]));
  EXPECT_TRUE(test::allClose(test::asDoubles(get(y)), want, 1e-5, 1e-6));

  EagerTensor s = ctx.softmax(a, 1);
  ref::Vec sm = ref::softmax(a.toVector<float>(), 4, 8);
  EXPECT_TRUE(test::allClose(test::asDoubles(get(s)), test::asDoubles(sm), 1e-5, 1e-7));
  EXPECT_EQ(ctx.transpose(a, {1, 0}).type().str(), "8x4xf32");
  EXPECT_EQ(ctx.reduceSum(a, 0).type().str(), "1x8xf32");
}

// Found by the eager fuzzer (kiln_fuzz_tests): a transpose of an empty
// tensor divided by its zero dimension (SIGFPE) in the handwritten kernel.
TEST(Eager, EmptyTensorsTransposeToEmptyTensors) {
  Context ctx(test::sharedRuntime());
  Tensor x = Tensor::empty(DType::f32, {0, 3, 2});
  auto y = ctx.transpose(x, {2, 0, 1}).value();
  ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
  EXPECT_EQ(y->type().str(), "2x0x3xf32");
  EXPECT_EQ(y->numElements(), 0);
}

// Found by the eager fuzzer under UBSan: integer sums and products wrap
// around (as generated code's do) instead of overflowing signed ints, and
// conv/pool windows with pads, strides or dilations near INT64_MAX are
// errors instead of overflowing the output size.
TEST(Eager, IntegerReductionsWrapAndHugeWindowsAreErrors) {
  Context ctx(test::sharedRuntime());
  Tensor x = Tensor::empty(DType::i32, {2});
  x.data<int32_t>()[0] = std::numeric_limits<int32_t>::max();
  x.data<int32_t>()[1] = 1;
  auto sum = ctx.reduceSum(x, 0).value();
  ASSERT_TRUE(bool(sum)) << llvm::toString(sum.takeError());
  EXPECT_EQ(sum->data<int32_t>()[0], std::numeric_limits<int32_t>::min());

  Tensor img = test::randomTensor({1, 4, 4, 2}, 5), w = test::randomTensor({3, 1, 1, 2}, 6),
         b = test::randomTensor({3}, 7);
  const int64_t huge = std::numeric_limits<int64_t>::max();
  auto conv = ctx.conv2d(img, w, b, {huge, 0, 0, 0}).value();
  ASSERT_FALSE(bool(conv));
  EXPECT_NE(llvm::toString(conv.takeError()).find("pad"), std::string::npos);
  auto dilated = ctx.conv2d(img, w, b, {0, 0, 0, 0}, {1, 1}, {huge, 1}).value();
  ASSERT_FALSE(bool(dilated));
  llvm::consumeError(dilated.takeError());
  auto pool = ctx.maxPool2d(img, {huge, 1}, {1, 1}, {huge - 1, 0, 0, 0}).value();
  ASSERT_FALSE(bool(pool));
  llvm::consumeError(pool.takeError());
}

TEST(Eager, CacheHitsAfterTheFirstCall) {
  Context ctx(test::sharedRuntime());
  Tensor a = test::randomTensor({1}, 1), b = test::randomTensor({1}, 2);
  for (int i = 0; i < 10; ++i) (void)ctx.add(a, b);
  EagerStats s = ctx.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 9u);
  EXPECT_EQ(s.inlineRuns, 10u);
  (void)ctx.add(test::randomTensor({2}, 3), test::randomTensor({2}, 4));  // a new signature
  EXPECT_EQ(ctx.stats().misses, 2u);
}

TEST(Eager, LargeOpsRunAsynchronouslyOnTheExecutor) {
  Context ctx(test::sharedRuntime());
  ctx.setInlineLimit(16);
  Tensor a = test::randomTensor({64, 64}, 5), b = test::randomTensor({64, 64}, 6);
  EagerTensor c = ctx.matmul(a, b);  // returns at once
  EagerTensor d = ctx.exp(ctx.add(c, c));  // depends on a pending value
  Tensor dv = get(d);
  ref::Vec mm = ref::matmul(a.toVector<float>(), b.toVector<float>(), 1, 64, 64, 64);
  std::vector<double> want;
  for (float v : mm) want.push_back(std::exp(2.0 * v));
  EXPECT_TRUE(test::allClose(test::asDoubles(dv), want, 1e-4, 1e-6));
  EXPECT_GT(ctx.stats().executorRuns, 0u);
}

TEST(Eager, ErrorsSurfaceAtTheReadWithOpAndShapes) {
  Context ctx(test::sharedRuntime());
  EagerTensor bad = ctx.add(test::randomTensor({2, 3}, 1), test::randomTensor({2, 4}, 2));
  EXPECT_TRUE(bad.isError());
  std::string msg = errorOf(bad);
  EXPECT_NE(msg.find("tosa.add(tensor<2x3xf32>, tensor<2x4xf32>)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dimension 1 is 3 in one operand and 4 in another"), std::string::npos) << msg;
  // Dependent ops carry the original error.
  std::string chained = errorOf(ctx.exp(bad));
  EXPECT_NE(chained.find("tosa.exp"), std::string::npos) << chained;
  EXPECT_NE(chained.find("input 0 failed"), std::string::npos) << chained;
  EXPECT_NE(chained.find("dimension 1 is 3"), std::string::npos) << chained;
  // Unknown ops and bad attributes.
  std::string unknown = errorOf(ctx.execute("tosa.frobnicate", {EagerTensor(test::randomTensor({2}, 1))}));
  EXPECT_NE(unknown.find("tosa.frobnicate(tensor<2xf32>): unknown op"), std::string::npos) << unknown;
  std::string axis = errorOf(ctx.reduceSum(test::randomTensor({2, 3}, 1), 4));
  EXPECT_NE(axis.find("axis 4 out of range for rank 2"), std::string::npos) << axis;
  std::string dtype = errorOf(ctx.add(test::randomTensor({2}, 1), Tensor::empty(DType::i32, {2})));
  EXPECT_NE(dtype.find("operand dtypes differ (f32, i32)"), std::string::npos) << dtype;
  // The context stays usable.
  EXPECT_FALSE(ctx.add(test::randomTensor({2}, 1), test::randomTensor({2}, 2)).isError());
}

TEST(Eager, SameResultsAsGraphModeForTheSameOp) {
  // Kernel placement: eager and graph run the same kernel: identical bits.
  Tensor x = test::randomTensor({1, 9, 9, 4}, 7), w = test::randomTensor({5, 3, 3, 4}, 8), b = test::randomTensor({5}, 9);
  auto krt = runtimeWith("*=kernel");
  Context ctx(*krt);
  Tensor eagerOut = get(ctx.conv2d(x, w, b, {1, 1, 1, 1}, {2, 2}));
  const char *conv = R"mlir(
func.func @main(%x: tensor<1x9x9x4xf32>, %w: tensor<5x3x3x4xf32>, %b: tensor<5xf32>) -> tensor<1x5x5x5xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : (tensor<1x9x9x4xf32>, tensor<5x3x3x4xf32>, tensor<5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x5x5x5xf32>
  return %r : tensor<1x5x5x5xf32>
}
)mlir";
  auto m = KILN_TAKE(krt->loadModule(conv, "conv"));
  auto graphOut = KILN_TAKE(m->call("main", {x, w, b}));
  ASSERT_EQ(graphOut.size(), 1u);
  EXPECT_EQ(eagerOut.type(), graphOut[0].type());
  EXPECT_EQ(0, std::memcmp(eagerOut.rawData(), graphOut[0].rawData(), eagerOut.byteSize()));

  // JIT placement: eager compiles the single op; same code as the graph's.
  auto jrt = runtimeWith("tosa.conv2d=jit");
  Context jctx(*jrt);
  Tensor eagerJit = get(jctx.conv2d(x, w, b, {1, 1, 1, 1}, {2, 2}));
  EXPECT_EQ(jctx.stats().jitOps, 1u);
  auto mj = KILN_TAKE(jrt->loadModule(conv, "conv"));
  auto graphJit = KILN_TAKE(mj->call("main", {x, w, b}));
  EXPECT_EQ(0, std::memcmp(eagerJit.rawData(), graphJit[0].rawData(), eagerJit.byteSize()));
  // And kernels and JIT agree within float tolerance.
  EXPECT_TRUE(test::allClose(test::asDoubles(eagerJit), test::asDoubles(eagerOut), 1e-5, 1e-5));
}

TEST(Eager, TraceCapturesAnMlpThatMatchesEagerExecution) {
  Context ctx(test::sharedRuntime());
  Tensor w1 = test::randomTensor({16, 32}, 1), b1 = test::randomTensor({1, 32}, 2), w2 = test::randomTensor({32, 4}, 3), b2 = test::randomTensor({1, 4}, 4);
  auto mlp = [&](Context &c, llvm::ArrayRef<EagerTensor> in) {
    EagerTensor h = c.relu(c.add(c.matmul(in[0], w1), b1));
    return std::vector<EagerTensor>{c.softmax(c.add(c.matmul(h, w2), b2), 1)};
  };
  Tensor x = test::randomTensor({3, 16}, 5);
  EagerTensor x0(x);
  Tensor eagerOut = get(mlp(ctx, {x0})[0]);

  auto traced = trace(ctx, mlp, {x.type()});
  ASSERT_TRUE(bool(traced)) << llvm::toString(traced.takeError());
  EXPECT_NE(traced->mlir.find("\"tosa.matmul\""), std::string::npos) << traced->mlir;
  EXPECT_NE(traced->mlir.find("\"tosa.clamp\""), std::string::npos);
  auto graphOut = traced->call({x});
  ASSERT_TRUE(bool(graphOut)) << llvm::toString(graphOut.takeError());
  EXPECT_TRUE(test::allClose(test::asDoubles((*graphOut)[0]), test::asDoubles(eagerOut), 1e-5, 1e-7));
  // The recorded text is a whole module: it loads again and computes the
  // same (issue 32: it had no func.return).
  auto reloaded = test::sharedRuntime().loadModule(traced->mlir, "traced.mlir");
  ASSERT_TRUE(bool(reloaded)) << llvm::toString(reloaded.takeError()) << "\n" << traced->mlir;
  auto textOut = (*reloaded)->call("main", {x});
  ASSERT_TRUE(bool(textOut)) << llvm::toString(textOut.takeError());
  EXPECT_TRUE(test::allClose(test::asDoubles((*textOut)[0]), test::asDoubles(eagerOut), 1e-5, 1e-7));

  // Tracing errors are reported, not crashes.
  auto bad = trace(ctx, [](Context &c, llvm::ArrayRef<EagerTensor> in) {
    return std::vector<EagerTensor>{c.add(in[0], in[1])};
  }, {TensorType{DType::f32, {2, 3}}, TensorType{DType::f32, {4, 3}}});
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("dimension 0 is 2 in one operand and 4"), std::string::npos);
  auto dyn = trace(ctx, mlp, {TensorType{DType::f32, {kDynamic, 16}}});
  ASSERT_FALSE(bool(dyn));
  EXPECT_NE(llvm::toString(dyn.takeError()).find("must be static"), std::string::npos);
}

TEST(Eager, ConcurrentDispatchFromManyThreads) {
  Context ctx(test::sharedRuntime());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        Tensor a = Tensor::fromVector<float>(DType::f32, {2}, std::vector<float>{float(t), float(i)});
        auto v = ctx.add(a, a).value();
        if (!v || v->data<float>()[0] != 2.0f * t || v->data<float>()[1] != 2.0f * i) ++wrong;
        if (!v) llvm::consumeError(v.takeError());
      }
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Eager, OpModeFromTheEnvironmentReachesEagerDispatch) {
  // $KILN_OP_MODE is resolved once into the runtime's options, which graph
  // placement and eager dispatch both read.
  ::setenv("KILN_OP_MODE", "tosa.add=jit", 1);
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  auto rt = Runtime::create(o);
  ::unsetenv("KILN_OP_MODE");
  ASSERT_TRUE(bool(rt));
  EXPECT_EQ((*rt)->options().placement.modeFor("tosa.add"), ops::OpMode::kJit);
  Context ctx(**rt);
  Tensor a = test::randomTensor({4}, 1), b = test::randomTensor({4}, 2);
  Tensor y = get(ctx.add(a, b));
  EXPECT_EQ(ctx.stats().jitOps, 1u);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], a.data<float>()[i] + b.data<float>()[i]);
  // Explicit options win over the environment.
  ::setenv("KILN_OP_MODE", "tosa.add=jit", 1);
  RuntimeOptions k = o;
  k.placement.modes["tosa.add"] = ops::OpMode::kKernel;
  auto resolved = RuntimeOptions::fromEnvironment(k);
  ::unsetenv("KILN_OP_MODE");
  ASSERT_TRUE(bool(resolved));
  EXPECT_EQ(resolved->placement.modeFor("tosa.add"), ops::OpMode::kKernel);
}

TEST(Eager, BadEnvironmentIsAnErrorNamingTheVariable) {
  // The error fromEnvironment() returns with `var` set to `value`.
  auto errorWith = [](const char *var, const char *value) {
    ::setenv(var, value, 1);
    auto o = RuntimeOptions::fromEnvironment();
    ::unsetenv(var);
    EXPECT_FALSE(bool(o)) << var << "=" << value;
    return o ? Status{} : toStatus(o.takeError());
  };
  Status s = errorWith("KILN_CACHE", "sometimes");
  EXPECT_EQ(s.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message, "KILN_CACHE='sometimes': expected off, ro or rw");
  Status h = errorWith("KILN_HUGE_PAGES", "yes");
  EXPECT_EQ(h.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.message, "KILN_HUGE_PAGES='yes': expected 0 or 1");
}

TEST(Eager, TypedAndGenericCallsShareOneDispatchEntry) {
  // Typed ops hash their attributes exactly as AttrMap::hash does.
  Context ctx(test::sharedRuntime());
  Tensor x = test::randomTensor({2, 3}, 5);
  (void)get(ctx.clamp(x, -0.5, 0.5));
  ops::AttrMap m;
  m.set("min_val", -0.5);
  m.set("max_val", 0.5);
  uint64_t missesBefore = ctx.stats().misses;
  (void)get(ctx.execute("tosa.clamp", {x}, m));
  EXPECT_EQ(ctx.stats().misses, missesBefore);
  (void)get(ctx.transpose(x, {1, 0}));
  ops::AttrMap t;
  t.set("perms", std::vector<int64_t>{1, 0});
  missesBefore = ctx.stats().misses;
  (void)get(ctx.execute("tosa.transpose", {x}, t));
  EXPECT_EQ(ctx.stats().misses, missesBefore);
}

namespace {
struct TypedOp {
  const char *name;
  EagerTensor (Context::*unary)(const EagerTensor &);
  EagerTensor (Context::*binary)(const EagerTensor &, const EagerTensor &);
};
// Every typed op the op table generates, with its table name.
const std::vector<TypedOp> &typedOps() {
  static const std::vector<TypedOp> all = {
#define KILN_EAGER_none(NAME, METHOD)
#define KILN_EAGER_unary(NAME, METHOD) {NAME, &Context::METHOD, nullptr},
#define KILN_EAGER_binary(NAME, METHOD) {NAME, nullptr, &Context::METHOD},
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) KILN_EAGER_##EAGER(NAME, METHOD)
#include "ops/Ops.def"
#undef KILN_OP
#undef KILN_EAGER_none
#undef KILN_EAGER_unary
#undef KILN_EAGER_binary
  };
  return all;
}
}  // namespace

TEST(Eager, TypedOpsFromTheOpTableMatchGenericCalls) {
  Context ctx(test::sharedRuntime());
  ASSERT_GE(typedOps().size(), 30u);
  for (const TypedOp &op : typedOps()) {
    // The first dtype the op's kernel takes.
    const kernels::KernelDef *def = kernels::registry().lookup(op.name);
    ASSERT_NE(def, nullptr) << op.name;
    size_t arity = op.unary ? 1 : 2;
    std::optional<DType> dtype;
    for (DType d : {DType::f32, DType::i32, DType::i1}) {
      auto outs = def->shape(std::vector<TensorType>(arity, TensorType{d, {2, 3}}), {});
      if (outs) {
        dtype = d;
        break;
      }
      llvm::consumeError(outs.takeError());
    }
    ASSERT_TRUE(dtype) << op.name;
    Tensor a = Tensor::empty(*dtype, {2, 3}), b = Tensor::empty(*dtype, {2, 3});
    Tensor r = test::randomTensor({2, 3}, 11, 0.1f, 4);
    for (int i = 0; i < 6; ++i) {
      float v = r.data<float>()[i];
      if (*dtype == DType::f32) a.data<float>()[i] = v, b.data<float>()[i] = 1 + v;
      if (*dtype == DType::i32) a.data<int32_t>()[i] = int32_t(v * 5), b.data<int32_t>()[i] = 1 + i % 3;  // small non-zero divisors and shifts
      if (*dtype == DType::i1) a.data<uint8_t>()[i] = i % 2, b.data<uint8_t>()[i] = i % 3 == 0;
    }
    EagerTensor typed = op.unary ? (ctx.*op.unary)(a) : (ctx.*op.binary)(a, b);
    uint64_t misses = ctx.stats().misses;
    EagerTensor generic = op.unary ? ctx.execute(op.name, {a}) : ctx.execute(op.name, {a, b});
    EXPECT_EQ(ctx.stats().misses, misses) << op.name << ": the typed and generic calls should share an entry";
    Tensor x = get(typed), y = get(generic);
    ASSERT_TRUE(x.valid() && y.valid()) << op.name;
    ASSERT_EQ(x.type(), y.type()) << op.name;
    EXPECT_EQ(0, std::memcmp(x.rawData(), y.rawData(), x.byteSize())) << op.name;
  }
}

// Issue 14 item 6: bad eager arguments are errors at the read, never a
// signal; integer division by zero is an error, INT_MIN / -1 wraps.
TEST(Eager, BadArgumentsAreErrorsNotSignals) {
  Context ctx(test::sharedRuntime());
  Tensor img = test::randomTensor({1, 4, 4, 2}, 1);
  auto msg = [](const EagerTensor &t) { return t.isError() ? toStatus(t.value().takeError()).message : ""; };
  EXPECT_NE(msg(ctx.maxPool2d(img, {2, 2}, {0, 1})).find("kernel and stride must be in [1, 2^31]"), std::string::npos);
  EXPECT_NE(msg(ctx.maxPool2d(img, {0, 2}, {1, 1})).find("kernel and stride must be in [1, 2^31]"), std::string::npos);
  ops::AttrMap shortLists;
  shortLists.set("kernel", std::vector<int64_t>{2});
  shortLists.set("stride", std::vector<int64_t>{});
  shortLists.set("pad", std::vector<int64_t>{0, 0, 0, 0});
  EXPECT_NE(msg(ctx.execute("tosa.max_pool2d", {img}, shortLists)).find("need kernel[2], stride[2] and pad[4]"),
            std::string::npos);
  EXPECT_NE(msg(ctx.reshape(img, {-4, 8})).find("dimension 0 of the new shape is -4"), std::string::npos);
  ops::AttrMap hugePad;
  hugePad.set("padding", std::vector<int64_t>{0, int64_t(1) << 62, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(msg(ctx.execute("tosa.pad", {img}, hugePad)).find("more bytes than 64 bits can count"), std::string::npos)
      << msg(ctx.execute("tosa.pad", {img}, hugePad));
  ops::AttrMap hugeTile;
  hugeTile.set("multiples", std::vector<int64_t>{1, int64_t(1) << 40, 1 << 20, 1});
  EXPECT_NE(msg(ctx.execute("tosa.tile", {img}, hugeTile)).find("tosa.tile's result"), std::string::npos);

  Tensor a = Tensor::fromVector<int32_t>(DType::i32, {3}, {INT32_MIN, 7, -9});
  Tensor minusOne = Tensor::fromVector<int32_t>(DType::i32, {3}, {-1, 2, -1});
  Tensor withZero = Tensor::fromVector<int32_t>(DType::i32, {3}, {1, 0, 1});
  auto q = ctx.intdiv(a, minusOne).value();
  ASSERT_TRUE(bool(q));
  EXPECT_EQ(q->data<int32_t>()[0], INT32_MIN);
  EXPECT_EQ(q->data<int32_t>()[1], 3);
  EXPECT_EQ(q->data<int32_t>()[2], 9);
  EXPECT_NE(msg(ctx.intdiv(a, withZero)).find("tosa.intdiv: division by zero (divisor element 1)"), std::string::npos)
      << msg(ctx.intdiv(a, withZero));
}

TEST(Eager, JitPlacedOpsReportFaultsToo) {
  auto rt = runtimeWith("tosa.intdiv=jit");
  Context ctx(*rt);
  Tensor a = Tensor::fromVector<int32_t>(DType::i32, {3}, {4, 7, -9});
  EagerTensor bad = ctx.intdiv(a, Tensor::fromVector<int32_t>(DType::i32, {3}, {1, 0, 1}));
  ASSERT_TRUE(bad.isError());
  EXPECT_NE(toStatus(bad.value().takeError()).message.find("integer division by zero"), std::string::npos);
  EXPECT_EQ(ctx.stats().jitOps, 1u);
  // The same entry computes the next call normally.
  auto ok = ctx.intdiv(a, Tensor::fromVector<int32_t>(DType::i32, {3}, {2, 7, -3})).value();
  ASSERT_TRUE(bool(ok));
  EXPECT_EQ(ok->data<int32_t>()[2], 3);
}

// Issue 31 (10): eager calls check booleans as graph calls do: a byte other
// than 0 or 1 is an error, not a value the kernel and the JIT read apart.
TEST(Eager, BooleanInputsHoldZeroOrOne) {
  Context ctx(test::sharedRuntime());
  Tensor c = Tensor::fromVector<uint8_t>(DType::i1, {3}, std::vector<uint8_t>{0, 1, 2});
  Tensor a = Tensor::fromVector<float>(DType::f32, {3}, {1, 2, 3}), b = Tensor::fromVector<float>(DType::f32, {3}, {4, 5, 6});
  EXPECT_NE(errorOf(ctx.execute("tosa.select", {c, a, b})).find("input 0 (tensor<3xi1>) holds 2 at element 2: booleans must be 0 or 1"),
            std::string::npos);
  Tensor ok = Tensor::fromVector<uint8_t>(DType::i1, {3}, std::vector<uint8_t>{0, 1, 1});
  EXPECT_NE(errorOf(ctx.execute("tosa.logical_xor", {ok, c})).find("input 1"), std::string::npos);
  EXPECT_NE(errorOf(ctx.execute("tosa.logical_or", {c, ok})).find("input 0"), std::string::npos);
  Tensor sel = get(ctx.execute("tosa.select", {ok, a, b}));
  ASSERT_TRUE(sel.valid());
  EXPECT_EQ(sel.toVector<float>(), (std::vector<float>{4, 2, 3}));
}

// Issue 31 (9): the f16 and bf16 pad kernel writes every element: two calls
// on differently poisoned memory give the same bytes, the input inside and
// the pad value around it.
TEST(Eager, PadOfHalfFloatsWritesEveryElement) {
  Context ctx(test::sharedRuntime());
  for (DType d : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> in = {0x3c00, 0x4000};  // f16 1, 2
    if (d == DType::bf16) in = {0x3f80, 0x4000};  // bf16 1, 2
    Tensor x = Tensor::fromVector<uint16_t>(d, {2}, in);
    ops::AttrMap pad;
    pad.set("padding", std::vector<int64_t>{1, 2});
    std::vector<std::vector<uint16_t>> got;
    for (int poison : {0xff, 0x5a}) {
      setTensorMemoryPoison(poison);
      Tensor y = get(ctx.execute("tosa.pad", {x}, pad));
      setTensorMemoryPoison(-1);
      ASSERT_TRUE(y.valid());
      got.push_back(y.toVector<uint16_t>());
    }
    EXPECT_EQ(got[0], got[1]) << dtypeName(d);
    EXPECT_EQ(got[0], (std::vector<uint16_t>{0, in[0], in[1], 0, 0})) << dtypeName(d);
  }
}

// Issue 31 (14): an eager result past the runtime's memory limit is an
// error naming its size, not an 8.6 GB allocation; the limit goes with the
// runtime.
TEST(Eager, ResultsPastTheMemoryLimitAreErrors) {
  uint64_t before = tensorMemoryLimit();
  {
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.memoryLimitBytes = uint64_t(256) << 20;
    auto rt = llvm::cantFail(Runtime::create(o));
    EXPECT_EQ(tensorMemoryLimit(), o.memoryLimitBytes);
    Context ctx(*rt);
    Tensor x = Tensor::fromVector<float>(DType::f32, {5}, {1, 2, 3, 4, 5});
    ops::AttrMap pad;
    pad.set("padding", std::vector<int64_t>{2147483647, 0});
    std::string msg = errorOf(ctx.execute("tosa.pad", {x}, pad));
    EXPECT_NE(msg.find("needs 8589934608 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor memory limit"), std::string::npos) << msg;
  }
  EXPECT_EQ(tensorMemoryLimit(), before);
}
