// Bad input never crashes: each case returns an llvm::Error whose message
// names the problem and where it is, and the runtime stays usable.
#include "tests/TestRuntime.h"

#include <functional>
#include <chrono>
#include <climits>
#include <thread>

using namespace kiln;

namespace {

const char *kAdd = R"mlir(
func.func @add(%a: tensor<?x4xf32> {kiln.name = "lhs"}, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = tosa.add %a, %b : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
)mlir";

Tensor f32(std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(DType::f32, shape);
  for (int64_t i = 0; i < t.numElements(); ++i) t.data<float>()[i] = float(i);
  return t;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST(Errors, MalformedMlirNamesLineAndColumn) {
  std::string msg = test::errorOf(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n",
      "bad.mlir"));
  EXPECT_TRUE(contains(msg, "bad.mlir:2:")) << msg;
  EXPECT_TRUE(contains(msg, "%b")) << msg;
}

// Big hex literals are decoded by kiln while MLIR parses the rest
// (HexLiterals.cpp); a character that is no hex digit in one, a dense
// literal or a resource, is MLIR's error naming its line, as if kiln had
// not lifted it. The same literal well formed loads.
TEST(Errors, BadDigitInABigHexLiteralNamesItsLine) {
  std::string digits(2 * 64 * 4, '0');  // 64 floats: big enough to be lifted
  auto dense = [](const std::string &hex) {
    return "func.func @f() -> tensor<64xf32> {\n"
           "  %c = \"tosa.const\"() <{values = dense<\"0x" + hex + "\"> : tensor<64xf32>}> : () -> tensor<64xf32>\n"
           "  return %c : tensor<64xf32>\n}\n";
  };
  auto resource = [](const std::string &hex) {
    return "func.func @f() -> tensor<64xf32> {\n"
           "  %c = \"tosa.const\"() <{values = dense_resource<w> : tensor<64xf32>}> : () -> tensor<64xf32>\n"
           "  return %c : tensor<64xf32>\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      w: \"0x04000000" +
           hex + "\"\n    }\n  }\n#-}\n";
  };
  std::string bad = digits;
  bad[300] = 'G';
  for (std::function<std::string(const std::string &)> text : {std::function<std::string(const std::string &)>(dense), std::function<std::string(const std::string &)>(resource)}) {
    auto good = test::sharedRuntime().loadModule(text(digits), "good.mlir");
    EXPECT_TRUE(bool(good)) << (good ? "" : toStatus(good.takeError()).str());
    std::string msg = test::errorOf(test::sharedRuntime().loadModule(text(bad), "digits.mlir"));
    EXPECT_TRUE(contains(msg, "digits.mlir:")) << msg;
    EXPECT_TRUE(contains(msg, "hex")) << msg;  // "expected ... hex digits" / "hex string blob"
  }
}

TEST(Errors, UnknownDialectAndOp) {
  std::string msg = test::errorOf(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %r = \"foo.bar\"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %r : tensor<4xf32>\n}\n",
      "foo.mlir"));
  EXPECT_TRUE(contains(msg, "foo.mlir:2:")) << msg;
  EXPECT_TRUE(contains(msg, "foo")) << msg;

  msg = test::errorOf(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %r = tosa.frobnicate %a : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %r : tensor<4xf32>\n}\n",
      "op.mlir"));
  EXPECT_TRUE(contains(msg, "op.mlir:2:")) << msg;
  EXPECT_TRUE(contains(msg, "tosa.frobnicate")) << msg;

  // A registered dialect kiln does not compile (gpu) is rejected by name.
  msg = test::errorOf(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %t = gpu.thread_id x\n"
      "  return %a : tensor<4xf32>\n}\n",
      "gpu.mlir"));
  EXPECT_TRUE(contains(msg, "gpu.mlir:2:")) << msg;
  EXPECT_TRUE(contains(msg, "dialect 'gpu'")) << msg;
}

TEST(Errors, WrongNumberOfInputs) {
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(kAdd, "add.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("add", {f32({2, 4})}));
  EXPECT_TRUE(contains(msg, "@add takes 2 inputs, got 1")) << msg;
}

TEST(Errors, DtypeAndShapeMismatchNameTheArgument) {
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(kAdd, "add.mlir"));
  ASSERT_TRUE(m);
  Tensor i32 = Tensor::empty(DType::i32, {2, 4});
  std::string msg = test::errorOf(m->call("add", {i32, f32({2, 4})}));
  EXPECT_TRUE(contains(msg, "argument 0 ('lhs')")) << msg;
  EXPECT_TRUE(contains(msg, "expected tensor<?x4xf32>, got tensor<2x4xi32>")) << msg;

  msg = test::errorOf(m->call("add", {f32({2, 4}), f32({2, 5})}));
  EXPECT_TRUE(contains(msg, "argument 1")) << msg;
  EXPECT_TRUE(contains(msg, "got tensor<2x5xf32>")) << msg;

  msg = test::errorOf(m->call("add", {f32({2, 4}), f32({4})}));
  EXPECT_TRUE(contains(msg, "got tensor<4xf32>")) << msg;

  msg = test::errorOf(m->call("add", {f32({2, 4}), Tensor()}));
  EXPECT_TRUE(contains(msg, "input 1 is an empty")) << msg;
}

TEST(Errors, ShapesThatDisagreeInsideTheGraph) {
  // Each argument matches its own signature, but the two batch sizes differ:
  // the error comes from specialization and names the op's location.
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(kAdd, "add.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("add", {f32({2, 4}), f32({3, 4})}));
  EXPECT_TRUE(contains(msg, "add.mlir:3:")) << msg;
  EXPECT_TRUE(contains(msg, "specialize @add")) << msg;
  // The module is still usable afterwards.
  auto ok = KILN_TAKE(m->call("add", {f32({3, 4}), f32({3, 4})}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].data<float>()[5], 10.0f);
}

// Issue 32: errors carry their location as a field, not only in the text.
TEST(Errors, StatusLocationIsSet) {
  auto bad = test::sharedRuntime().loadModule("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                                              "  %b = \"tosa.bogus\"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
                                              "  return %b : tensor<4xf32>\n}\n",
                                              "located.mlir");
  ASSERT_FALSE(bool(bad));
  Status s = toStatus(bad.takeError());
  EXPECT_EQ(s.location, "located.mlir:2:8") << s.message;
  EXPECT_EQ(s.str(), s.message);  // the diagnostics name it already: not twice
  EXPECT_EQ(s.message.rfind("cannot load MLIR from 'located.mlir':", 0), 0u) << s.message;
}

TEST(Errors, MissingFunctionListsWhatExists) {
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(kAdd, "add.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("main", {f32({2, 4}), f32({2, 4})}));
  EXPECT_TRUE(contains(msg, "no public function @main")) << msg;
  EXPECT_TRUE(contains(msg, "@add")) << msg;
}

TEST(Errors, NonTensorArgumentsAreRejectedAtCall) {
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>, %n: i32) -> tensor<4xf32> {\n"
      "  return %a : tensor<4xf32>\n}\n",
      "scalar.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("f", {f32({4}), f32({4})}));
  EXPECT_TRUE(contains(msg, "argument 1: type i32 is not a ranked tensor")) << msg;
  EXPECT_TRUE(contains(msg, "scalar.mlir:1:")) << msg;
}

TEST(Errors, MissingFileAndEmptyModule) {
  std::string msg = test::errorOf(test::sharedRuntime().loadModuleFromFile("/no/such/model.mlir"));
  EXPECT_TRUE(contains(msg, "/no/such/model.mlir")) << msg;
  // An empty module (or one with only private functions) is refused at
  // load, not at its first call (issue 32).
  msg = test::errorOf(test::sharedRuntime().loadModule("", "empty.mlir"));
  EXPECT_TRUE(contains(msg, "'empty.mlir' has no public function to call")) << msg;
  msg = test::errorOf(test::sharedRuntime().loadModule(
      "func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n", "private.mlir"));
  EXPECT_TRUE(contains(msg, "'private.mlir' has no public function to call")) << msg;
}

TEST(Errors, UnlowerableOpFailsWithStageAndLocation) {
  // tosa.custom has no lowering and (for this operator) no kernel: the error
  // names the op and its location.
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      "  %r = tosa.custom %a {operator_name = \"x\", domain_name = \"y\", "
      "implementation_attrs = \"\"} : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %r : tensor<4xf32>\n}\n",
      "custom.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("f", {f32({4})}));
  EXPECT_TRUE(contains(msg, "custom.mlir:2:")) << msg;
  EXPECT_TRUE(contains(msg, "'tosa.custom:y.x' has no lowering and no kernel")) << msg;
}

TEST(Errors, ImpossiblyLargeTensorsAreErrorsNotAborts) {
  // 2^40 floats: no machine here has 4 TiB of memory.
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(
      "func.func @f(%a: tensor<1xf32>) -> tensor<1099511627776xf32> {\n"
      "  %s = tosa.const_shape {values = dense<[1099511627776]> : tensor<1xindex>} : () -> !tosa.shape<1>\n"
      "  %t = tosa.tile %a, %s : (tensor<1xf32>, !tosa.shape<1>) -> tensor<1099511627776xf32>\n"
      "  return %t : tensor<1099511627776xf32>\n}\n",
      "huge.mlir"));
  ASSERT_TRUE(m);
  std::string msg = test::errorOf(m->call("f", {f32({1})}));
  EXPECT_TRUE(contains(msg, "needs 4398046511104 bytes")) << msg;
}

// Issue 14 item 7: recursion is refused at load, naming the cycle.
TEST(Errors, RecursionIsRefusedAtLoad) {
  const char *mlir = R"mlir(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @main(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
)mlir";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(mlir, "rec.mlir"));
  ASSERT_TRUE(m);
  auto r = m->call("main", {Tensor::empty(DType::f32, {4})});
  ASSERT_FALSE(bool(r));
  Status s = toStatus(r.takeError());
  EXPECT_EQ(s.code, ErrorCode::kUnsupported);
  EXPECT_EQ(s.message, "function @main cannot be called by kiln: @main calls @helper, which calls @main recursively "
                       "(rec.mlir:7:8); kiln does not compile recursion") << s.message;
}

// Issue 14 items 5, 6: generated code never traps or touches memory outside
// a tensor: a zero divisor or an out-of-range index is an error naming the
// op's location, and the runtime stays usable.
TEST(Errors, GeneratedCodeReportsDivisionByZeroAndBadIndices) {
  const char *div = R"mlir(
func.func @main(%a: tensor<3xi32>, %b: tensor<3xi32>) -> tensor<3xi32> {
  %c = tosa.intdiv %a, %b : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  return %c : tensor<3xi32>
}
)mlir";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(div, "div.mlir"));
  ASSERT_TRUE(m);
  Tensor a = Tensor::fromVector<int32_t>(DType::i32, {3}, {INT32_MIN, 7, -9});
  auto bad = m->call("main", {a, Tensor::fromVector<int32_t>(DType::i32, {3}, {1, 0, 1})});
  ASSERT_FALSE(bool(bad));
  Status s = toStatus(bad.takeError());
  EXPECT_EQ(s.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message.find("div.mlir:3:8: integer division by zero"), std::string::npos) << s.message;
  auto ok = KILN_TAKE(m->call("main", {a, Tensor::fromVector<int32_t>(DType::i32, {3}, {-1, 2, -1})}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].data<int32_t>()[0], INT32_MIN);  // wraps, as the kernel does
  EXPECT_EQ(ok[0].data<int32_t>()[1], 3);

  const char *gather = R"mlir(
func.func @main(%v: tensor<1x4x2xf32>, %i: tensor<1x3xi32>) -> tensor<1x3x2xf32> {
  %g = tosa.gather %v, %i : (tensor<1x4x2xf32>, tensor<1x3xi32>) -> tensor<1x3x2xf32>
  return %g : tensor<1x3x2xf32>
}
)mlir";
  auto g = KILN_TAKE(test::sharedRuntime().loadModule(gather, "gather.mlir"));
  ASSERT_TRUE(g);
  Tensor values = test::randomTensor({1, 4, 2}, 3);
  for (int32_t wrong : {4, -1, 1 << 30}) {
    auto r = g->call("main", {values, Tensor::fromVector<int32_t>(DType::i32, {1, 3}, {0, wrong, 2})});
    ASSERT_FALSE(bool(r)) << wrong;
    Status gs = toStatus(r.takeError());
    EXPECT_NE(gs.message.find("gather.mlir:3:8: index out of range"), std::string::npos) << gs.message;
  }
  auto fine = KILN_TAKE(g->call("main", {values, Tensor::fromVector<int32_t>(DType::i32, {1, 3}, {3, 0, 1})}));
  ASSERT_EQ(fine.size(), 1u);
  EXPECT_EQ(fine[0].data<float>()[0], values.data<float>()[6]);

  const char *scatter = R"mlir(
func.func @main(%v: tensor<1x4x2xf32>, %i: tensor<1x2xi32>, %x: tensor<1x2x2xf32>) -> tensor<1x4x2xf32> {
  %s = tosa.scatter %v, %i, %x : (tensor<1x4x2xf32>, tensor<1x2xi32>, tensor<1x2x2xf32>) -> tensor<1x4x2xf32>
  return %s : tensor<1x4x2xf32>
}
)mlir";
  auto sc = KILN_TAKE(test::sharedRuntime().loadModule(scatter, "scatter.mlir"));
  ASSERT_TRUE(sc);
  auto r = sc->call("main", {values, Tensor::fromVector<int32_t>(DType::i32, {1, 2}, {1, 100000}),
                             test::randomTensor({1, 2, 2}, 4)});
  ASSERT_FALSE(bool(r));
  Status ss = toStatus(r.takeError());
  EXPECT_NE(ss.message.find("scatter.mlir:3:8: index out of range"), std::string::npos) << ss.message;
}

// Exporters' cf.assert checks (torch-mlir's linalg-on-tensors output): a
// check that holds costs nothing (it folds away once shapes are static); one
// that fails is an error naming its message and location, also when the
// assert's step writes no result and the results come from other steps;
// data-dependent checks run in generated code.
TEST(Errors, ExportedAssertsAreCheckedAtRunTime) {
  const char *text = R"mlir(
func.func @main(%a: tensor<?x4xf32>, %b: tensor<4x3xf32>, %lim: tensor<i32>) -> tensor<?x3xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %d = tensor.dim %a, %c1 : tensor<?x4xf32>
  %k = tensor.dim %b, %c0 : tensor<4x3xf32>
  %eq = arith.cmpi eq, %d, %k : index
  cf.assert %eq, "mismatching contracting dimension for torch.aten.mm"
  %n = tensor.dim %a, %c0 : tensor<?x4xf32>
  %small = arith.cmpi sle, %n, %c2 : index
  cf.assert %small, "at most 2 rows"
  %l = tensor.extract %lim[] : tensor<i32>
  %zero = arith.constant 0 : i32
  %positive = arith.cmpi sgt, %l, %zero : i32
  cf.assert %positive, "limit must be positive"
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %m = linalg.matmul ins(%a, %b : tensor<?x4xf32>, tensor<4x3xf32>) outs(%f : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %m : tensor<?x3xf32>
}
)mlir";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(text, "assert.mlir"));
  ASSERT_TRUE(m);
  Tensor b = test::randomTensor({4, 3}, 2);
  Tensor one = Tensor::fromVector<int32_t>(DType::i32, {}, {1});
  auto ok = KILN_TAKE(m->call("main", {test::randomTensor({2, 4}, 1), b, one}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].type().str(), "2x3xf32");

  auto rows = m->call("main", {test::randomTensor({3, 4}, 1), b, one});
  ASSERT_FALSE(bool(rows));
  std::string msg = toStatus(rows.takeError()).message;
  EXPECT_NE(msg.find("assert.mlir:12:3: assertion failed: at most 2 rows"), std::string::npos) << msg;

  auto limit = m->call("main", {test::randomTensor({1, 4}, 1), b, Tensor::fromVector<int32_t>(DType::i32, {}, {0})});
  ASSERT_FALSE(bool(limit));
  msg = toStatus(limit.takeError()).message;
  EXPECT_NE(msg.find("assert.mlir:16:3: assertion failed: limit must be positive"), std::string::npos) << msg;
}

TEST(Errors, CallsThatNeverEndAreStoppedByTheirDeadline) {
  const std::string path = std::string(KILN_TEST_INPUTS) + "/never_ending.mlir";
  RuntimeOptions options;
  options.cacheMode = CacheMode::kOff;
  options.callTimeoutSeconds = 0.3;
  auto rt = KILN_TAKE(Runtime::create(options));
  ASSERT_TRUE(rt);
  auto m = KILN_TAKE(rt->loadModuleFromFile(path));
  ASSERT_TRUE(m);
  Tensor x = Tensor::fromVector<float>(DType::f32, {}, std::vector<float>{1});
  for (int i = 0; i < 2; ++i) {  // the first call compiles (not interrupted), the second is warm
    auto start = std::chrono::steady_clock::now();
    auto out = m->call("main", {x});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(bool(out));
    Status st = toStatus(out.takeError());
    EXPECT_EQ(st.code, ErrorCode::kCancelled) << st.str();
    EXPECT_TRUE(contains(st.message, "deadline exceeded")) << st.str();
    EXPECT_LT(s, 20.0);
  }
  // The runtime and the module stay usable.
  auto ok = KILN_TAKE(m->call("twice", {f32({4})}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].data<float>()[3], 6.0f);
}

TEST(Errors, CancellingARunningCallStopsItsLoop) {
  const std::string path = std::string(KILN_TEST_INPUTS) + "/never_ending.mlir";
  auto m = KILN_TAKE(test::sharedRuntime().loadModuleFromFile(path));
  ASSERT_TRUE(m);
  Tensor x = Tensor::fromVector<float>(DType::f32, {}, std::vector<float>{1});
  auto token = std::make_shared<CancellationToken>();
  auto futures = m->callAsync("main", {x}, token);
  ASSERT_EQ(futures.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(futures[0]->isAvailable()) << "the loop ended by itself";
  token->cancel();
  auto out = futures[0].awaitValue();
  ASSERT_FALSE(bool(out));
  Status st = toStatus(out.takeError());
  EXPECT_EQ(st.code, ErrorCode::kCancelled) << st.str();
  EXPECT_TRUE(contains(st.message, "cancelled")) << st.str();
  // A deadline on the caller's own token works the same way.
  auto timed = std::make_shared<CancellationToken>();
  timed->setTimeout(std::chrono::milliseconds(200));
  auto again = m->callAsync("main", {x}, timed)[0].awaitValue();
  ASSERT_FALSE(bool(again));
  EXPECT_TRUE(contains(llvm::toString(again.takeError()), "deadline exceeded"));
  RuntimeOptions bad;
  bad.callTimeoutSeconds = -1;
  EXPECT_TRUE(contains(test::errorOf(Runtime::create(bad)), "call timeout"));
}
