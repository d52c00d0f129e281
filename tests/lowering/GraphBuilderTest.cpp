// lowering::GraphBuilder: graphs from MLIR builders, typed by the op table,
// equal to the same graph written as text, and clear errors for bad ops.
#include "api/Kiln.h"
#include "lowering/graph/GraphBuilder.h"
#include "tests/TestRuntime.h"

using namespace kiln;
using namespace kiln::lowering;

TEST(GraphBuilder, FoldedOperandsAndTypedAttributesFromTheOpTable) {
  GraphBuilder g("main", "test:conv");
  auto x = g.argument({DType::f32, {1, 6, 6, 2}}, "image");
  auto w = g.argument({DType::f32, {4, 3, 3, 2}});
  auto b = g.argument({DType::f32, {4}});
  ops::AttrMap a;
  a.set("acc_type", std::string("f32"));
  a.set("pad", std::vector<int64_t>{1, 1, 1, 1});
  a.set("stride", std::vector<int64_t>{1, 1});
  a.set("dilation", std::vector<int64_t>{1, 1});
  a.set("input_zp", 0.0);
  a.set("weight_zp", 0.0);
  auto y = KILN_TAKE(g.op("tosa.conv2d", {x, w, b}, a, {{DType::f32, {1, 6, 6, 4}}}));
  ops::AttrMap perms;
  perms.set("perms", std::vector<int64_t>{0, 3, 1, 2});
  auto t = KILN_TAKE(g.op("tosa.transpose", {y[0]}, perms, {{DType::f32, {1, 4, 6, 6}}}));
  std::string text = g.str();
  // Zero points became one-element constants; attributes carry the table's MLIR types.
  EXPECT_NE(text.find("\"tosa.const\"() <{values = dense<0.000000e+00> : tensor<1xf32>}>"), std::string::npos) << text;
  EXPECT_NE(text.find("pad = array<i64: 1, 1, 1, 1>"), std::string::npos) << text;
  EXPECT_NE(text.find("acc_type = f32"), std::string::npos) << text;
  EXPECT_NE(text.find("perms = array<i32: 0, 3, 1, 2>"), std::string::npos) << text;
  auto program = KILN_TAKE(g.finish({t[0]}));
  ASSERT_TRUE(program);
  ASSERT_EQ(program->functions().size(), 1u);
  EXPECT_EQ(program->functions()[0].args[0].name, "image");
  EXPECT_EQ(program->functions()[0].results[0].str(), "1x4x6x6xf32");

  // It runs like a parsed model (no text in between).
  auto m = KILN_TAKE(test::sharedRuntime().loadProgram(std::move(program)));
  ASSERT_TRUE(m);
  auto out = KILN_TAKE(m->call("main", {test::randomTensor({1, 6, 6, 2}, 1), test::randomTensor({4, 3, 3, 2}, 2),
                                        test::randomTensor({4}, 3)}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type().str(), "1x4x6x6xf32");
}

TEST(GraphBuilder, SameCanonicalGraphAsTheTextForm) {
  GraphBuilder g("main", "test:add");
  auto x = g.argument({DType::f32, {2, 3}});
  auto y = g.argument({DType::f32, {1, 3}});
  auto z = KILN_TAKE(g.op("tosa.add", {x, y}, {}, {{DType::f32, {2, 3}}}));
  auto built = KILN_TAKE(g.finish(z));
  auto parsed = KILN_TAKE(Program::parse(R"mlir(
func.func @main(%x: tensor<2x3xf32>, %y: tensor<1x3xf32>) -> tensor<2x3xf32> {
  %z = tosa.add %x, %y : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return %z : tensor<2x3xf32>
}
)mlir", "add.mlir"));
  ASSERT_TRUE(built && parsed);
  EXPECT_EQ(KILN_TAKE(built->canonicalGraph("main")), KILN_TAKE(parsed->canonicalGraph("main")));
}

TEST(GraphBuilder, ConstantsOfEveryKindAndCustomOps) {
  GraphBuilder g("main", "test:const");
  auto x = g.argument({DType::f32, {4}});
  Tensor mask = Tensor::empty(DType::i1, {4});
  for (int i = 0; i < 4; ++i) mask.data<uint8_t>()[i] = i % 2;
  auto m = KILN_TAKE(g.constant(mask));
  auto zero = KILN_TAKE(g.constant(Tensor::fromVector<float>(DType::f32, {4}, {0, 0, 0, 0})));
  auto sel = KILN_TAKE(g.op("tosa.select", {m, x, zero}, {}, {{DType::f32, {4}}}));
  auto gelu = KILN_TAKE(g.op("tosa.custom:kiln.gelu", {sel[0]}, {}, {{DType::f32, {4}}}));
  EXPECT_NE(g.str().find("domain_name = \"kiln\""), std::string::npos);
  auto p = KILN_TAKE(g.finish(gelu));
  auto mod = KILN_TAKE(test::sharedRuntime().loadProgram(std::move(p)));
  auto out = KILN_TAKE(mod->call("main", {Tensor::fromVector<float>(DType::f32, {4}, {1, 2, 3, 4})}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 0.0f);  // masked
  EXPECT_NEAR(out[0].data<float>()[1], 2 * 0.5 * (1 + std::erf(2 / std::sqrt(2.0))), 1e-5);
}

// A custom op's own attributes (kiln.grouped_conv2d's stride and pad: not
// in the op table's tosa.custom row) become the discardable attributes the
// importers write, so the placement tuner can build such an op alone to time
// it against its kernel (before, "tosa.custom has no attribute 'dilation'"
// kept every grouped conv on JIT code untimed).
TEST(GraphBuilder, CustomOpsKeepTheirOwnAttributes) {
  GraphBuilder g("main", "test:grouped");
  auto x = g.argument({DType::f32, {1, 3, 3, 2, 1}});
  auto w = g.argument({DType::f32, {2, 1, 1, 1, 1}});
  ops::AttrMap a;
  a.set("stride", std::vector<int64_t>{2, 2});
  a.set("dilation", std::vector<int64_t>{1, 1});
  a.set("pad", std::vector<int64_t>{0, 0, 0, 0});
  auto y = KILN_TAKE(g.op("tosa.custom:kiln.grouped_conv2d", {x, w}, a, {{DType::f32, {1, 2, 2, 2, 1}}}));
  std::string text = g.str();
  EXPECT_NE(text.find("stride = array<i64: 2, 2>"), std::string::npos) << text;
  EXPECT_NE(text.find("dilation = array<i64: 1, 1>"), std::string::npos) << text;
  auto p = KILN_TAKE(g.finish(y));
  auto mod = KILN_TAKE(test::sharedRuntime().loadProgram(std::move(p)));
  std::vector<float> xs(18);
  for (int i = 0; i < 18; ++i) xs[size_t(i)] = float(i);
  auto out = KILN_TAKE(mod->call("main", {Tensor::fromVector<float>(DType::f32, {1, 3, 3, 2, 1}, xs),
                                          Tensor::fromVector<float>(DType::f32, {2, 1, 1, 1, 1}, {2, -1})}));
  ASSERT_EQ(out.size(), 1u);
  // Stride 2 over the 3x3 map: positions (0,0), (0,2), (2,0), (2,2); group 0 x2, group 1 x-1.
  const float want[] = {0, -1, 8, -5, 24, -13, 32, -17};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], want[i]) << i;
}

TEST(GraphBuilder, BadOpsAreErrorsNamingTheOp) {
  GraphBuilder g("main", "test:bad");
  auto x = g.argument({DType::f32, {4}});
  Status unknown = toStatus(g.op("tosa.frobnicate", {x}, {}, {{DType::f32, {4}}}).takeError());
  EXPECT_EQ(unknown.code, ErrorCode::kUnsupported);
  EXPECT_EQ(unknown.message, "'tosa.frobnicate' is not in kiln's op table (ops/Ops.def)");
  ops::AttrMap axis;
  axis.set("axis", std::string("zero"));
  Status badAttr = toStatus(g.op("tosa.reduce_sum", {x}, axis, {{DType::f32, {1}}}).takeError());
  EXPECT_EQ(badAttr.message, "tosa.reduce_sum: attribute 'axis' must be an integer");
  ops::AttrMap extra;
  extra.set("colour", int64_t(3));
  Status unknownAttr = toStatus(g.op("tosa.exp", {x}, extra, {{DType::f32, {4}}}).takeError());
  EXPECT_EQ(unknownAttr.message, "tosa.exp has no attribute 'colour' (ops/Ops.def)");
  Status missingShape = toStatus(g.op("tosa.reshape", {x}, {}, {{DType::f32, {2, 2}}}).takeError());
  EXPECT_NE(missingShape.message.find("tosa.reshape: attribute 'shape'"), std::string::npos) << missingShape.message;
  Status arity = toStatus(g.op("tosa.add", {x}, {}, {{DType::f32, {4}}}).takeError());
  EXPECT_EQ(arity.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(arity.message, "tosa.add takes 2 tensor operands, got 1");
  Status conv = toStatus(g.op("tosa.conv2d", {x, x, x, x}, {}, {{DType::f32, {4}}}).takeError());
  EXPECT_EQ(conv.message, "tosa.conv2d takes 3 tensor operands, got 4");
  Status notAValue = toStatus(g.op("tosa.exp", {7}, {}, {{DType::f32, {4}}}).takeError());
  EXPECT_EQ(notAValue.message, "tosa.exp: operand 7 is not a value of this graph");
  // Wrong result types fail verification with the op's location.
  auto wrong = KILN_TAKE(g.op("tosa.exp", {x}, {}, {{DType::i32, {4}}}));
  Status verify = toStatus(g.finish(wrong).takeError());
  EXPECT_NE(verify.message.find("the graph 'test:bad' is not valid"), std::string::npos) << verify.message;
  EXPECT_NE(verify.message.find("test:bad:1:1: error: 'tosa.exp' op"), std::string::npos) << verify.message;
}

// Negative paddings (TOSA requires >= 0) are refused when the graph is
// built or parsed, naming the op, never lowered into reads outside the input.
TEST(GraphBuilder, NegativePaddingIsRefused) {
  GraphBuilder g("main", "test:negative-pad");
  auto x = g.argument({DType::f32, {1, 56, 56, 8}});
  auto w = g.argument({DType::f32, {8, 1, 1, 8}});
  auto b = g.argument({DType::f32, {8}});
  ops::AttrMap a;
  a.set("acc_type", std::string("f32"));
  a.set("pad", std::vector<int64_t>{0, -1, 0, -1});
  a.set("stride", std::vector<int64_t>{2, 2});
  a.set("dilation", std::vector<int64_t>{1, 1});
  a.set("input_zp", 0.0);
  a.set("weight_zp", 0.0);
  auto y = g.op("tosa.conv2d", {x, w, b}, a, {{DType::f32, {1, 28, 28, 8}}});
  std::string message;
  if (!y) {
    message = llvm::toString(y.takeError());
  } else {
    auto program = g.finish({(*y)[0]});
    ASSERT_FALSE(bool(program));
    message = llvm::toString(program.takeError());
  }
  EXPECT_NE(message.find("tosa.conv2d"), std::string::npos) << message;
  EXPECT_NE(message.find("padding values to be >= 0"), std::string::npos) << message;

  std::string text = g.str();
  auto parsed = Program::parse(text, "negative-pad.mlir");
  ASSERT_FALSE(bool(parsed));
  std::string m2 = llvm::toString(parsed.takeError());
  EXPECT_NE(m2.find("padding values to be >= 0"), std::string::npos) << m2;
}
