// Built-in models and a hand-written TOSA model, JIT-compiled and checked
// against the plain C++ references in tests/reference.
#include "jit/Compiler.h"
#include "tests/TestRuntime.h"
#include "tests/reference/Reference.h"
#include "lowering/models/BuiltinModels.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include <sys/resource.h>

using namespace kiln;
using kiln::models::deterministicValues;

namespace {


std::unique_ptr<Module> loadBuiltin(const std::string &name) {
  const auto *m = models::findBuiltinModel(name);
  EXPECT_NE(m, nullptr);
  return KILN_TAKE(test::sharedRuntime().loadModule(m->mlir, name));
}

ref::Vec mlpReference(const ref::Vec &x, int64_t batch) {
  auto w1 = deterministicValues(64 * 128, 1, 0.125f), b1 = deterministicValues(128, 2, 0.05f);
  auto w2 = deterministicValues(128 * 10, 3, 0.088f), b2 = deterministicValues(10, 4, 0.05f);
  ref::Vec h = ref::matmul(x, w1, 1, batch, 64, 128);
  for (int64_t i = 0; i < batch * 128; ++i) h[i] = std::max(0.0f, h[i] + b1[i % 128]);
  ref::Vec o = ref::matmul(h, w2, 1, batch, 128, 10);
  for (int64_t i = 0; i < batch * 10; ++i) o[i] += b2[i % 10];
  return ref::softmax(o, batch, 10);
}

/// n weights spread over [lo, hi) in a fixed pattern per seed.
std::vector<float> values(int64_t n, int seed, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = lo + (hi - lo) * float((i * 7919 + seed * 104729) % 1000) / 1000.0f;
  return v;
}

/// dense<...> text of `v` with `shape` (nested lists, one per dimension).
std::string denseText(const std::vector<float> &v, llvm::ArrayRef<int64_t> shape) {
  std::function<std::string(llvm::ArrayRef<int64_t>, size_t &)> nested = [&](llvm::ArrayRef<int64_t> dims,
                                                                               size_t &at) -> std::string {
    if (dims.empty()) return std::to_string(v[at++]);
    std::string s = "[";
    for (int64_t i = 0; i < dims[0]; ++i) s += (i ? ", " : "") + nested(dims.drop_front(), at);
    return s + "]";
  };
  size_t at = 0;
  return "dense<" + nested(shape, at) + ">";
}

}  // namespace

TEST(Models, MlpMatchesReferenceForSeveralBatchSizes) {
  // With range code (the default) batch 1's code serves every size; without
  // it each size compiles.
  for (bool ranges : {true, false}) {
    SCOPED_TRACE(ranges ? "batch ranges on" : "batch ranges off");
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.batchRanges = ranges;
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadModule(models::findBuiltinModel("mlp")->mlir, "mlp"));
    ASSERT_EQ(m->functions().size(), 1u);
    EXPECT_EQ(m->functions()[0].args[0].name, "x");
    EXPECT_EQ(m->functions()[0].args[0].type.str(), "?x64xf32");
    EXPECT_TRUE(m->functions()[0].batch.separable) << m->functions()[0].batch.why;
    for (int64_t batch : {1, 3, 17}) {
      Tensor x = test::randomTensor({batch, 64}, unsigned(batch));
      auto out = KILN_TAKE(m->call("main", {x}));
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].type().str(), std::to_string(batch) + "x10xf32");
      EXPECT_TRUE(test::allClose(test::asDoubles(out[0]),
                                 test::asDoubles(mlpReference(x.toVector<float>(), batch)), 1e-4,
                                 1e-6));
    }
    size_t compiles = ranges ? 1u : 3u;
    EXPECT_EQ(m->numCompiled(), compiles);
    EXPECT_EQ(m->tierStats().rangeCalls, ranges ? 2u : 0u);
    // Same signature again: no new compile.
    ASSERT_TRUE(bool(m->call("main", {test::randomTensor({3, 64}, 9)})));
    EXPECT_EQ(m->numCompiled(), compiles);
  }
}

TEST(Models, CnnMatchesReference) {
  auto m = loadBuiltin("cnn");
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({1, 16, 16, 3}, 5);
  auto out = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(out.size(), 1u);

  const int64_t p1[4] = {1, 1, 1, 1}, s1[2] = {1, 1}, d1[2] = {1, 1};
  const int64_t p2[4] = {0, 1, 0, 1}, s2[2] = {2, 2}, k2[2] = {2, 2}, k4[2] = {4, 4}, s4[2] = {4, 4};
  const int64_t p0[4] = {0, 0, 0, 0};
  ref::Dims shape;
  ref::Vec c1 = ref::conv2d(x.toVector<float>(), {1, 16, 16, 3}, deterministicValues(8 * 27, 11, 0.27f),
                            {8, 3, 3, 3}, deterministicValues(8, 12, 0.05f), p1, s1, d1, shape);
  c1 = ref::map(c1, [](float v) { return std::clamp(v, 0.0f, 6.0f); });
  ref::Vec pool1 = ref::pool2d(c1, shape, k2, k2, p0, true, shape);
  ref::Vec c2 = ref::conv2d(pool1, shape, deterministicValues(16 * 72, 13, 0.118f), {16, 3, 3, 8},
                            deterministicValues(16, 14, 0.05f), p2, s2, d1, shape);
  c2 = ref::map(c2, [](float v) { return std::clamp(v, 0.0f, 6.0f); });
  ref::Vec pool2 = ref::pool2d(c2, shape, k4, s4, p0, false, shape);
  ref::Vec logits = ref::matmul(pool2, deterministicValues(160, 15, 0.25f), 1, 1, 16, 10);
  auto fb = deterministicValues(10, 16, 0.05f);
  for (int i = 0; i < 10; ++i) logits[i] += fb[i];
  EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(ref::softmax(logits, 1, 10)),
                             1e-4, 1e-6));
}

TEST(Models, WeightsAreHoistedNotCompiledIn) {
  // cnn keeps its weights as dense_resource blobs: they are passed as buffers
  // that point into the module (zero-copy), and the object code stays small.
  auto m = loadBuiltin("cnn");
  ASSERT_TRUE(m);
  auto fn = KILN_TAKE(m->compile("main", {TensorType{DType::f32, {1, 16, 16, 3}}}));
  ASSERT_TRUE(fn);
  size_t weightBytes = 0;
  for (const Tensor &w : fn->weights) {
    weightBytes += w.byteSize();
    EXPECT_FALSE(w.buffer()->ownsMemory()) << "weight " << w.type().str() << " was copied";
  }
  // All five dense_resource constants; the 10-element dense bias stays in code.
  EXPECT_EQ(fn->weights.size(), 5u);
  EXPECT_GT(weightBytes, 4000u);

  // A model with a 1M-element weight compiles to an object far smaller than it.
  // Weights alternate 1.0 and 0.5 (a splat would stay a constant).
  std::string hex;
  for (int i = 0; i < 1024 * 1024 / 2; ++i) hex += "0000803F0000003F";
  std::string big =
      "func.func @main(%x: tensor<1024xf32>) -> tensor<1024xf32> {\n"
      "  %w = \"tosa.const\"() <{values = dense<\"0x" +
      hex +
      "\"> : tensor<1024x1024xf32>}> : () -> tensor<1024x1024xf32>\n"
      "  %s = tosa.const_shape {values = dense<[1, 1, 1024]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
      "  %x3 = tosa.reshape %x, %s : (tensor<1024xf32>, !tosa.shape<3>) -> tensor<1x1x1024xf32>\n"
      "  %s2 = tosa.const_shape {values = dense<[1, 1024, 1024]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
      "  %w3 = tosa.reshape %w, %s2 : (tensor<1024x1024xf32>, !tosa.shape<3>) -> tensor<1x1024x1024xf32>\n"
      "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
      "  %y = tosa.matmul %x3, %w3, %zp, %zp : (tensor<1x1x1024xf32>, tensor<1x1024x1024xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x1024xf32>\n"
      "  %s1 = tosa.const_shape {values = dense<[1024]> : tensor<1xindex>} : () -> !tosa.shape<1>\n"
      "  %r = tosa.reshape %y, %s1 : (tensor<1x1x1024xf32>, !tosa.shape<1>) -> tensor<1024xf32>\n"
      "  return %r : tensor<1024xf32>\n}\n";
  auto bigModule = KILN_TAKE(test::sharedRuntime().loadModule(big, "big"));
  ASSERT_TRUE(bigModule);
  auto bigFn = KILN_TAKE(bigModule->compile("main", {TensorType{DType::f32, {1024}}}));
  ASSERT_TRUE(bigFn);
  ASSERT_EQ(bigFn->weights.size(), 1u);
  // The matmul weight's rows are stored padded by one cache line
  // (lowering::WeightLayouts::padMatmulWeights).
  EXPECT_EQ(bigFn->weights[0].byteSize(), 4u * 1024 * (1024 + 16));
  EXPECT_LT(bigFn->stats.objectBytes, 64u * 1024);
  // Column j of w is all 1.0 (j even) or all 0.5 (j odd); x = ones.
  std::vector<float> ones(1024, 1.0f);
  auto y = KILN_TAKE(bigModule->call("main", {Tensor::fromVector<float>(DType::f32, {1024}, ones)}));
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].data<float>()[6], 1024.0f);
  EXPECT_EQ(y[0].data<float>()[7], 512.0f);
}

// Weight literals of 256 bytes or more are decoded before MLIR's parser sees
// the text (lowering/graph/HexLiterals.cpp): the model computes the same,
// a literal with a bad digit is still MLIR's error at its line, a later
// error keeps its line number, and a file that uses the lifted keys' names
// itself is parsed as it is.
TEST(Models, BigHexLiteralsLoadAsTheParserWouldReadThem) {
  // y = x (1x1x128) @ w (1x128x128): w's columns alternate 1.0 and 0.5.
  std::string hex;
  for (int i = 0; i < 128 * 128 / 2; ++i) hex += "0000803F0000003F";
  auto model = [&](const std::string &literal, const std::string &tail) {
    return "func.func @main(%x: tensor<1x1x128xf32>) -> tensor<1x1x128xf32> {\n"
           "  %w = \"tosa.const\"() <{values = dense<\"0x" + literal +
           "\"> : tensor<1x128x128xf32>}> : () -> tensor<1x128x128xf32>\n"
           "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
           "  %y = tosa.matmul %x, %w, %zp, %zp : (tensor<1x1x128xf32>, tensor<1x128x128xf32>, tensor<1xf32>, "
           "tensor<1xf32>) -> tensor<1x1x128xf32>\n" + tail +
           "  return %y : tensor<1x1x128xf32>\n}\n";
  };
  Tensor ones = Tensor::fromVector<float>(DType::f32, {1, 1, 128}, std::vector<float>(128, 1.0f));
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(model(hex, ""), "lifted"));
  ASSERT_TRUE(m);
  auto y = KILN_TAKE(m->call("main", {ones}));
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].data<float>()[4], 128.0f);
  EXPECT_EQ(y[0].data<float>()[5], 64.0f);

  std::string bad = hex;
  bad[1000] = 'g';
  std::string err = test::errorOf(test::sharedRuntime().loadModule(model(bad, ""), "bad-digit"));
  EXPECT_NE(err.find("bad-digit:2:"), std::string::npos) << err;

  err = test::errorOf(test::sharedRuntime().loadModule(model(hex, "  %z = tosa.nonsense %y\n"), "later-error"));
  EXPECT_NE(err.find("later-error:5:8:"), std::string::npos) << err;

  // The file's own resource named like a lifted key: nothing is lifted.
  std::string own = model(hex, "  %r = \"tosa.const\"() <{values = dense_resource<__kiln_hex_0> : tensor<2xf32>}> : "
                               "() -> tensor<2xf32>\n") +
                    "{-#\n  dialect_resources: {\n    builtin: {\n      __kiln_hex_0: \"0x040000000000803F0000003F\"\n"
                    "    }\n  }\n#-}\n";
  auto m2 = KILN_TAKE(test::sharedRuntime().loadModule(own, "own-key"));
  ASSERT_TRUE(m2);
  auto y2 = KILN_TAKE(m2->call("main", {ones}));
  ASSERT_EQ(y2.size(), 1u);
  EXPECT_EQ(y2[0].data<float>()[4], 128.0f);
}

// Boolean literals as an MLIR newer than 22 writes them (torch-mlir's
// wheels: a byte per element; a splat of true as 0x01) load as the same
// values, and MLIR 22's own form (bits, element 0 in bit 0) is read as it
// always was (HexLiterals.cpp packedBooleans).
TEST(Models, BooleanHexLiteralsOfEitherMlirLoad) {
  auto model = [](const std::string &literal) {
    return "func.func @main(%a: tensor<1x20xf32>, %b: tensor<1x20xf32>) -> tensor<1x20xf32> {\n"
           "  %m = \"tosa.const\"() <{values = dense<\"0x" + literal +
           "\"> : tensor<1x20xi1>}> : () -> tensor<1x20xi1>\n"
           "  %y = tosa.select %m, %a, %b : (tensor<1x20xi1>, tensor<1x20xf32>, tensor<1x20xf32>) -> tensor<1x20xf32>\n"
           "  return %y : tensor<1x20xf32>\n}\n";
  };
  Tensor a = Tensor::fromVector<float>(DType::f32, {1, 20}, std::vector<float>(20, 1.0f));
  Tensor b = Tensor::fromVector<float>(DType::f32, {1, 20}, std::vector<float>(20, 2.0f));
  auto selected = [&](const std::string &literal, const char *name) {
    auto m = KILN_TAKE(test::sharedRuntime().loadModule(model(literal), name));
    std::vector<float> out;
    if (!m) return out;
    auto y = KILN_TAKE(m->call("main", {a, b}));
    if (y.size() == 1) out.assign(y[0].data<float>(), y[0].data<float>() + 20);
    return out;
  };
  // Elements 0, 9, 10 and 19 true.
  std::string bytes;
  for (int i = 0; i < 20; ++i) bytes += (i == 0 || i == 9 || i == 10 || i == 19) ? "01" : "00";
  std::vector<float> want(20, 2.0f);
  for (int i : {0, 9, 10, 19}) want[size_t(i)] = 1.0f;
  EXPECT_EQ(selected(bytes, "bytes"), want);
  EXPECT_EQ(selected("010608", "bits"), want);  // MLIR 22: 0x01, 0x06, 0x08
  EXPECT_EQ(selected("01", "splat-true"), std::vector<float>(20, 1.0f));
  EXPECT_EQ(selected("FF", "splat-true-22"), std::vector<float>(20, 1.0f));
  EXPECT_EQ(selected("00", "splat-false"), std::vector<float>(20, 2.0f));
}

// A literal of more than one decode task (1 MiB each, run on the MLIR
// thread pool and the loading thread): every element lands where it
// belongs, and a bad digit in a later task is still MLIR's error.
TEST(Models, BigHexLiteralsDecodedInPiecesLandWhereTheyBelong) {
  constexpr int K = 128, N = 2560;  // 1.25 MiB of f32
  auto hexOf = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    char out[9];
    std::snprintf(out, sizeof out, "%02X%02X%02X%02X", bits & 0xFF, (bits >> 8) & 0xFF, (bits >> 16) & 0xFF,
                  bits >> 24);
    return std::string(out, 8);
  };
  std::string hex;
  hex.reserve(size_t(K) * N * 8);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) hex += hexOf(float(n % 5) + 0.25f * float(k % 3));
  auto model = [&](const std::string &literal) {
    std::string t = "tensor<1x" + std::to_string(K) + "x" + std::to_string(N) + "xf32>";
    std::string x = "tensor<1x1x" + std::to_string(K) + "xf32>", y = "tensor<1x1x" + std::to_string(N) + "xf32>";
    return "func.func @main(%x: " + x + ") -> " + y + " {\n  %w = \"tosa.const\"() <{values = dense<\"0x" + literal +
           "\"> : " + t + "}> : () -> " + t +
           "\n  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
           "  %y = tosa.matmul %x, %w, %zp, %zp : (" + x + ", " + t + ", tensor<1xf32>, tensor<1xf32>) -> " + y +
           "\n  return %y : " + y + "\n}\n";
  };
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(model(hex), "pieces"));
  ASSERT_TRUE(m);
  Tensor ones = Tensor::fromVector<float>(DType::f32, {1, 1, K}, std::vector<float>(K, 1.0f));
  auto y = KILN_TAKE(m->call("main", {ones}));
  ASSERT_EQ(y.size(), 1u);
  // Over k < 128, k % 3 sums to 127.
  for (int n = 0; n < N; ++n) ASSERT_EQ(y[0].data<float>()[n], float(K * (n % 5)) + 0.25f * 127.0f) << n;

  std::string bad = hex;
  bad[bad.size() - 5] = 'x';  // in the last task
  std::string err = test::errorOf(test::sharedRuntime().loadModule(model(bad), "bad-late-digit"));
  EXPECT_NE(err.find("bad-late-digit:2:"), std::string::npos) << err;
}

// Small float literals too (per-channel parameters as torch-mlir's TOSA
// writes them): a 512-byte bias is lifted and still folds with a 4-byte
// scale (the parser's) at load; a splat written in hex stays the
// parser's.
TEST(Models, SmallHexLiteralsLoadAsTheParserWouldReadThem) {
  auto hexOf = [](const void *p, size_t n) {
    std::string out;
    char h[3];
    for (size_t i = 0; i < n; ++i) {
      std::snprintf(h, sizeof h, "%02X", static_cast<const uint8_t *>(p)[i]);
      out += h;
    }
    return out;
  };
  std::vector<float> bias(128);
  for (int i = 0; i < 128; ++i) bias[i] = float(i);
  float two = 2.0f;
  float three = 3.0f;
  std::string src =
      "func.func @main(%x: tensor<1x1x128xf32>) -> tensor<1x1x128xf32> {\n"
      "  %b = \"tosa.const\"() <{values = dense<\"0x" + hexOf(bias.data(), 512) +
      "\"> : tensor<1x1x128xf32>}> : () -> tensor<1x1x128xf32>\n"
      "  %s = \"tosa.const\"() <{values = dense<\"0x" + hexOf(&two, 4) +
      "\"> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
      "  %t = \"tosa.const\"() <{values = dense<\"0x" + hexOf(&three, 4) +
      "\"> : tensor<1x1x128xf32>}> : () -> tensor<1x1x128xf32>\n"
      "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
      "  %bs = tosa.mul %b, %s, %shift : (tensor<1x1x128xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x1x128xf32>\n"
      "  %y = tosa.add %x, %bs : (tensor<1x1x128xf32>, tensor<1x1x128xf32>) -> tensor<1x1x128xf32>\n"
      "  %r = tosa.add %y, %t : (tensor<1x1x128xf32>, tensor<1x1x128xf32>) -> tensor<1x1x128xf32>\n"
      "  return %r : tensor<1x1x128xf32>\n}\n";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(src, "small-literals"));
  ASSERT_TRUE(m);
  // b * s folded at load: one tosa.mul fewer.
  EXPECT_NE(m->graphRewrites().find("tosa.mul 1 -> 0"), std::string::npos) << m->graphRewrites();
  Tensor ones = Tensor::fromVector<float>(DType::f32, {1, 1, 128}, std::vector<float>(128, 1.0f));
  auto y = KILN_TAKE(m->call("main", {ones}));
  ASSERT_EQ(y.size(), 1u);
  for (int i : {0, 5, 127}) EXPECT_EQ(y[0].data<float>()[i], 1.0f + 2.0f * float(i) + 3.0f) << i;
  // A bad digit in the lifted literal is the parser's error at its line.
  std::string bad = src;
  bad[bad.find("0x") + 100] = 'q';
  std::string err = test::errorOf(test::sharedRuntime().loadModule(bad, "small-bad-digit"));
  EXPECT_NE(err.find("small-bad-digit:2:"), std::string::npos) << err;
}

// torch-mlir's form: weights as dense_resources in the file's resource
// section. Those of 256 bytes or more are decoded outside MLIR's parser
// too (the parser reads an empty blob of their alignment); tiny ones, and
// other sections, are the parser's. A bad digit is still MLIR's error at
// its line, in a big blob or a small one.
TEST(Models, BigResourceBlobsLoadAsTheParserWouldReadThem) {
  // y = x (1x1x128) @ w (1x128x128) + b * s: w's columns alternate 1.0 and
  // 0.5, b (512 bytes: lifted too) is 0, 1, 2, ..., s (4 bytes: the
  // parser's) is 2.
  std::string w = "10000000";  // alignment 16
  for (int i = 0; i < 128 * 128 / 2; ++i) w += "0000803F0000003F";
  std::string b = "04000000";
  for (int i = 0; i < 128; ++i) {
    float f = float(i);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%02X%02X%02X%02X", bits & 0xFF, (bits >> 8) & 0xFF, (bits >> 16) & 0xFF, bits >> 24);
    b += hex;
  }
  auto model = [&](const std::string &wHex, const std::string &bHex) {
    return "func.func @main(%x: tensor<1x1x128xf32>) -> tensor<1x1x128xf32> {\n"
           "  %w = \"tosa.const\"() <{values = dense_resource<torch_tensor_w.f32> : tensor<1x128x128xf32>}> : () -> "
           "tensor<1x128x128xf32>\n"
           "  %b = \"tosa.const\"() <{values = dense_resource<bias> : tensor<1x1x128xf32>}> : () -> tensor<1x1x128xf32>\n"
           "  %s = \"tosa.const\"() <{values = dense_resource<scale> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
           "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
           "  %bs = tosa.mul %b, %s, %shift : (tensor<1x1x128xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x1x128xf32>\n"
           "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
           "  %y = tosa.matmul %x, %w, %zp, %zp : (tensor<1x1x128xf32>, tensor<1x128x128xf32>, tensor<1xf32>, "
           "tensor<1xf32>) -> tensor<1x1x128xf32>\n"
           "  %r = tosa.add %y, %bs : (tensor<1x1x128xf32>, tensor<1x1x128xf32>) -> tensor<1x1x128xf32>\n"
           "  return %r : tensor<1x1x128xf32>\n}\n"
           "{-#\n  dialect_resources: {\n    builtin: {\n"
           "      torch_tensor_w.f32: \"0x" + wHex + "\",\n"
           "      bias: \"0x" + bHex + "\",\n"
           "      scale: \"0x0400000000000040\"\n"
           "    }\n  }\n#-}\n";
  };
  Tensor ones = Tensor::fromVector<float>(DType::f32, {1, 1, 128}, std::vector<float>(128, 1.0f));
  // Loads and computes with the resource's values.
  auto loadsRight = [&](const std::string &weights, const char *name) {
    SCOPED_TRACE(name);
    auto m = KILN_TAKE(test::sharedRuntime().loadModule(model(weights, b), name));
    ASSERT_TRUE(m);
    auto y = KILN_TAKE(m->call("main", {ones}));
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].data<float>()[4], 128.0f + 2 * 4.0f);
    EXPECT_EQ(y[0].data<float>()[5], 64.0f + 2 * 5.0f);
    EXPECT_EQ(y[0].data<float>()[127], 64.0f + 2 * 127.0f);
  };
  loadsRight(w, "resources");

  std::string bad = w;
  bad[5000] = 'z';
  std::string err = test::errorOf(test::sharedRuntime().loadModule(model(bad, b), "bad-resource"));
  EXPECT_NE(err.find("bad-resource:15:"), std::string::npos) << err;
  std::string badBias = b;
  badBias[300] = 'q';
  err = test::errorOf(test::sharedRuntime().loadModule(model(w, badBias), "bad-small-resource"));
  EXPECT_NE(err.find("bad-small-resource:16:"), std::string::npos) << err;

  // Alignments kiln leaves to the parser: beyond a page (still loads, the
  // same values), not a power of two (MLIR's error, at its line).
  loadsRight("00200000" + w.substr(8), "wide-alignment");  // 8192
  err = test::errorOf(test::sharedRuntime().loadModule(model("03000000" + w.substr(8), b), "odd-alignment"));
  EXPECT_NE(err.find("odd-alignment:15:"), std::string::npos) << err.substr(0, 300);
  EXPECT_NE(err.find("non-power-of-2 value: 3"), std::string::npos) << err.substr(0, 300);
}

TEST(Models, HandWrittenTosaFileMatchesReference) {
  auto m = KILN_TAKE(test::sharedRuntime().loadModuleFromFile(KILN_TEST_INPUTS "/conv_softmax.mlir"));
  ASSERT_TRUE(m);
  const FunctionSignature *sig = m->signature("predict");
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->args[0].name, "image");  // from tf.entry_function
  Tensor x = test::randomTensor({1, 6, 6, 2}, 42);
  auto out = KILN_TAKE(m->call("predict", {x}));
  ASSERT_EQ(out.size(), 1u);

  auto vals = [](int n, int a, int b, int mod, int off, float scale) {
    ref::Vec v(n);
    for (int i = 0; i < n; ++i) v[i] = float(((i * a + b) % mod - off) * double(scale));
    return v;
  };
  const int64_t pad[4] = {1, 1, 1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, k2[2] = {2, 2},
                p0[4] = {0, 0, 0, 0};
  ref::Dims shape;
  ref::Vec c = ref::conv2d(x.toVector<float>(), {1, 6, 6, 2}, vals(54, 7, 3, 11, 5, 0.1f), {3, 3, 3, 2},
                           {0.1f, -0.2f, 0.05f}, pad, s, d, shape);
  c = ref::map(c, [](float v) { return std::clamp(v, 0.0f, 6.0f); });
  ref::Vec p = ref::pool2d(c, shape, k2, k2, p0, true, shape);
  ref::Vec logits = ref::matmul(p, vals(108, 5, 1, 13, 6, 0.05f), 1, 1, 27, 4);
  const float fb[4] = {0.01f, -0.02f, 0.03f, 0.0f};
  for (int i = 0; i < 4; ++i) logits[i] += fb[i];
  EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(ref::softmax(logits, 1, 4)),
                             1e-4, 1e-6));
}

TEST(Models, ConcurrentFirstCallsCompileOnce) {
  auto m = loadBuiltin("mlp");
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({2, 64}, 1);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      auto r = m->call("main", {x});
      if (r) ++ok;
      else llvm::consumeError(r.takeError());
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(m->numCompiled(), 1u);
}

TEST(Models, AsyncCallsReturnFuturesThatMatchSyncResults) {
  auto m = loadBuiltin("mlp");
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({4, 64}, 3);
  auto sync = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(sync.size(), 1u);
  std::vector<std::vector<AsyncValueRef<Tensor>>> pending;
  for (int i = 0; i < 16; ++i) pending.push_back(m->callAsync("main", {x}));
  for (auto &futures : pending) {
    ASSERT_EQ(futures.size(), 1u);
    auto v = futures[0].awaitValue();
    ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
    EXPECT_EQ(0, std::memcmp(v->rawData(), sync[0].rawData(), sync[0].byteSize()));
  }
  // A first call for a new signature compiles off the caller's thread.
  auto first = m->callAsync("main", {test::randomTensor({9, 64}, 4)});
  auto v = first[0].awaitValue();
  ASSERT_TRUE(bool(v));
  EXPECT_EQ(v->type().str(), "9x10xf32");
}

TEST(Models, AsyncErrorsArriveAsValues) {
  auto m = loadBuiltin("mlp");
  ASSERT_TRUE(m);
  auto bad = m->callAsync("main", {test::randomTensor({2, 63}, 1)});
  ASSERT_EQ(bad.size(), 1u);
  ASSERT_TRUE(bad[0]->isError());
  EXPECT_NE(bad[0]->error().message.find("expected tensor<?x64xf32>, got tensor<2x63xf32>"),
            std::string::npos);
  EXPECT_EQ(bad[0]->error().code, ErrorCode::kInvalidArgument);
  auto missing = m->callAsync("nope", {});
  ASSERT_EQ(missing.size(), 1u);
  missing[0]->await();
  ASSERT_TRUE(missing[0]->isError());
  EXPECT_NE(missing[0]->error().message.find("no public function @nope"), std::string::npos);
  EXPECT_EQ(missing[0]->error().code, ErrorCode::kInvalidArgument);
}

TEST(Models, ModuleMayDieWhileAsyncCallsAreInFlight) {
  std::vector<AsyncValueRef<Tensor>> futures;
  {
    auto m = loadBuiltin("cnn");
    ASSERT_TRUE(m);
    for (int i = 0; i < 4; ++i) {
      auto f = m->callAsync("main", {test::randomTensor({1, 16, 16, 3}, unsigned(i))});
      futures.push_back(f[0]);
    }
  }  // the module is destroyed here; executions keep their code and weights
  for (auto &f : futures) {
    auto v = f.awaitValue();
    ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
    EXPECT_EQ(v->type().str(), "1x10xf32");
  }
}

TEST(Models, CancelledCallsReturnErrors) {
  auto m = loadBuiltin("mlp");
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({2, 64}, 1);
  ASSERT_TRUE(bool(m->call("main", {x})));  // compiled
  auto token = std::make_shared<CancellationToken>();
  token->cancel();
  auto out = m->callAsync("main", {x}, token);
  ASSERT_EQ(out.size(), 1u);
  auto v = out[0].awaitValue();
  ASSERT_FALSE(bool(v));
  EXPECT_NE(llvm::toString(v.takeError()).find("cancelled before step 'jit:@main.cluster0'"), std::string::npos);
  // A first call (compiling on the blocking pool) honours the token too.
  auto first = m->callAsync("main", {test::randomTensor({7, 64}, 2)}, token);
  auto v2 = first[0].awaitValue();
  ASSERT_FALSE(bool(v2));
  EXPECT_NE(llvm::toString(v2.takeError()).find("cancelled"), std::string::npos);
  // Uncancelled calls still work.
  ASSERT_TRUE(bool(m->call("main", {x})));
}

// An exporter's conv: OIHW filter constant transposed to OHWI in the graph,
// plus a transposed weight read by an add. Weights are folded once at load
// (and stored HWCF for the conv strategy); every placement and code path
// must give the reference's answer.
TEST(Models, TransposedWeightsFoldedAtLoad) {
  const int64_t F = 16, C = 8, K = 3, H = 10;
  std::vector<float> oihw(F * C * K * K), bias(F), extra(F * 24);
  for (size_t i = 0; i < oihw.size(); ++i) oihw[i] = float((i * 37) % 101) / 101.0f - 0.5f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * float(i);
  for (size_t i = 0; i < extra.size(); ++i) extra[i] = float(i % 7);
  std::string w = denseText(oihw, {F, C, K, K}), b = denseText(bias, {F}), e = denseText(extra, {24, F});
  std::string text = R"(func.func @main(%x: tensor<1x10x10x8xf32>, %y: tensor<16x24xf32>) -> (tensor<1x10x10x16xf32>, tensor<16x24xf32>) {
  %w = "tosa.const"() <{values = )" + w + R"( : tensor<16x8x3x3xf32>}> : () -> tensor<16x8x3x3xf32>
  %ohwi = tosa.transpose %w {perms = array<i32: 0, 2, 3, 1>} : (tensor<16x8x3x3xf32>) -> tensor<16x3x3x8xf32>
  %b = "tosa.const"() <{values = )" + b + R"( : tensor<16xf32>}> : () -> tensor<16xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %ohwi, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x10x10x8xf32>, tensor<16x3x3x8xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x10x10x16xf32>
  %e = "tosa.const"() <{values = )" + e + R"( : tensor<24x16xf32>}> : () -> tensor<24x16xf32>
  %et = tosa.transpose %e {perms = array<i32: 1, 0>} : (tensor<24x16xf32>) -> tensor<16x24xf32>
  %s = tosa.add %et, %y : (tensor<16x24xf32>, tensor<16x24xf32>) -> tensor<16x24xf32>
  return %c, %s : tensor<1x10x10x16xf32>, tensor<16x24xf32>
}
)";
  // Reference: OHWI filter from OIHW, conv; transposed extra + y.
  std::vector<float> ohwi(oihw.size());
  for (int64_t f = 0; f < F; ++f)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh = 0; kh < K; ++kh)
        for (int64_t kw = 0; kw < K; ++kw) ohwi[((f * K + kh) * K + kw) * C + c] = oihw[((f * C + c) * K + kh) * K + kw];
  Tensor x = test::randomTensor({1, H, H, C}, 21), y = test::randomTensor({F, 24}, 22);
  const int64_t pad[4] = {1, 1, 1, 1}, st[2] = {1, 1}, dl[2] = {1, 1};
  ref::Dims shape;
  ref::Vec want = ref::conv2d(x.toVector<float>(), {1, H, H, C}, ref::Vec(ohwi.begin(), ohwi.end()), {F, K, K, C},
                              ref::Vec(bias.begin(), bias.end()), pad, st, dl, shape);
  std::vector<double> wantSum(F * 24);
  std::vector<float> yv = y.toVector<float>();
  for (int64_t i = 0; i < F; ++i)
    for (int64_t j = 0; j < 24; ++j) wantSum[i * 24 + j] = extra[j * F + i] + yv[i * 24 + j];

  for (const char *modes : {"*=jit", "*=kernel", "tosa.conv2d=kernel,*=jit"})
    for (bool vectorize : {true, false}) {
      SCOPED_TRACE(std::string(modes) + (vectorize ? " vectorized" : " loops"));
      RuntimeOptions o;
      o.cacheMode = CacheMode::kOff;
      o.vectorize = vectorize;
      o.placement = llvm::cantFail(ops::parseOpModes(modes));
      auto rt = KILN_TAKE(Runtime::create(o));
      auto m = KILN_TAKE(rt->loadModule(text, "oihw.mlir"));
      ASSERT_TRUE(m);
      auto out = KILN_TAKE(m->call("main", {x, y}));
      ASSERT_EQ(out.size(), 2u);
      EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(want), 1e-4, 1e-4));
      EXPECT_TRUE(test::allClose(test::asDoubles(out[1]), wantSum, 1e-6, 1e-6));
    }
}

// An exported batch norm after a conv and after a depthwise conv
// (NCHW-style per-channel constants, rsqrt(var + eps), sub/mul/mul/add):
// folded into the filters and biases at load, the graph must still give the
// unfolded reference's answer under every placement, and the rewrite must
// show in the module's report.
TEST(Models, BatchNormFoldedIntoConvolutions) {
  const int64_t C = 8, F = 16, H = 9;
  std::vector<float> w = values(F * 3 * 3 * C, 1, -0.5f, 0.5f), dw = values(3 * 3 * F, 2, -0.5f, 0.5f);
  std::vector<float> bn[2][4];  // mean, var, gamma, beta per norm
  for (int n = 0; n < 2; ++n) {
    bn[n][0] = values(F, 3 + n, -1.0f, 1.0f);
    bn[n][1] = values(F, 5 + n, 0.1f, 2.0f);
    bn[n][2] = values(F, 7 + n, 0.5f, 1.5f);
    bn[n][3] = values(F, 9 + n, -0.5f, 0.5f);
  }
  std::string text = R"(func.func @main(%x: tensor<1x9x9x8xf32>) -> tensor<1x9x9x16xf32> {
  %w = "tosa.const"() <{values = )" + denseText(w, {F, 3, 3, C}) + R"( : tensor<16x3x3x8xf32>}> : () -> tensor<16x3x3x8xf32>
  %dw = "tosa.const"() <{values = )" + denseText(dw, {3, 3, F, 1}) + R"( : tensor<3x3x16x1xf32>}> : () -> tensor<3x3x16x1xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<16xf32>}> : () -> tensor<16xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shape = tosa.const_shape {values = dense<[1, 1, 1, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
)";
  for (int n = 0; n < 2; ++n) {
    std::string k = std::to_string(n);
    text += "  %mean" + k + " = \"tosa.const\"() <{values = " + denseText(bn[n][0], {1, F, 1, 1}) +
            " : tensor<1x16x1x1xf32>}> : () -> tensor<1x16x1x1xf32>\n";
    text += "  %var" + k + " = \"tosa.const\"() <{values = " + denseText(bn[n][1], {F}) +
            " : tensor<16xf32>}> : () -> tensor<16xf32>\n";
    text += "  %gamma" + k + " = \"tosa.const\"() <{values = " + denseText(bn[n][2], {1, 1, 1, F}) +
            " : tensor<1x1x1x16xf32>}> : () -> tensor<1x1x1x16xf32>\n";
    text += "  %beta" + k + " = \"tosa.const\"() <{values = " + denseText(bn[n][3], {1, 1, 1, F}) +
            " : tensor<1x1x1x16xf32>}> : () -> tensor<1x1x1x16xf32>\n";
  }
  auto batchNorm = [](const std::string &in, const std::string &k) {
    return "  %ve" + k + " = tosa.add %var" + k + ", %eps : (tensor<16xf32>, tensor<1xf32>) -> tensor<16xf32>\n" +
           "  %r" + k + " = tosa.rsqrt %ve" + k + " : (tensor<16xf32>) -> tensor<16xf32>\n" +
           "  %r4" + k + " = tosa.reshape %r" + k + ", %shape : (tensor<16xf32>, !tosa.shape<4>) -> tensor<1x1x1x16xf32>\n" +
           "  %mt" + k + " = tosa.transpose %mean" + k +
           " {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x16x1x1xf32>) -> tensor<1x1x1x16xf32>\n" +
           "  %d" + k + " = tosa.sub " + in + ", %mt" + k +
           " : (tensor<1x9x9x16xf32>, tensor<1x1x1x16xf32>) -> tensor<1x9x9x16xf32>\n" +
           "  %m" + k + " = tosa.mul %d" + k + ", %r4" + k +
           ", %s : (tensor<1x9x9x16xf32>, tensor<1x1x1x16xf32>, tensor<1xi8>) -> tensor<1x9x9x16xf32>\n" +
           "  %g" + k + " = tosa.mul %m" + k + ", %gamma" + k +
           ", %s : (tensor<1x9x9x16xf32>, tensor<1x1x1x16xf32>, tensor<1xi8>) -> tensor<1x9x9x16xf32>\n" +
           "  %bn" + k + " = tosa.add %g" + k + ", %beta" + k +
           " : (tensor<1x9x9x16xf32>, tensor<1x1x1x16xf32>) -> tensor<1x9x9x16xf32>\n";
  };
  text += R"(  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x9x9x8xf32>, tensor<16x3x3x8xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x9x9x16xf32>
)" + batchNorm("%c", "0") +
          R"(  %relu = tosa.clamp %bn0 {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32>
  %dc = tosa.depthwise_conv2d %relu, %dw, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x9x9x16xf32>, tensor<3x3x16x1xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x9x9x16xf32>
)" + batchNorm("%dc", "1") + "  return %bn1 : tensor<1x9x9x16xf32>\n}\n";

  // Reference: the graph as written, batch norm unfolded.
  Tensor x = test::randomTensor({1, H, H, C}, 31);
  const int64_t pad[4] = {1, 1, 1, 1}, st[2] = {1, 1}, dl[2] = {1, 1};
  auto norm = [&](ref::Vec y, int n) {
    for (size_t i = 0; i < y.size(); ++i) {
      size_t f = i % F;
      y[i] = (y[i] - bn[n][0][f]) * (1.0f / std::sqrt(bn[n][1][f] + 1e-5f)) * bn[n][2][f] + bn[n][3][f];
    }
    return y;
  };
  ref::Dims shape;
  ref::Vec y = norm(ref::conv2d(x.toVector<float>(), {1, H, H, C}, ref::Vec(w.begin(), w.end()), {F, 3, 3, C},
                                ref::Vec(F, 0.0f), pad, st, dl, shape), 0);
  for (float &v : y) v = std::max(v, 0.0f);
  ref::Vec want = norm(ref::depthwiseConv2d(y, {1, H, H, F}, ref::Vec(dw.begin(), dw.end()), {3, 3, F, 1},
                                            ref::Vec(F, 0.0f), pad, st, dl, shape), 1);

  for (const char *modes : {"*=jit", "*=kernel"}) {
    SCOPED_TRACE(modes);
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.placement = llvm::cantFail(ops::parseOpModes(modes));
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadModule(text, "bn.mlir"));
    ASSERT_TRUE(m);
    EXPECT_NE(m->graphRewrites().find("tosa.rsqrt 2 -> 0"), std::string::npos) << m->graphRewrites();
    EXPECT_NE(m->graphRewrites().find("tosa.sub 2 -> 0"), std::string::npos) << m->graphRewrites();
    EXPECT_NE(m->graphRewrites().find("tosa.mul 4 -> 0"), std::string::npos) << m->graphRewrites();
    auto out = KILN_TAKE(m->call("main", {x}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(want), 1e-4, 1e-4));
  }
}

// Batch norm folds into a filter where it is stored (a model's resource
// that one constant reads) and into a copy where others read the same
// resource: two constants in one function, or another function. Each
// conv's output is its own weights' times its own scale.
TEST(Models, BatchNormFoldsIntoSharedResourcesByCopy) {
  const int64_t C = 16, F = 4, H = 3;  // 4x1x1x16 filters: 256 bytes, lifted and decoded at load
  std::vector<float> w[3] = {values(F * C, 41, -1.0f, 1.0f), values(F * C, 42, -1.0f, 1.0f),
                             values(F * C, 43, -1.0f, 1.0f)};
  std::vector<float> scale[4] = {values(F, 44, 0.5f, 2.0f), values(F, 45, 0.5f, 2.0f), values(F, 46, 0.5f, 2.0f),
                                 values(F, 47, 0.5f, 2.0f)};
  auto hex = [](const std::vector<float> &v) {
    std::string h = "0x04000000";  // alignment 4, then the floats' bytes
    for (float f : v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      for (int b = 0; b < 4; ++b) h += llvm::formatv("{0:X-2}", (bits >> (8 * b)) & 0xff).str();
    }
    return h;
  };
  const std::string in = "tensor<1x3x3x16xf32>", out = "tensor<1x3x3x4xf32>", wt = "tensor<4x1x1x16xf32>";
  auto conv = [&](const std::string &name, const std::string &w, int s) {
    return "  %" + name + "w = \"tosa.const\"() <{values = dense_resource<" + w + "> : " + wt + "}> : () -> " + wt +
           "\n  %" + name + "s = \"tosa.const\"() <{values = " + denseText(scale[s], {1, 1, 1, F}) +
           " : tensor<1x1x1x4xf32>}> : () -> tensor<1x1x1x4xf32>\n" + "  %" + name + "c = tosa.conv2d %x, %" + name +
           "w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = "
           "array<i64: 1, 1>} : (" + in + ", " + wt + ", tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> " + out +
           "\n  %" + name + " = tosa.mul %" + name + "c, %" + name + "s, %sh : (" + out +
           ", tensor<1x1x1x4xf32>, tensor<1xi8>) -> " + out + "\n";
  };
  const std::string common = R"(  %b = "tosa.const"() <{values = dense<0.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
)";
  // main: `shared` read by two constants, `cross` also read by @other,
  // `solo` by one constant only (folded in place).
  std::string text = "func.func @main(%x: " + in + ") -> (" + out + ", " + out + ", " + out + ", " + out + ") {\n" +
                     common + conv("y0", "shared", 0) + conv("y1", "shared", 1) + conv("y2", "cross", 2) +
                     conv("y3", "solo", 3) + "  return %y0, %y1, %y2, %y3 : " + out + ", " + out + ", " + out + ", " + out +
                     "\n}\nfunc.func @other(%x: " + in + ") -> " + out + " {\n" + common + conv("y4", "cross", 0) +
                     "  return %y4 : " + out + "\n}\n{-#\n  dialect_resources: {\n    builtin: {\n      shared: \"" +
                     hex(w[0]) + "\",\n      cross: \"" + hex(w[1]) + "\",\n      solo: \"" + hex(w[2]) +
                     "\"\n    }\n  }\n#-}\n";
  Tensor x = test::randomTensor({1, H, H, C}, 48);
  std::vector<float> xv = x.toVector<float>();
  auto want = [&](const std::vector<float> &wf, const std::vector<float> &s) {
    std::vector<double> y;
    for (int64_t p = 0; p < H * H; ++p)
      for (int64_t f = 0; f < F; ++f) {
        double acc = 0;
        for (int64_t c = 0; c < C; ++c) acc += double(xv[size_t(p * C + c)]) * wf[size_t(f * C + c)];
        y.push_back(acc * s[size_t(f)]);
      }
    return y;
  };
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  auto rt = KILN_TAKE(Runtime::create(o));
  auto m = KILN_TAKE(rt->loadModule(text, "shared.mlir"));
  ASSERT_TRUE(m);
  EXPECT_NE(m->graphRewrites().find("tosa.mul 5 -> 0"), std::string::npos) << m->graphRewrites();
  auto outs = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_TRUE(test::allClose(test::asDoubles(outs[0]), want(w[0], scale[0]), 1e-5, 1e-5));
  EXPECT_TRUE(test::allClose(test::asDoubles(outs[1]), want(w[0], scale[1]), 1e-5, 1e-5));
  EXPECT_TRUE(test::allClose(test::asDoubles(outs[2]), want(w[1], scale[2]), 1e-5, 1e-5));
  EXPECT_TRUE(test::allClose(test::asDoubles(outs[3]), want(w[2], scale[3]), 1e-5, 1e-5));
  auto other = KILN_TAKE(m->call("other", {x}));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(other[0]), want(w[1], scale[0]), 1e-5, 1e-5));
}

// A network's repeated blocks (same shapes, other weights) are identical JIT
// kernels: compiled once and shared; distinct kernels compile in parallel.
// Every thread count and placement gives the reference's answer.
TEST(Models, IdenticalKernelsCompileOnceAndDistinctOnesInParallel) {
  const int64_t C = 8, H = 10, K = 3;
  std::vector<std::vector<float>> w(4);
  for (size_t n = 0; n < w.size(); ++n) {
    w[n].resize(size_t(C * K * K * C));
    for (size_t i = 0; i < w[n].size(); ++i) w[n][i] = float(int((i * 31 + n * 17) % 23) - 11) / 40.0f;
  }
  std::string text = "func.func @main(%x: tensor<1x10x10x8xf32>) -> tensor<1x5x5x8xf32> {\n"
                     "  %b = \"tosa.const\"() <{values = dense<0.0> : tensor<8xf32>}> : () -> tensor<8xf32>\n"
                     "  %z = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n";
  std::string in = "%x";
  for (size_t n = 0; n < w.size(); ++n) {
    std::string k = std::to_string(n);
    text += "  %w" + k + " = \"tosa.const\"() <{values = " + denseText(w[n], {C, K, K, C}) +
            " : tensor<8x3x3x8xf32>}> : () -> tensor<8x3x3x8xf32>\n";
    text += "  %c" + k + " = tosa.conv2d " + in + ", %w" + k + ", %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, "
            "stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x10x10x8xf32>, tensor<8x3x3x8xf32>, "
            "tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x10x10x8xf32>\n";
    text += "  %r" + k + " = tosa.clamp %c" + k + " {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : "
            "(tensor<1x10x10x8xf32>) -> tensor<1x10x10x8xf32>\n";
    in = "%r" + k;
  }
  text += "  %p = tosa.max_pool2d " + in + " {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, "
          "stride = array<i64: 2, 2>} : (tensor<1x10x10x8xf32>) -> tensor<1x5x5x8xf32>\n"
          "  return %p : tensor<1x5x5x8xf32>\n}\n";
  Tensor x = test::randomTensor({1, H, H, C}, 41);
  const int64_t pad[4] = {1, 1, 1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, pk[2] = {2, 2}, ppad[4] = {0, 0, 0, 0};
  ref::Dims shape;
  ref::Vec y = x.toVector<float>();
  for (size_t n = 0; n < w.size(); ++n) {
    y = ref::conv2d(y, {1, H, H, C}, ref::Vec(w[n].begin(), w[n].end()), {C, K, K, C}, ref::Vec(C, 0.0f), pad, st,
                    dl, shape);
    for (float &v : y) v = std::max(v, 0.0f);
  }
  ref::Vec want = ref::pool2d(y, {1, H, H, C}, pk, pk, ppad, /*max=*/true, shape);

  for (int threads : {1, 2})
    for (const char *modes : {"*=jit", "tosa.max_pool2d=kernel"}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + modes);
      RuntimeOptions o;
      o.cacheMode = CacheMode::kOff;
      o.compileThreads = threads;
      o.placement = llvm::cantFail(ops::parseOpModes(modes));
      o.placement.measure = false;  // the kernel counts below are for fixed placements
      auto rt = KILN_TAKE(Runtime::create(o));
      auto m = KILN_TAKE(rt->loadModule(text, "blocks.mlir"));
      ASSERT_TRUE(m);
      auto out = KILN_TAKE(m->call("main", {x}));
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), test::asDoubles(want), 1e-4, 1e-4));
      auto fn = KILN_TAKE(m->compile("main", {x.type()}));
      bool poolJit = std::string(modes) == "*=jit";
      // Each conv + ReLU also pads its result for the next conv
      // (kiln-split-conv-padding): the first pads the graph's input too, the
      // last pads nothing (the pool has no padding), the two in between
      // share one kernel's code; then the pool.
      EXPECT_EQ(fn->stats.kernelsCompiled, poolJit ? 4 : 3);
      EXPECT_EQ(fn->stats.kernelsShared, 1);
      EXPECT_EQ(fn->objects.size(), size_t(fn->stats.kernelsCompiled));
      EXPECT_EQ(fn->stats.compileThreads, threads);  // at least 3 distinct kernels
    }
}

// linalg-on-tensors as torch-mlir writes it: one linalg.fill is the `outs`
// of several matmuls. Each matmul is its own JIT kernel; a kernel must copy
// an input before writing into it (the fill's buffer is read by the others),
// whatever the order the steps run in.
TEST(Models, LinalgMatmulsSharingOneFillStayIndependent) {
  const char *text = R"mlir(
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x4xf32>, %d: tensor<8x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%a, %c : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = linalg.matmul ins(%a, %d : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m1, %m2, %m3 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
)mlir";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(text, "shared_fill.mlir"));
  ASSERT_TRUE(m);
  Tensor a = test::randomTensor({4, 8}, 1);
  std::vector<Tensor> rhs = {test::randomTensor({8, 4}, 2), test::randomTensor({8, 4}, 3), test::randomTensor({8, 4}, 4)};
  for (int call = 0; call < 5; ++call) {
    auto out = KILN_TAKE(m->call("main", {a, rhs[0], rhs[1], rhs[2]}));
    ASSERT_EQ(out.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      ref::Vec want = ref::matmul(a.toVector<float>(), rhs[i].toVector<float>(), 1, 4, 8, 4);
      EXPECT_TRUE(test::allClose(test::asDoubles(out[i]), test::asDoubles(want), 1e-5, 1e-6)) << "result " << i;
    }
  }
  auto fn = KILN_TAKE(m->compile("main", {a.type(), rhs[0].type(), rhs[1].type(), rhs[2].type()}));
  EXPECT_EQ(fn->plan.steps.size(), 3u);  // one kernel per matmul
}

// The built-in ResNet-50 (the README's main job): generated code, the
// handwritten kernels and a mix agree on the logits.
TEST(Models, BuiltinResnet50AgreesOnJitKernelsAndMixed) {
  const auto *model = models::findBuiltinModel("resnet50");
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->mlir.empty());  // built in memory only
  Tensor x = test::randomTensor({1, 224, 224, 3}, 7);
  std::vector<std::vector<double>> outs;
  for (const char *modes : {"*=jit", "*=kernel", "tosa.conv2d=kernel,tosa.max_pool2d=kernel,*=jit"}) {
    SCOPED_TRACE(modes);
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.placement = llvm::cantFail(ops::parseOpModes(modes));
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadProgram(KILN_TAKE(model->build())));
    ASSERT_TRUE(m);
    auto out = KILN_TAKE(m->call("main", {x}));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].type().str(), "1x1000xf32");
    outs.push_back(test::asDoubles(out[0]));
    double norm = 0;
    for (double v : outs.back()) norm += v * v;
    EXPECT_GT(norm, 1.0);  // not all zeros
    EXPECT_LT(norm, 1e12);  // nor blown up
  }
  EXPECT_TRUE(test::allClose(outs[1], outs[0], 1e-3, 1e-3));
  EXPECT_TRUE(test::allClose(outs[2], outs[0], 1e-3, 1e-3));
}

// Issue 31 (16): a wide graph of independent elementwise ops that differ
// only in a small constant compiles one kernel, not one per op: the
// constants become the clusters' arguments (plan constants), and every
// output is still its own op's.
TEST(Models, ClustersDifferingOnlyInConstantsShareOneKernel) {
  const int n = 300;
  std::string text = "func.func @main(%a: tensor<4x8xf32>) -> (";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "tensor<4x8xf32>";
  text += ") {\n";
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i);
    text += "  %c" + k + " = \"tosa.const\"() <{values = dense<" + k + ".5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>\n";
    // Every third op multiplies instead: two kinds of kernel.
    text += "  %r" + k + " = " + (i % 3 ? "tosa.add %a, %c" + k : "tosa.mul %a, %c" + k + ", %shift") +
            " : (tensor<4x8xf32>, tensor<1x1xf32>" + (i % 3 ? "" : ", tensor<1xi8>") + ") -> tensor<4x8xf32>\n";
    if (i == 0)
      text = text.substr(0, text.rfind("  %r0")) +
             "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n" +
             text.substr(text.rfind("  %r0"));
  }
  text += "  return ";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "%r" + std::to_string(i);
  text += " : ";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "tensor<4x8xf32>";
  text += "\n}\n";
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.placement.measure = false;
  auto rt = KILN_TAKE(Runtime::create(o));
  auto m = KILN_TAKE(rt->loadModule(text, "wide.mlir"));
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({4, 8}, 5);
  auto out = KILN_TAKE(m->call("main", {x}));
  ASSERT_EQ(out.size(), size_t(n));
  for (int i = 0; i < n; ++i)
    for (int e = 0; e < 32; ++e) {
      float c = float(i) + 0.5f, v = x.data<float>()[e];
      ASSERT_FLOAT_EQ(out[size_t(i)].data<float>()[e], i % 3 ? v + c : v * c) << "output " << i;
    }
  auto fn = KILN_TAKE(m->compile("main", {x.type()}));
  EXPECT_EQ(fn->stats.kernelsCompiled, 2);  // one add kernel, one mul kernel
  EXPECT_EQ(fn->stats.kernelsShared, n - 2);
}

// Issue 31 (16): a deadline stops a compile that runs past it (between
// kernels), with a "cancelled" error; nothing is cached, and a call without
// the deadline compiles and runs.
TEST(Models, ADeadlineStopsACompile) {
  // 60 distinct kernels (each input its own shape): seconds of compile.
  const int n = 60;
  std::string text = "func.func @main(";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "%a" + std::to_string(i) + ": tensor<" + std::to_string(i + 1) + "x8xf32>";
  text += ") -> (";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "tensor<" + std::to_string(i + 1) + "x8xf32>";
  text += ") {\n";
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i), t = "tensor<" + std::to_string(i + 1) + "x8xf32>";
    text += "  %r" + k + " = tosa.exp %a" + k + " : (" + t + ") -> " + t + "\n";
  }
  text += "  return ";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "%r" + std::to_string(i);
  text += " : ";
  for (int i = 0; i < n; ++i) text += std::string(i ? ", " : "") + "tensor<" + std::to_string(i + 1) + "x8xf32>";
  text += "\n}\n";
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.placement.measure = false;
  o.compileThreads = 1;
  auto rt = KILN_TAKE(Runtime::create(o));
  auto m = KILN_TAKE(rt->loadModule(text, "distinct.mlir"));
  ASSERT_TRUE(m);
  std::vector<Tensor> inputs;
  for (int i = 0; i < n; ++i) inputs.push_back(test::randomTensor({i + 1, 8}, unsigned(i)));
  auto token = std::make_shared<CancellationToken>();
  token->setTimeout(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  auto futures = m->callAsync("main", inputs, token);
  auto first = futures[0].awaitValue();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(bool(first));
  Status s = toStatus(first.takeError());
  EXPECT_EQ(s.code, ErrorCode::kCancelled) << s.message;
  EXPECT_NE(s.message.find("compile stopped (deadline exceeded) with"), std::string::npos) << s.message;
  EXPECT_LT(seconds, 2.0);  // one kernel's compile past the deadline at most, not all 60
  EXPECT_EQ(m->numCompiled(), 0u);
  auto out = KILN_TAKE(m->call("main", inputs));
  ASSERT_EQ(out.size(), size_t(n));
  EXPECT_FLOAT_EQ(out[3].data<float>()[5], std::exp(inputs[3].data<float>()[5]));
}

// linalg input (what torch-mlir's linalg-on-tensors export writes: NCHW
// named convs and pools, batch norm and relu6 as generics, a keepdims sum,
// a linear layer, softmax with its unread argmax) is raised to TOSA at load
// (kiln-raise-linalg) and computes what the linalg itself computes: the
// same module run as written (KILN_RAISE_LINALG=0) is the reference, on JIT
// code and on handwritten kernels.
TEST(Models, LinalgInputRaisedToTosaComputesWhatTheLinalgDoes) {
  std::string text = R"(#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#keep = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
#v = affine_map<(d0) -> (d0)>
#mk = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<1x3x32x32xf32>) -> tensor<1x5xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %n16 = arith.constant 6.4e+01 : f32
  %eps = arith.constant 1.0e-5 : f64
  %c0 = arith.constant 0 : i64
  %w = arith.constant )" + denseText(values(8 * 3 * 3 * 3, 1, -0.5f, 0.5f), {8, 3, 3, 3}) + R"( : tensor<8x3x3x3xf32>
  %b = arith.constant )" + denseText(values(8, 2, -0.2f, 0.2f), {8}) + R"( : tensor<8xf32>
  %var = arith.constant )" + denseText(values(8, 3, 0.1f, 2.0f), {8}) + R"( : tensor<8xf32>
  %mean = arith.constant )" + denseText(values(8, 4, -1.0f, 1.0f), {8}) + R"( : tensor<8xf32>
  %dw = arith.constant )" + denseText(values(8 * 3 * 3, 5, -0.5f, 0.5f), {8, 3, 3}) + R"( : tensor<8x3x3xf32>
  %lw = arith.constant )" + denseText(values(5 * 8, 6, -0.5f, 0.5f), {5, 8}) + R"( : tensor<5x8xf32>
  %lb = arith.constant )" + denseText(values(5, 7, -0.2f, 0.2f), {5}) + R"( : tensor<5xf32>
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x3x32x32xf32> to tensor<1x3x34x34xf32>
  %e = tensor.empty() : tensor<1x8x32x32xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<1x8x32x32xf32>) dimensions = [0, 2, 3]
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%p, %w : tensor<1x3x34x34xf32>, tensor<8x3x3x3xf32>) outs(%bb : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]} ins(%var : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %eps : f64 to f32
    %a = arith.addf %in, %t : f32
    %s = math.rsqrt %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %r3 = tensor.expand_shape %r [[0, 1, 2]] output_shape [8, 1, 1] : tensor<8xf32> into tensor<8x1x1xf32>
  %m3 = tensor.expand_shape %mean [[0, 1, 2]] output_shape [8, 1, 1] : tensor<8xf32> into tensor<8x1x1xf32>
  %y = linalg.generic {indexing_maps = [#id4, #ch, #ch, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%c, %m3, %r3 : tensor<1x8x32x32xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>) outs(%e : tensor<1x8x32x32xf32>) {
  ^bb0(%in: f32, %m: f32, %s: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %n = arith.mulf %d, %s : f32
    %lt = arith.cmpf ult, %n, %zero : f32
    %lo = arith.select %lt, %zero, %n : f32
    %gt = arith.cmpf ugt, %lo, %six : f32
    %hi = arith.select %gt, %six, %lo : f32
    linalg.yield %hi : f32
  } -> tensor<1x8x32x32xf32>
  %pp = tensor.pad %y low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x8x32x32xf32> to tensor<1x8x34x34xf32>
  %em = tensor.empty() : tensor<1x8x16x16xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  %win = tensor.empty() : tensor<3x3xf32>
  %mp = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
          ins(%pp, %win : tensor<1x8x34x34xf32>, tensor<3x3xf32>) outs(%fm : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  %pd = tensor.pad %mp low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x16x16xf32> to tensor<1x8x18x18xf32>
  %ed = tensor.empty() : tensor<1x8x8x8xf32>
  %fd = linalg.fill ins(%zero : f32) outs(%ed : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %dc = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
          ins(%pd, %dw : tensor<1x8x18x18xf32>, tensor<8x3x3xf32>) outs(%fd : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %eg = tensor.empty() : tensor<1x8x1x1xf32>
  %fg = linalg.fill ins(%zero : f32) outs(%eg : tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #keep], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
           ins(%dc : tensor<1x8x8x8xf32>) outs(%fg : tensor<1x8x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<1x8x1x1xf32>
  %avg = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
           ins(%sum : tensor<1x8x1x1xf32>) outs(%eg : tensor<1x8x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %q = arith.divf %in, %n16 : f32
    linalg.yield %q : f32
  } -> tensor<1x8x1x1xf32>
  %flat = tensor.collapse_shape %avg [[0], [1, 2, 3]] : tensor<1x8x1x1xf32> into tensor<1x8xf32>
  %et = tensor.empty() : tensor<8x5xf32>
  %wt = linalg.transpose ins(%lw : tensor<5x8xf32>) outs(%et : tensor<8x5xf32>) permutation = [1, 0]
  %el = tensor.empty() : tensor<1x5xf32>
  %fl = linalg.fill ins(%zero : f32) outs(%el : tensor<1x5xf32>) -> tensor<1x5xf32>
  %mm = linalg.matmul ins(%flat, %wt : tensor<1x8xf32>, tensor<8x5xf32>) outs(%fl : tensor<1x5xf32>) -> tensor<1x5xf32>
  %lin = linalg.generic {indexing_maps = [#mk, #col, #mk], iterator_types = ["parallel", "parallel"]}
           ins(%mm, %lb : tensor<1x5xf32>, tensor<5xf32>) outs(%el : tensor<1x5xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<1x5xf32>
  %es = tensor.empty() : tensor<1xf32>
  %fs = linalg.fill ins(%ninf : f32) outs(%es : tensor<1xf32>) -> tensor<1xf32>
  %ei = tensor.empty() : tensor<1xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<1xi64>) -> tensor<1xi64>
  %mx:2 = linalg.generic {indexing_maps = [#mk, #row, #row], iterator_types = ["parallel", "reduction"]}
            ins(%lin : tensor<1x5xf32>) outs(%fs, %fi : tensor<1xf32>, tensor<1xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ii, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<1xf32>, tensor<1xi64>)
  %ex = linalg.generic {indexing_maps = [#mk, #row, #mk], iterator_types = ["parallel", "parallel"]}
          ins(%lin, %mx#0 : tensor<1x5xf32>, tensor<1xf32>) outs(%el : tensor<1x5xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %d = arith.subf %in, %m : f32
    %x2 = math.exp %d : f32
    linalg.yield %x2 : f32
  } -> tensor<1x5xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%es : tensor<1xf32>) -> tensor<1xf32>
  %den = linalg.generic {indexing_maps = [#mk, #row], iterator_types = ["parallel", "reduction"]}
           ins(%ex : tensor<1x5xf32>) outs(%fz : tensor<1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<1xf32>
  %sm = linalg.generic {indexing_maps = [#mk, #row, #mk], iterator_types = ["parallel", "parallel"]}
          ins(%ex, %den : tensor<1x5xf32>, tensor<1xf32>) outs(%el : tensor<1x5xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %q = arith.divf %in, %s : f32
    linalg.yield %q : f32
  } -> tensor<1x5xf32>
  return %sm : tensor<1x5xf32>
}
)";
  Tensor x = test::randomTensor({1, 3, 32, 32}, 41);
  auto run = [&](const char *modes, bool raise) {
    if (!raise) ::setenv("KILN_RAISE_LINALG", "0", 1);
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.placement = llvm::cantFail(ops::parseOpModes(modes));
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadModule(text, "linalg.mlir"));
    ::unsetenv("KILN_RAISE_LINALG");
    EXPECT_TRUE(m);
    if (!m) return Tensor();
    const std::string &rewrites = m->graphRewrites();
    if (raise) {
      // Every linalg op raised; the batch norm folded into the conv.
      for (const char *gone : {"linalg.conv_2d_nchw_fchw 1 -> 0", "linalg.depthwise_conv_2d_nchw_chw 1 -> 0",
                               "linalg.pooling_nchw_max 1 -> 0", "linalg.matmul 1 -> 0", "linalg.generic 9 -> 0"})
        EXPECT_NE(rewrites.find(gone), std::string::npos) << gone << " in: " << rewrites;
      // (the softmax's x - max stays)
      EXPECT_NE(rewrites.find("tosa.sub 0 -> 1,"), std::string::npos) << rewrites;
    }
    auto out = KILN_TAKE(m->call("main", {x}));
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Tensor() : out[0];
  };
  Tensor want = run("*=jit", false);
  ASSERT_EQ(want.numElements(), 5);
  for (const char *modes : {"*=jit", "*=kernel"}) {
    SCOPED_TRACE(modes);
    Tensor got = run(modes, true);
    EXPECT_TRUE(test::allClose(test::asDoubles(got), test::asDoubles(want), 1e-5, 1e-4));
  }
}

// A grouped conv (RegNet's, ResNeXt's: no TOSA form) raised to kiln's
// grouped conv op computes what the NCHW grouped conv computes (unraised):
// on JIT code (linalg.conv_2d_nhwgc_gfhwc, which kiln-cpu-strategy runs as
// a loop of per-group FHWC convs) and on its handwritten kernel (a kernel
// plan, as a tiered first call runs it: no JIT code at all).
TEST(Models, GroupedConvRaisedComputesWhatTheLinalgDoes) {
  // 3 groups of 8 channels in, 8 out; stride 2 with an uneven edge.
  std::string text = R"(func.func @main(%x: tensor<1x24x15x15xf32>) -> tensor<1x24x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant )" + denseText(values(24 * 8 * 3 * 3, 3, -0.5f, 0.5f), {24, 8, 3, 3}) + R"( : tensor<24x8x3x3xf32>
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x24x15x15xf32> to tensor<1x24x17x17xf32>
  %x5 = tensor.expand_shape %p [[0], [1, 2], [3], [4]] output_shape [1, 3, 8, 17, 17] : tensor<1x24x17x17xf32> into tensor<1x3x8x17x17xf32>
  %w5 = tensor.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [3, 8, 8, 3, 3] : tensor<24x8x3x3xf32> into tensor<3x8x8x3x3xf32>
  %e = tensor.empty() : tensor<1x3x8x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x8x8x8xf32>) -> tensor<1x3x8x8x8xf32>
  %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
         ins(%x5, %w5 : tensor<1x3x8x17x17xf32>, tensor<3x8x8x3x3xf32>) outs(%f : tensor<1x3x8x8x8xf32>) -> tensor<1x3x8x8x8xf32>
  %c = tensor.collapse_shape %y [[0], [1, 2], [3], [4]] : tensor<1x3x8x8x8xf32> into tensor<1x24x8x8xf32>
  return %c : tensor<1x24x8x8xf32>
}
)";
  Tensor x = test::randomTensor({1, 24, 15, 15}, 43);
  auto run = [&](bool raise, const char *modes) {
    if (!raise) ::setenv("KILN_RAISE_LINALG", "0", 1);
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.placement = llvm::cantFail(ops::parseOpModes(modes));
    auto rt = KILN_TAKE(Runtime::create(o));
    auto m = KILN_TAKE(rt->loadModule(text, "grouped.mlir"));
    ::unsetenv("KILN_RAISE_LINALG");
    EXPECT_TRUE(m);
    if (!m) return Tensor();
    if (raise) {
      EXPECT_NE(m->graphRewrites().find("linalg.conv_2d_ngchw_gfchw 1 -> 0"), std::string::npos) << m->graphRewrites();
      EXPECT_NE(m->graphRewrites().find("tosa.custom 0 -> 1"), std::string::npos) << m->graphRewrites();
    }
    auto out = KILN_TAKE(m->call("main", {x}));
    EXPECT_EQ(out.size(), 1u);
    if (raise) {
      auto c = KILN_TAKE(m->compile("main", {x.type()}));
      if (c) {
        bool onKernel = llvm::StringRef(modes) == "*=kernel";
        EXPECT_EQ(c->placementSummary().find("tosa.custom:kiln.grouped_conv2d x1: mode=kernel") != std::string::npos,
                  onKernel)
            << c->placementSummary();
        if (onKernel) {
          EXPECT_NE(c->placementSummary().find(": 0 JIT in 0 kernels"), std::string::npos);
        }
      }
    }
    return out.empty() ? Tensor() : out[0];
  };
  Tensor want = run(false, "*=jit");
  ASSERT_EQ(want.numElements(), 24 * 8 * 8);
  for (const char *modes : {"*=jit", "*=kernel"}) {
    SCOPED_TRACE(modes);
    Tensor got = run(true, modes);
    EXPECT_TRUE(test::allClose(test::asDoubles(got), test::asDoubles(want), 1e-5, 1e-4));
  }
}

// A call's outputs reuse the memory of the last call's (runtime/HostBlocks.h):
// three 1.5 MiB outputs went back to the system on every call (glibc maps
// and unmaps such blocks, or trims them off the top of its heap), and the
// next call faulted their pages in again and zeroed them: 361 page faults a
// call here before, none after.
TEST(Models, OutputsDoNotFaultInTheirPagesOnEveryCall) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds keep malloc for tensor buffers";
#else
  const char *text = R"(
func.func @main(%a: tensor<1x512x768xf32>) -> (tensor<1x12x512x64xf32>, tensor<1x12x64x512xf32>, tensor<1x512x768xf32>) {
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x768xf32>}> : () -> tensor<1x1x768xf32>
  %s = tosa.const_shape {values = dense<[1, 512, 12, 64]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %a1 = tosa.add %a, %one : (tensor<1x512x768xf32>, tensor<1x1x768xf32>) -> tensor<1x512x768xf32>
  %h = tosa.reshape %a1, %s : (tensor<1x512x768xf32>, !tosa.shape<4>) -> tensor<1x512x12x64xf32>
  %q = tosa.transpose %h {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x512x12x64xf32>) -> tensor<1x12x512x64xf32>
  %k = tosa.transpose %h {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x512x12x64xf32>) -> tensor<1x12x64x512xf32>
  return %q, %k, %a1 : tensor<1x12x512x64xf32>, tensor<1x12x64x512xf32>, tensor<1x512x768xf32>
}
)";
  auto m = KILN_TAKE(test::sharedRuntime().loadModule(text, "three-outputs"));
  ASSERT_TRUE(m);
  Tensor x = test::randomTensor({1, 512, 768}, 7);
  auto call = [&] {
    auto out = KILN_TAKE(m->call("main", {x}));
    ASSERT_EQ(out.size(), 3u);
    // Heads split right: q[0, h, s, d] = k[0, h, d, s] = x[0, s, 64 h + d] + 1.
    const float *in = x.data<float>(), *q = out[0].data<float>(), *k = out[1].data<float>();
    for (int64_t h : {0, 5, 11})
      for (int64_t s : {0, 77, 511})
        for (int64_t d : {0, 33, 63}) {
          float want = in[s * 768 + h * 64 + d] + 1.0f;
          ASSERT_EQ(q[(h * 512 + s) * 64 + d], want);
          ASSERT_EQ(k[(h * 64 + d) * 512 + s], want);
        }
  };
  for (int i = 0; i < 5; ++i) call();  // compiled, memory in place
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const int calls = 50;
  for (int i = 0; i < calls; ++i) call();
  getrusage(RUSAGE_SELF, &after);
  long faults = after.ru_minflt - before.ru_minflt;
  // A few for anything else the process does.
  EXPECT_LT(faults, 2 * calls) << faults << " page faults in " << calls << " calls";
#endif
}

// torch's safe softmax (rows all -inf give 0, not NaN): the row check runs as
// the row maximum compared with -inf (kiln-fold-constants), so its rows of
// 197 scores are vectors, not boolean loops. A row of -inf still gives 0s,
// a row with a NaN still NaNs, and the others softmax, as the unrewritten
// graph does on handwritten kernels.
TEST(Models, SafeSoftmaxKeepsItsAllMaskedRowsAndNaNs) {
  const char *text = R"(
func.func @main(%x: tensor<1x4x197xf32>) -> tensor<1x4x197xf32> {
  %ninf = "tosa.const"() <{values = dense<0xFFF0000000000000> : tensor<1x1x1xf64>}> : () -> tensor<1x1x1xf64>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x4x197xf32>}> : () -> tensor<1x4x197xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %m = tosa.reduce_max %x {axis = 2 : i32} : (tensor<1x4x197xf32>) -> tensor<1x4x1xf32>
  %s = tosa.sub %x, %m : (tensor<1x4x197xf32>, tensor<1x4x1xf32>) -> tensor<1x4x197xf32>
  %e = tosa.exp %s : (tensor<1x4x197xf32>) -> tensor<1x4x197xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<1x4x197xf32>) -> tensor<1x4x1xf32>
  %r = tosa.reciprocal %sum : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %p = tosa.mul %e, %r, %sh : (tensor<1x4x197xf32>, tensor<1x4x1xf32>, tensor<1xi8>) -> tensor<1x4x197xf32>
  %c = tosa.cast %x : (tensor<1x4x197xf32>) -> tensor<1x4x197xf64>
  %q = tosa.equal %c, %ninf : (tensor<1x4x197xf64>, tensor<1x1x1xf64>) -> tensor<1x4x197xi1>
  %all = tosa.reduce_all %q {axis = 2 : i32} : (tensor<1x4x197xi1>) -> tensor<1x4x1xi1>
  %y = tosa.select %all, %zero, %p : (tensor<1x4x1xi1>, tensor<1x4x197xf32>, tensor<1x4x197xf32>) -> tensor<1x4x197xf32>
  return %y : tensor<1x4x197xf32>
}
)";
  Tensor x = test::randomTensor({1, 4, 197}, 9);
  float *v = x.data<float>();
  for (int i = 0; i < 197; ++i) v[i] = -INFINITY;      // row 0: all masked
  v[197 + 100] = NAN;                                   // row 1: a NaN
  for (int i = 0; i < 197; i += 2) v[2 * 197 + i] = -INFINITY;  // row 2: half masked
  auto jit = KILN_TAKE(test::sharedRuntime().loadModule(text, "safe-softmax"));
  RuntimeOptions ko;
  ko.cacheMode = CacheMode::kOff;
  ko.placement = llvm::cantFail(ops::parseOpModes("*=kernel"));
  auto krt = KILN_TAKE(Runtime::create(ko));
  auto kernels = KILN_TAKE(krt->loadModule(text, "safe-softmax-kernels"));
  ASSERT_TRUE(jit && kernels);
  auto got = KILN_TAKE(jit->call("main", {x}));
  auto want = KILN_TAKE(kernels->call("main", {x}));
  ASSERT_EQ(got.size(), 1u);
  const float *g = got[0].data<float>(), *w = want[0].data<float>();
  for (int i = 0; i < 197; ++i) ASSERT_EQ(g[i], 0.0f) << i;
  for (int i = 0; i < 197; ++i) ASSERT_TRUE(std::isnan(g[197 + i])) << i;
  double rowSum = 0;
  for (int row = 2; row < 4; ++row)
    for (int i = 0; i < 197; ++i) {
      float a = g[row * 197 + i], b = w[row * 197 + i];
      ASSERT_NEAR(a, b, 1e-6f) << row << "," << i;
      rowSum += a;
    }
  EXPECT_NEAR(rowSum, 2.0, 1e-4);
}
