// lowering::Program: import, signatures, specialization, hoisting, bytecode.
#include "lowering/pipelines/Pipelines.h"
#include "lowering/graph/Program.h"
#include "tests/TestRuntime.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

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
      "main", {TensorType{DType::f32, {5, 8}}, TensorType{DType::i32, {3}}}, times));
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
      p->functions()[0], {TensorType{DType::f32, {5, 7}}, TensorType{DType::i32, {3}}}));
  EXPECT_NE(msg.find("argument 0 ('features'): expected tensor<?x8xf32>, got tensor<5x7xf32>"),
            std::string::npos)
      << msg;
}
