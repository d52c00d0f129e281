#include "lowering/models/BuiltinModels.h"

#include "lowering/graph/GraphBuilder.h"

#include <cfloat>
#include <cmath>

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

/// ResNet-50 v1.5 (torchvision's layout: stride on the 3x3 conv of a
/// bottleneck), NHWC, batch norm folded into the conv biases, deterministic
/// He-scaled weights (25.6 M parameters as dense_resource blobs), logits out.
/// Strided convolutions pad (or slice) so that TOSA's exact output sizes hold,
/// as torch-mlir's export does.
llvm::Expected<std::vector<V>> writeResnet50(GraphBuilder &g) {
  Writer w{g};
  unsigned seed = 100;
  auto convAttrs = [](std::vector<int64_t> pad, int64_t stride) {
    return attrs({{"acc_type", std::string("f32")}, {"pad", pad}, {"stride", std::vector<int64_t>{stride, stride}},
                  {"dilation", std::vector<int64_t>{1, 1}}, {"input_zp", 0.0}, {"weight_zp", 0.0}});
  };
  auto relu = attrs({{"min_val", 0.0}, {"max_val", double(FLT_MAX)}});
  // conv (+ bias) with a KxK filter from `c` to `f` channels; `hw` is the
  // input size, the output size is returned through `hw`.
  auto conv = [&](V x, int64_t &hw, int64_t c, int64_t f, int64_t k, int64_t stride, float gain,
                  const std::string &name) {
    std::vector<int64_t> pad;
    if (k == 1) pad = {0, 0, 0, 0};
    else if (stride == 1) pad = {k / 2, k / 2, k / 2, k / 2};
    else pad = {k / 2, k / 2 - 1, k / 2, k / 2 - 1};  // exact: (hw + k - 2 - k) / 2 + 1 = hw / 2
    if (k == 1 && stride == 2) {  // 1x1 stride 2: the last row and column are never read
      x = w.op("tosa.slice", {x}, attrs({{"start", std::vector<int64_t>{0, 0, 0, 0}},
                                         {"size", std::vector<int64_t>{1, hw - 1, hw - 1, c}}}),
               f32({1, hw - 1, hw - 1, c}));
      hw -= 1;
    }
    float scale = gain * std::sqrt(6.0f / float(k * k * c));
    V wt = w.take(g.resourceConstant(name + "_w", weights({f, k, k, c}, seed++, scale)));
    V b = w.take(g.resourceConstant(name + "_b", weights({f}, seed++, 0.05f)));
    int64_t out = (hw + pad[0] + pad[1] - k) / stride + 1;
    hw = out;
    return w.op("tosa.conv2d", {x, wt, b}, convAttrs(pad, stride), f32({1, out, out, f}));
  };
  V x = g.argument(f32({1, 224, 224, 3}), "image");
  int64_t hw = 224;
  V y = conv(x, hw, 3, 64, 7, 2, 1.0f, "stem");
  y = w.op("tosa.clamp", {y}, relu, f32({1, hw, hw, 64}));
  y = w.op("tosa.max_pool2d", {y},
           attrs({{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                  {"pad", std::vector<int64_t>{1, 0, 1, 0}}}),
           f32({1, hw / 2, hw / 2, 64}));
  hw /= 2;
  int64_t channels = 64;
  const int64_t blocks[4] = {3, 4, 6, 3}, widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (int64_t block = 0; block < blocks[stage]; ++block) {
      std::string name = "layer" + std::to_string(stage + 1) + "_" + std::to_string(block);
      int64_t width = widths[stage], out = 4 * width, stride = stage > 0 && block == 0 ? 2 : 1;
      int64_t h1 = hw;
      V a = conv(y, h1, channels, width, 1, 1, 1.0f, name + "_conv1");
      a = w.op("tosa.clamp", {a}, relu, f32({1, h1, h1, width}));
      V b = conv(a, h1, width, width, 3, stride, 1.0f, name + "_conv2");
      b = w.op("tosa.clamp", {b}, relu, f32({1, h1, h1, width}));
      V c = conv(b, h1, width, out, 1, 1, 0.5f, name + "_conv3");  // residual branches start small
      V shortcut = y;
      if (block == 0) {
        int64_t h2 = hw;
        shortcut = conv(y, h2, channels, out, 1, stride, 1.0f, name + "_downsample");
      }
      V sum = w.op("tosa.add", {c, shortcut}, {}, f32({1, h1, h1, out}));
      y = w.op("tosa.clamp", {sum}, relu, f32({1, h1, h1, out}));
      hw = h1;
      channels = out;
    }
  V pooled = w.op("tosa.avg_pool2d", {y},
                  attrs({{"acc_type", std::string("f32")}, {"kernel", std::vector<int64_t>{hw, hw}},
                         {"stride", std::vector<int64_t>{1, 1}}, {"pad", std::vector<int64_t>{0, 0, 0, 0}},
                         {"input_zp", 0.0}, {"output_zp", 0.0}}),
                  f32({1, 1, 1, channels}));
  V flat = w.op("tosa.reshape", {pooled}, attrs({{"shape", std::vector<int64_t>{1, 1, channels}}}), f32({1, 1, channels}));
  V fw = w.take(g.resourceConstant("fc_w", weights({1, channels, 1000}, seed++, std::sqrt(3.0f / float(channels)))));
  V fb = w.take(g.resourceConstant("fc_b", weights({1, 1000}, seed++, 0.05f)));
  V logits3 = w.op("tosa.matmul", {flat, fw}, attrs({{"a_zp", 0.0}, {"b_zp", 0.0}}), f32({1, 1, 1000}));
  V logits2 = w.op("tosa.reshape", {logits3}, attrs({{"shape", std::vector<int64_t>{1, 1000}}}), f32({1, 1000}));
  V logits = w.op("tosa.add", {logits2, fb}, {}, f32({1, 1000}));
  if (w.err) return std::move(w.err);
  return std::vector<V>{logits};
}

using Writer_ = llvm::Expected<std::vector<V>> (*)(GraphBuilder &);

/// `withText`: also keep the module as MLIR text (small models only; a
/// ResNet-50's text would be 200 MB).
BuiltinModel make(const char *name, const char *description, Writer_ write, bool withText = true) {
  BuiltinModel m;
  m.name = name;
  m.description = description;
  if (withText) {
    GraphBuilder g("main", std::string("builtin:") + name);
    auto results = write(g);
    if (!results)  // a bug in this file, caught by every test that loads a model
      llvm::report_fatal_error(llvm::Twine("built-in model '") + name + "': " + llvm::toString(results.takeError()));
    if (auto err = g.setResults(*results))
      llvm::report_fatal_error(llvm::Twine("built-in model '") + name + "': " + llvm::toString(std::move(err)));
    m.mlir = "// kiln built-in model '" + std::string(name) + "': " + description + "\n" + g.str();
  }
  m.build = [name = std::string(name), write]() -> llvm::Expected<std::unique_ptr<lowering::Program>> {
    GraphBuilder g("main", "builtin:" + name);
    auto results = write(g);
    if (!results) return results.takeError();
    return g.finish(*results);
  };
  return m;
}

}  // namespace

std::vector<std::string> builtinModelNames() { return {"mlp", "cnn", "resnet50"}; }

const BuiltinModel *findBuiltinModel(const std::string &name) {
  // Each made on first use only: making the small models' text takes an
  // MLIR context and a GraphBuilder each (5% of the samples of MobileNetV2's
  // kernels-only cold run, `perf record`), which every `kiln run model.mlir`
  // paid in its load before asking for a file.
  if (name == "mlp") {
    static const BuiltinModel m = make("mlp", "MLP 64-128-10 with ReLU and softmax, input x: ?x64xf32", &writeMlp);
    return &m;
  }
  if (name == "cnn") {
    static const BuiltinModel m =
        make("cnn", "CNN: 2 conv + relu6 + max/avg pool + dense + softmax, input image: 1x16x16x3xf32", &writeCnn);
    return &m;
  }
  if (name == "resnet50") {
    static const BuiltinModel m = make("resnet50",
                                       "ResNet-50 v1.5, NHWC, batch norm folded, deterministic weights (25.6 M), "
                                       "input image: 1x224x224x3xf32, logits out",
                                       &writeResnet50, /*withText=*/false);
    return &m;
  }
  return nullptr;
}

}  // namespace kiln::models
