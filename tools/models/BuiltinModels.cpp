#include "tools/models/BuiltinModels.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

namespace kiln::models {

std::vector<float> deterministicValues(size_t count, unsigned seed, float scale) {
  std::vector<float> v(count);
  uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t(seed) * 0xBF58476D1CE4E5B9ull);
  for (float &x : v) {  // splitmix64
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = (float((z >> 40) & 0xFFFFFF) / float(1 << 24) * 2.0f - 1.0f) * scale;
  }
  return v;
}

namespace {

std::string hexBytes(const std::vector<float> &v) {
  static const char *digits = "0123456789ABCDEF";
  std::string out;
  out.reserve(v.size() * 8);
  const auto *p = reinterpret_cast<const unsigned char *>(v.data());
  for (size_t i = 0; i < v.size() * 4; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

/// `dense<"0x...">` inline constant.
std::string denseConst(const std::string &name, const std::string &type,
                       const std::vector<float> &v) {
  return "  %" + name + " = \"tosa.const\"() <{values = dense<\"0x" + hexBytes(v) + "\"> : " +
         type + "}> : () -> " + type + "\n";
}

/// `dense_resource<key>` constant; the blob goes into `resources`.
std::string resourceConst(const std::string &name, const std::string &type,
                          const std::vector<float> &v, std::string &resources) {
  resources += "      " + name + ": \"0x04000000" + hexBytes(v) + "\",\n";
  return "  %" + name + " = \"tosa.const\"() <{values = dense_resource<" + name + "> : " + type +
         "}> : () -> " + type + "\n";
}

std::string withResources(std::string body, std::string resources) {
  if (resources.empty()) return body;
  resources.erase(resources.size() - 2);  // trailing ",\n"
  return body + "{-#\n  dialect_resources: {\n    builtin: {\n" + resources +
         "\n    }\n  }\n#-}\n";
}

const char *kSoftmax =
    // %logits : tensor<?x10xf32> -> %probs
    "  %mx = tosa.reduce_max %logits {axis = 1 : i32} : (tensor<?x10xf32>) -> tensor<?x1xf32>\n"
    "  %shifted = tosa.sub %logits, %mx : (tensor<?x10xf32>, tensor<?x1xf32>) -> tensor<?x10xf32>\n"
    "  %ex = tosa.exp %shifted : (tensor<?x10xf32>) -> tensor<?x10xf32>\n"
    "  %sum = tosa.reduce_sum %ex {axis = 1 : i32} : (tensor<?x10xf32>) -> tensor<?x1xf32>\n"
    "  %inv = tosa.reciprocal %sum : (tensor<?x1xf32>) -> tensor<?x1xf32>\n"
    "  %probs = tosa.mul %ex, %inv, %shift : (tensor<?x10xf32>, tensor<?x1xf32>, tensor<1xi8>) -> tensor<?x10xf32>\n";

BuiltinModel makeMlp() {
  // x: ?x64 -> dense 64->128, relu -> dense 128->10 -> softmax. Batch is dynamic.
  std::string res;
  std::ostringstream m;
  m << "// kiln built-in model 'mlp': 64 -> 128 (relu) -> 10 (softmax), dynamic batch\n"
    << "func.func @main(%x: tensor<?x64xf32> {kiln.name = \"x\"}) -> tensor<?x10xf32> {\n"
    << "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
    << "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
    << denseConst("w1", "tensor<1x64x128xf32>", deterministicValues(64 * 128, 1, 0.125f))
    << denseConst("b1", "tensor<1x1x128xf32>", deterministicValues(128, 2, 0.05f))
    << denseConst("w2", "tensor<1x128x10xf32>", deterministicValues(128 * 10, 3, 0.088f))
    << denseConst("b2", "tensor<1x1x10xf32>", deterministicValues(10, 4, 0.05f))
    << "  %s3 = tosa.const_shape {values = dense<[1, -1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
    << "  %x3 = tosa.reshape %x, %s3 : (tensor<?x64xf32>, !tosa.shape<3>) -> tensor<1x?x64xf32>\n"
    << "  %h0 = tosa.matmul %x3, %w1, %zp, %zp : (tensor<1x?x64xf32>, tensor<1x64x128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x?x128xf32>\n"
    << "  %h1 = tosa.add %h0, %b1 : (tensor<1x?x128xf32>, tensor<1x1x128xf32>) -> tensor<1x?x128xf32>\n"
    << "  %h = tosa.clamp %h1 {min_val = 0.0 : f32, max_val = 3.40282347e+38 : f32} : (tensor<1x?x128xf32>) -> tensor<1x?x128xf32>\n"
    << "  %o0 = tosa.matmul %h, %w2, %zp, %zp : (tensor<1x?x128xf32>, tensor<1x128x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x?x10xf32>\n"
    << "  %o1 = tosa.add %o0, %b2 : (tensor<1x?x10xf32>, tensor<1x1x10xf32>) -> tensor<1x?x10xf32>\n"
    << "  %s2 = tosa.const_shape {values = dense<[-1, 10]> : tensor<2xindex>} : () -> !tosa.shape<2>\n"
    << "  %logits = tosa.reshape %o1, %s2 : (tensor<1x?x10xf32>, !tosa.shape<2>) -> tensor<?x10xf32>\n"
    << kSoftmax << "  return %probs : tensor<?x10xf32>\n}\n";
  return {"mlp", "MLP 64-128-10 with ReLU and softmax, input x: ?x64xf32", m.str()};
}

BuiltinModel makeCnn() {
  // x: 1x16x16x3 -> conv3x3(8)+relu6 -> maxpool2 -> conv3x3/s2(16)+relu6
  //   -> avgpool4 -> dense 16->10 -> softmax. Weights as dense_resource blobs.
  std::string res;
  std::ostringstream m;
  m << "// kiln built-in model 'cnn': two convolutions, pooling, a dense layer, softmax\n"
    << "func.func @main(%x: tensor<1x16x16x3xf32> {kiln.name = \"image\"}) -> tensor<1x10xf32> {\n"
    << "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
    << "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
    << resourceConst("cw1", "tensor<8x3x3x3xf32>", deterministicValues(8 * 27, 11, 0.27f), res)
    << resourceConst("cb1", "tensor<8xf32>", deterministicValues(8, 12, 0.05f), res)
    << resourceConst("cw2", "tensor<16x3x3x8xf32>", deterministicValues(16 * 72, 13, 0.118f), res)
    << resourceConst("cb2", "tensor<16xf32>", deterministicValues(16, 14, 0.05f), res)
    << resourceConst("fw", "tensor<1x16x10xf32>", deterministicValues(160, 15, 0.25f), res)
    << denseConst("fb", "tensor<1x10xf32>", deterministicValues(10, 16, 0.05f))
    << "  %c1 = tosa.conv2d %x, %cw1, %cb1, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x16x16x3xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x16x8xf32>\n"
    << "  %r1 = tosa.clamp %c1 {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32>\n"
    << "  %p1 = tosa.max_pool2d %r1 {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>} : (tensor<1x16x16x8xf32>) -> tensor<1x8x8x8xf32>\n"
    << "  %c2 = tosa.conv2d %p1, %cw2, %cb2, %zp, %zp {acc_type = f32, pad = array<i64: 0, 1, 0, 1>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x8xf32>, tensor<16x3x3x8xf32>, tensor<16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x16xf32>\n"
    << "  %r2 = tosa.clamp %c2 {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x4x4x16xf32>) -> tensor<1x4x4x16xf32>\n"
    << "  %p2 = tosa.avg_pool2d %r2, %zp, %zp {acc_type = f32, kernel = array<i64: 4, 4>, stride = array<i64: 4, 4>, pad = array<i64: 0, 0, 0, 0>} : (tensor<1x4x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x1x16xf32>\n"
    << "  %s3 = tosa.const_shape {values = dense<[1, 1, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
    << "  %f = tosa.reshape %p2, %s3 : (tensor<1x1x1x16xf32>, !tosa.shape<3>) -> tensor<1x1x16xf32>\n"
    << "  %d = tosa.matmul %f, %fw, %zp, %zp : (tensor<1x1x16xf32>, tensor<1x16x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x10xf32>\n"
    << "  %s2 = tosa.const_shape {values = dense<[1, 10]> : tensor<2xindex>} : () -> !tosa.shape<2>\n"
    << "  %d2 = tosa.reshape %d, %s2 : (tensor<1x1x10xf32>, !tosa.shape<2>) -> tensor<1x10xf32>\n"
    << "  %lg = tosa.add %d2, %fb : (tensor<1x10xf32>, tensor<1x10xf32>) -> tensor<1x10xf32>\n"
    << "  %logits = tensor.cast %lg : tensor<1x10xf32> to tensor<?x10xf32>\n"
    << kSoftmax
    << "  %out = tensor.cast %probs : tensor<?x10xf32> to tensor<1x10xf32>\n"
    << "  return %out : tensor<1x10xf32>\n}\n";
  return {"cnn", "CNN: 2 conv + relu6 + max/avg pool + dense + softmax, input image: 1x16x16x3xf32",
          withResources(m.str(), res)};
}

}  // namespace

std::vector<std::string> builtinModelNames() { return {"mlp", "cnn"}; }

const BuiltinModel *findBuiltinModel(const std::string &name) {
  static const BuiltinModel models[] = {makeMlp(), makeCnn()};
  for (const BuiltinModel &m : models)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace kiln::models
