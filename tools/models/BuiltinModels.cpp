#include "tools/models/BuiltinModels.h"

#include "lowering/GraphBuilder.h"

#include <cfloat>

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

using lowering::GraphBuilder;
using V = GraphBuilder::Value;

Tensor weights(std::vector<int64_t> shape, unsigned seed, float scale) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Tensor::fromVector<float>(DType::f32, Shape(shape.begin(), shape.end()),
                                   deterministicValues(size_t(n), seed, scale));
}
TensorType f32(std::vector<int64_t> shape) { return {DType::f32, Shape(shape.begin(), shape.end())}; }
ops::AttrMap attrs(std::initializer_list<std::pair<const char *, ops::Attr>> list) {
  ops::AttrMap m;
  for (const auto &[k, v] : list) m.set(k, v);
  return m;
}
/// One result of one op; errors propagate through `err`.
struct Writer {
  GraphBuilder &g;
  llvm::Error err = llvm::Error::success();
  ~Writer() { llvm::consumeError(std::move(err)); }
  V take(llvm::Expected<V> v) {
    if (v) return *v;
    if (!err) err = v.takeError();
    else llvm::consumeError(v.takeError());
    return -1;
  }
  V op(const char *name, std::vector<V> in, ops::AttrMap a, TensorType out) {
    if (err) return -1;
    auto r = g.op(name, in, a, {out});
    if (!r) return take(r.takeError());
    return (*r)[0];
  }
};

/// %logits : ?x10 -> softmax over axis 1.
V softmax(Writer &w, V logits) {
  TensorType t = f32({kDynamic, 10}), r = f32({kDynamic, 1});
  V mx = w.op("tosa.reduce_max", {logits}, attrs({{"axis", int64_t(1)}}), r);
  V shifted = w.op("tosa.sub", {logits, mx}, {}, t);
  V ex = w.op("tosa.exp", {shifted}, {}, t);
  V sum = w.op("tosa.reduce_sum", {ex}, attrs({{"axis", int64_t(1)}}), r);
  V inv = w.op("tosa.reciprocal", {sum}, {}, r);
  return w.op("tosa.mul", {ex, inv}, attrs({{"shift", int64_t(0)}}), t);
}

/// x: ?x64 -> dense 64->128, relu -> dense 128->10 -> softmax. Batch is dynamic.
llvm::Expected<std::vector<V>> writeMlp(GraphBuilder &g) {
  Writer w{g};
  auto zp = attrs({{"a_zp", 0.0}, {"b_zp", 0.0}});
  V x = g.argument(f32({kDynamic, 64}), "x");
  V w1 = w.take(g.constant(weights({1, 64, 128}, 1, 0.125f)));
  V b1 = w.take(g.constant(weights({1, 1, 128}, 2, 0.05f)));
  V w2 = w.take(g.constant(weights({1, 128, 10}, 3, 0.088f)));
  V b2 = w.take(g.constant(weights({1, 1, 10}, 4, 0.05f)));
  V x3 = w.op("tosa.reshape", {x}, attrs({{"shape", std::vector<int64_t>{1, -1, 64}}}), f32({1, kDynamic, 64}));
  V h0 = w.op("tosa.matmul", {x3, w1}, zp, f32({1, kDynamic, 128}));
  V h1 = w.op("tosa.add", {h0, b1}, {}, f32({1, kDynamic, 128}));
  V h = w.op("tosa.clamp", {h1}, attrs({{"min_val", 0.0}, {"max_val", double(FLT_MAX)}}), f32({1, kDynamic, 128}));
  V o0 = w.op("tosa.matmul", {h, w2}, zp, f32({1, kDynamic, 10}));
  V o1 = w.op("tosa.add", {o0, b2}, {}, f32({1, kDynamic, 10}));
  V logits = w.op("tosa.reshape", {o1}, attrs({{"shape", std::vector<int64_t>{-1, 10}}}), f32({kDynamic, 10}));
  V probs = softmax(w, logits);
  if (w.err) return std::move(w.err);
  return std::vector<V>{probs};
}

/// x: 1x16x16x3 -> conv3x3(8)+relu6 -> maxpool2 -> conv3x3/s2(16)+relu6
///   -> avgpool4 -> dense 16->10 -> softmax. Weights as dense_resource blobs.
llvm::Expected<std::vector<V>> writeCnn(GraphBuilder &g) {
  Writer w{g};
  auto conv = [](std::vector<int64_t> pad, std::vector<int64_t> stride) {
    return attrs({{"acc_type", std::string("f32")}, {"pad", pad}, {"stride", stride},
                  {"dilation", std::vector<int64_t>{1, 1}}, {"input_zp", 0.0}, {"weight_zp", 0.0}});
  };
  auto relu6 = attrs({{"min_val", 0.0}, {"max_val", 6.0}});
  V x = g.argument(f32({1, 16, 16, 3}), "image");
  V cw1 = w.take(g.resourceConstant("cw1", weights({8, 3, 3, 3}, 11, 0.27f)));
  V cb1 = w.take(g.resourceConstant("cb1", weights({8}, 12, 0.05f)));
  V cw2 = w.take(g.resourceConstant("cw2", weights({16, 3, 3, 8}, 13, 0.118f)));
  V cb2 = w.take(g.resourceConstant("cb2", weights({16}, 14, 0.05f)));
  V fw = w.take(g.resourceConstant("fw", weights({1, 16, 10}, 15, 0.25f)));
  V fb = w.take(g.constant(weights({1, 10}, 16, 0.05f)));
  V c1 = w.op("tosa.conv2d", {x, cw1, cb1}, conv({1, 1, 1, 1}, {1, 1}), f32({1, 16, 16, 8}));
  V r1 = w.op("tosa.clamp", {c1}, relu6, f32({1, 16, 16, 8}));
  V p1 = w.op("tosa.max_pool2d", {r1},
              attrs({{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                     {"pad", std::vector<int64_t>{0, 0, 0, 0}}}),
              f32({1, 8, 8, 8}));
  V c2 = w.op("tosa.conv2d", {p1, cw2, cb2}, conv({0, 1, 0, 1}, {2, 2}), f32({1, 4, 4, 16}));
  V r2 = w.op("tosa.clamp", {c2}, relu6, f32({1, 4, 4, 16}));
  V p2 = w.op("tosa.avg_pool2d", {r2},
              attrs({{"acc_type", std::string("f32")}, {"kernel", std::vector<int64_t>{4, 4}},
                     {"stride", std::vector<int64_t>{4, 4}}, {"pad", std::vector<int64_t>{0, 0, 0, 0}},
                     {"input_zp", 0.0}, {"output_zp", 0.0}}),
              f32({1, 1, 1, 16}));
  V f = w.op("tosa.reshape", {p2}, attrs({{"shape", std::vector<int64_t>{1, 1, 16}}}), f32({1, 1, 16}));
  V d = w.op("tosa.matmul", {f, fw}, attrs({{"a_zp", 0.0}, {"b_zp", 0.0}}), f32({1, 1, 10}));
  V d2 = w.op("tosa.reshape", {d}, attrs({{"shape", std::vector<int64_t>{1, 10}}}), f32({1, 10}));
  V lg = w.op("tosa.add", {d2, fb}, {}, f32({1, 10}));
  // Shape-erasing casts around the softmax, as exporters write them.
  V logits = w.take(g.cast(lg, f32({kDynamic, 10})));
  V probs = softmax(w, logits);
  V out = w.take(g.cast(probs, f32({1, 10})));
  if (w.err) return std::move(w.err);
  return std::vector<V>{out};
}

using Writer_ = llvm::Expected<std::vector<V>> (*)(GraphBuilder &);

BuiltinModel make(const char *name, const char *description, Writer_ write) {
  BuiltinModel m;
  m.name = name;
  m.description = description;
  GraphBuilder g("main", std::string("builtin:") + name);
  auto results = write(g);
  if (!results)  // a bug in this file, caught by every test that loads a model
    llvm::report_fatal_error(llvm::Twine("built-in model '") + name + "': " + llvm::toString(results.takeError()));
  if (auto err = g.setResults(*results))
    llvm::report_fatal_error(llvm::Twine("built-in model '") + name + "': " + llvm::toString(std::move(err)));
  m.mlir = "// kiln built-in model '" + std::string(name) + "': " + description + "\n" + g.str();
  m.build = [name = std::string(name), write]() -> llvm::Expected<std::unique_ptr<lowering::Program>> {
    GraphBuilder g("main", "builtin:" + name);
    auto results = write(g);
    if (!results) return results.takeError();
    return g.finish(*results);
  };
  return m;
}

}  // namespace

std::vector<std::string> builtinModelNames() { return {"mlp", "cnn"}; }

const BuiltinModel *findBuiltinModel(const std::string &name) {
  static const BuiltinModel models[] = {
      make("mlp", "MLP 64-128-10 with ReLU and softmax, input x: ?x64xf32", &writeMlp),
      make("cnn", "CNN: 2 conv + relu6 + max/avg pool + dense + softmax, input image: 1x16x16x3xf32", &writeCnn)};
  for (const BuiltinModel &m : models)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace kiln::models
