//===- FoldConstants.cpp - constant subgraphs run once, at load ------------===//
//
// kiln-fold-constants: three rewrites of f32 TOSA graphs that exporters
// leave for the runtime.
//
// 1. Every op whose operands are all constants is evaluated once, here, and
//    replaced by its value: elementwise arithmetic (add, sub, mul, maximum,
//    minimum, rsqrt, reciprocal, negate, abs, exp, log, sigmoid, tanh,
//    clamp) with broadcasting (unless it would grow a constant past 4096
//    elements), reshape and transpose. Batch norm's
//    rsqrt(var + eps), the per-channel constants that
//    kiln-propagate-transposes transposed to follow the layout, and weight
//    transposes and reshapes become plain constants.
//
// 2. The chain of per-output-channel affine ops (add, sub, mul by a constant
//    broadcast along the channel dimension only) that follows a
//    tosa.conv2d / tosa.depthwise_conv2d with constant filter and bias is
//    folded into them: y*s + t of conv(x, W, b) is conv(x, W*s, b*s + t).
//    An exported batch norm after a convolution disappears.
//
// 3. tosa.pow by a constant, uniform exponent of 1, 2, 3, 4, -1, -2 or -0.5
//    (GELU's tanh approximation x^3, RMSNorm's x^2) becomes multiplies,
//    tosa.reciprocal or tosa.rsqrt: math.powf has no vector form, so the
//    generated code called libm's powf once per element (GPT-2's FFN
//    matmul with its GELU ran at half the speed of BERT's).
//
// 4. "Is every element of the row -inf" (torch's safe softmax: rows all
//    masked give 0, not NaN), reduce_all(equal(x, -inf)) with x or its
//    exact widening cast, becomes equal(reduce_max(x), -inf), reusing the
//    softmax's own row maximum: a float row max propagates NaN, so a row
//    with a NaN is "not all -inf" either way. The boolean compare and
//    all-reduction over every score ran as scalar loops (ViT-B/16's
//    softmax kernels at 1% of peak).
//
// 5. min(max(x, lo), hi) and max(min(x, hi), lo) with uniform constant
//    bounds lo <= hi (MobileNetV2's ReLU6 as torch-mlir writes it) become
//    tosa.clamp(x, lo, hi): NaN propagates through both forms alike. A
//    clamp after a conv runs inside the conv's kernel step in kernel plans
//    (jit/Compiler.cpp fusibleClamps), where the two ops were two passes
//    over the conv's output each.
//
// Folded values that derive from a dense_resource (the model's weights)
// become dense_resource blobs (named kiln_folded*), so that they are hoisted
// as weights and kept out of the code and of the cache key; values made only
// of inline constants stay inline.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Passes.h"
#include "lowering/graph/Permute.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNFOLDCONSTANTS
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Results with more elements than this are left to run at call time.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;
/// Broadcasting constants may grow up to this many elements when folded.
constexpr int64_t kSmallResult = 4096;

/// An f32 constant's values: read out of a dense attribute (or computed)
/// into `values`, or read in place from a dense_resource blob (`blob`,
/// `values` empty) — weights are most of a model's bytes, and each copy of
/// ResNet-50's 100 MB cost 20-40 ms at load.
struct Constant {
  SmallVector<int64_t> shape;
  std::vector<float> values;
  ArrayRef<float> blob;
  /// The dense_resource `blob` is read from, when it is read in place.
  std::optional<DenseResourceElementsHandle> handle;
  bool fromWeights = false;  // derived from a dense_resource
  ArrayRef<float> data() const { return values.empty() ? blob : ArrayRef<float>(values); }
  /// The values as a vector of its own, to change in place.
  std::vector<float> &own() {
    if (values.empty() && !blob.empty()) values.assign(blob.begin(), blob.end());
    blob = {};
    handle.reset();
    return values;
  }
  int64_t size() const { return int64_t(data().size()); }
};

ElementsAttr constantAttr(Value v) {
  Operation *op = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<tosa::ConstOp>(op)) return c.getValues();
  if (auto c = dyn_cast_or_null<arith::ConstantOp>(op)) return dyn_cast<ElementsAttr>(c.getValue());
  return {};
}

std::optional<Constant> readF32(Value v) {
  ElementsAttr attr = constantAttr(v);
  if (!attr) return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isF32()) return std::nullopt;
  Constant c;
  c.shape.assign(type.getShape().begin(), type.getShape().end());
  size_t n = size_t(type.getNumElements());
  if (auto r = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = r.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != n * sizeof(float)) return std::nullopt;  // elided
    c.blob = ArrayRef<float>(reinterpret_cast<const float *>(blob->getData().data()), n);
    c.handle = r.getRawHandle();
    c.fromWeights = true;
    return c;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense) return std::nullopt;
  if (dense.isSplat()) c.values.assign(n, dense.getSplatValue<float>());
  else c.values.assign(dense.getValues<float>().begin(), dense.getValues<float>().end());
  return c;
}

/// True if `v` is a constant integer tensor of zeros (tosa.mul's shift).
bool isZeroConstant(Value v) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(constantAttr(v));
  if (!dense || !isa<IntegerType>(dense.getElementType())) return false;
  return llvm::all_of(dense.getValues<APInt>(), [](const APInt &i) { return i.isZero(); });
}

ElementsAttr makeAttr(RankedTensorType type, std::vector<float> values, bool asWeight) {
  if (!asWeight) return DenseElementsAttr::get(type, llvm::ArrayRef<float>(values));
  // The blob takes the vector's memory (no copy).
  auto *held = new std::vector<float>(std::move(values));
  AsmResourceBlob blob(ArrayRef<char>(reinterpret_cast<const char *>(held->data()), held->size() * sizeof(float)),
                       alignof(float), [held](void *, size_t, size_t) { delete held; }, /*dataIsMutable=*/true);
  // A name of its own: MLIR's blob manager makes a taken name unique by
  // trying _1, _2, ... from 1 each time (quadratic in the folded constants).
  static std::atomic<uint64_t> next{0};
  return DenseResourceElementsAttr::get(type, (kFoldedBlobName + llvm::Twine("_") + llvm::Twine(next++)).str(),
                                        std::move(blob));
}

Value makeConstant(OpBuilder &b, Location loc, RankedTensorType type, std::vector<float> values,
                   bool asWeight) {
  return tosa::ConstOp::create(b, loc, type, makeAttr(type, std::move(values), asWeight));
}

/// Row-major strides of `shape`, with 0 for broadcast (size-1) dimensions
/// of an operand read at `outShape`.
SmallVector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> outShape) {
  SmallVector<int64_t> strides(outShape.size(), 0);
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = shape[i] == 1 && outShape[i] != 1 ? 0 : s;
    s *= shape[i];
  }
  return strides;
}

/// out[i] = f(a[i'], b[i'']) with TOSA broadcasting (equal ranks).
std::optional<std::vector<float>> broadcastBinary(const Constant &a, const Constant &b,
                                                  llvm::ArrayRef<int64_t> outShape,
                                                  const std::function<float(float, float)> &f) {
  if (a.shape.size() != outShape.size() || b.shape.size() != outShape.size()) return std::nullopt;
  int64_t total = 1;
  for (int64_t d : outShape) total *= d;
  SmallVector<int64_t> sa = broadcastStrides(a.shape, outShape), sb = broadcastStrides(b.shape, outShape);
  std::vector<float> out(static_cast<size_t>(total));
  ArrayRef<float> ad = a.data(), bd = b.data();
  SmallVector<int64_t> idx(outShape.size(), 0);
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < total; ++o) {
    out[size_t(o)] = f(ad[size_t(ia)], bd[size_t(ib)]);
    for (size_t d = outShape.size(); d-- > 0;) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < outShape[d]) break;
      ia -= sa[d] * outShape[d];
      ib -= sb[d] * outShape[d];
      idx[d] = 0;
    }
  }
  return out;
}

std::function<float(float, float)> binaryFunction(Operation *op) {
  if (isa<tosa::AddOp>(op)) return [](float x, float y) { return x + y; };
  if (isa<tosa::SubOp>(op)) return [](float x, float y) { return x - y; };
  if (auto m = dyn_cast<tosa::MulOp>(op))
    return isZeroConstant(m.getShift()) ? std::function<float(float, float)>([](float x, float y) { return x * y; })
                                        : nullptr;
  if (isa<tosa::MaximumOp>(op)) return [](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); };
  if (isa<tosa::MinimumOp>(op)) return [](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); };
  return nullptr;
}

std::function<float(float)> unaryFunction(Operation *op) {
  if (isa<tosa::RsqrtOp>(op)) return [](float x) { return 1.0f / std::sqrt(x); };
  if (isa<tosa::ReciprocalOp>(op)) return [](float x) { return 1.0f / x; };
  if (isa<tosa::NegateOp>(op)) return [](float x) { return -x; };
  if (isa<tosa::AbsOp>(op)) return [](float x) { return std::fabs(x); };
  if (isa<tosa::ExpOp>(op)) return [](float x) { return std::exp(x); };
  if (isa<tosa::LogOp>(op)) return [](float x) { return std::log(x); };
  if (isa<tosa::SigmoidOp>(op)) return [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  if (isa<tosa::TanhOp>(op)) return [](float x) { return std::tanh(x); };
  if (auto c = dyn_cast<tosa::ClampOp>(op)) {
    auto lo = dyn_cast<FloatAttr>(c.getMinValAttr()), hi = dyn_cast<FloatAttr>(c.getMaxValAttr());
    if (!lo || !hi) return nullptr;
    float l = float(lo.getValueAsDouble()), h = float(hi.getValueAsDouble());
    return [l, h](float x) { return std::isnan(x) ? x : std::min(std::max(x, l), h); };
  }
  return nullptr;
}

/// The value of `op` if all the operands it computes from are constants.
std::optional<Constant> evaluate(Operation *op) {
  if (op->getNumResults() != 1) return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isF32() ||
      type.getNumElements() > kMaxFoldedElements)
    return std::nullopt;
  Constant out;
  out.shape.assign(type.getShape().begin(), type.getShape().end());
  if (auto fn = binaryFunction(op)) {
    auto a = readF32(op->getOperand(0)), b = readF32(op->getOperand(1));
    if (!a || !b) return std::nullopt;
    // A broadcast that makes a constant bigger stays in the graph: folded,
    // a few bytes of constant would become a large weight.
    if (type.getNumElements() > std::max<int64_t>({a->size(), b->size(), kSmallResult})) return std::nullopt;
    auto v = broadcastBinary(*a, *b, out.shape, fn);
    if (!v) return std::nullopt;
    out.values = std::move(*v);
    out.fromWeights = a->fromWeights || b->fromWeights;
    return out;
  }
  if (auto fn = unaryFunction(op)) {
    auto a = readF32(op->getOperand(0));  // negate's zero points are 0 for floats
    if (!a || a->size() != type.getNumElements()) return std::nullopt;
    ArrayRef<float> in = a->data();
    out.values.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) out.values[i] = fn(in[i]);
    out.fromWeights = a->fromWeights;
    return out;
  }
  // The operand's data as it is, in `out`'s shape (its blob, not a copy).
  auto sameData = [&](Constant &a) {
    out.values = std::move(a.values);
    out.blob = a.blob;
    out.handle = a.handle;
    out.fromWeights = a.fromWeights;
    return out;
  };
  if (auto r = dyn_cast<tosa::ReshapeOp>(op)) {
    auto a = readF32(r.getInput1());
    if (!a || a->size() != type.getNumElements()) return std::nullopt;
    return sameData(*a);
  }
  if (auto t = dyn_cast<tosa::TransposeOp>(op)) {
    auto a = readF32(t.getInput1());
    ArrayRef<int32_t> perm = t.getPerms();
    if (!a || perm.size() != a->shape.size()) return std::nullopt;
    SmallVector<int64_t> perm64(perm.begin(), perm.end());
    // Only size-1 dimensions move (a 1x1 conv's filter to FHWC): a reshape.
    if (permutationKeepsLayout(a->shape, perm64)) return sameData(*a);
    ArrayRef<float> in = a->data();
    out.values.resize(in.size());
    permute(reinterpret_cast<const char *>(in.data()), reinterpret_cast<char *>(out.values.data()), a->shape,
            SmallVector<int64_t>(perm.begin(), perm.end()), sizeof(float));
    out.fromWeights = a->fromWeights;
    return out;
  }
  return std::nullopt;
}

/// Part 1: constant ops replace every op computable from constants, in
/// program order (so whole constant chains fold in one walk).
void foldConstantOps(func::FuncOp fn, int64_t &folded) {
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) {
    if (op->getNumOperands() && op->getParentOp() == fn) ops.push_back(op);
  });
  for (Operation *op : ops) {
    std::optional<Constant> v = evaluate(op);
    if (!v) continue;
    OpBuilder b(op);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    // A reshaped weight reads the same blob (a copy of each of the model's
    // reshaped filters cost as much as the reshape's whole load otherwise).
    Value value = v->handle ? tosa::ConstOp::create(b, op->getLoc(), type, DenseResourceElementsAttr::get(type, *v->handle))
                             : makeConstant(b, op->getLoc(), type, std::move(v->own()), v->fromWeights);
    op->getResult(0).replaceAllUsesWith(value);
    SmallVector<Value> operands(op->getOperands());
    op->erase();
    ++folded;
    for (Value in : operands)
      if (Operation *def = in.getDefiningOp(); def && def->use_empty() && isa<tosa::ConstOp, tosa::ConstShapeOp>(def))
        def->erase();
  }
}

/// A constant that `y` of type `outType` (rank 4, channels last) may be
/// combined with per channel: every dimension 1 except the last, which is
/// 1 or the channel count. Returns its values broadcast to [channels].
std::optional<Constant> perChannel(Value v, RankedTensorType outType) {
  auto c = readF32(v);
  if (!c || c->shape.size() != size_t(outType.getRank())) return std::nullopt;
  int64_t channels = outType.getDimSize(outType.getRank() - 1);
  for (size_t i = 0; i + 1 < c->shape.size(); ++i)
    if (c->shape[i] != 1) return std::nullopt;
  if (c->shape.back() != 1 && c->shape.back() != channels) return std::nullopt;
  std::vector<float> &values = c->own();
  if (c->shape.back() == 1) values.assign(size_t(channels), values[0]);
  c->shape.assign({channels});
  return c;
}

/// How many references to each dense_resource blob the module holds (any
/// op's attribute, in every function: a model's resource may be read by
/// several constants, or by another function).
llvm::DenseMap<const AsmResourceBlob *, int> countBlobReaders(ModuleOp module) {
  llvm::DenseMap<const AsmResourceBlob *, int> readers;
  module.walk([&](Operation *op) {
    for (NamedAttribute a : op->getAttrs())
      if (auto r = dyn_cast<DenseResourceElementsAttr>(a.getValue()))
        if (const AsmResourceBlob *blob = r.getRawHandle().getBlob()) ++readers[blob];
  });
  return readers;
}

/// The values of `c`, read from `v`'s dense_resource, as memory this pass
/// may change: a mutable blob (one this pass made, a hex literal or a
/// resource decoded at load: HexLiterals.cpp, or one MLIR's parser
/// allocated; never a mapped file's) that one constant op in the whole
/// module reads, and only `v`'s one user reads that. Empty otherwise (the
/// caller copies). A resource counts too: a model's batch norm folded into
/// its filters copied every filter at load (RegNetY-400MF's 17 MB).
MutableArrayRef<float> changeableInPlace(const Constant &c, Value v,
                                         const llvm::DenseMap<const AsmResourceBlob *, int> &readers) {
  if (!c.handle || !c.values.empty() || !v.hasOneUse() || !v.getDefiningOp<tosa::ConstOp>()) return {};
  DenseResourceElementsHandle handle = *c.handle;
  AsmResourceBlob *blob = handle.getBlob();
  if (!blob || !blob->isMutable() || readers.lookup(blob) != 1) return {};
  MutableArrayRef<char> bytes = blob->getMutableData();
  if (bytes.size() != c.blob.size() * sizeof(float)) return {};
  return MutableArrayRef<float>(reinterpret_cast<float *>(bytes.data()), c.blob.size());
}

/// Part 2: y*scale + shift chains after a convolution go into its filter
/// and bias. `blobReaders`: countBlobReaders of the module after part 1.
void foldIntoConvolutions(func::FuncOp fn, const llvm::DenseMap<const AsmResourceBlob *, int> &blobReaders,
                          int64_t &folded) {
  SmallVector<Operation *> convs;
  fn.walk([&](Operation *op) {
    if (isa<tosa::Conv2DOp, tosa::DepthwiseConv2DOp>(op)) convs.push_back(op);
  });
  for (Operation *conv : convs) {
    auto outType = cast<RankedTensorType>(conv->getResult(0).getType());
    if (!outType.hasStaticShape() || !outType.getElementType().isF32()) continue;
    int64_t channels = outType.getDimSize(3);
    auto weight = readF32(conv->getOperand(1)), bias = readF32(conv->getOperand(2));
    if (!weight || !bias || (bias->size() != channels && bias->size() != 1)) continue;
    std::vector<float> scale(size_t(channels), 1.0f), shift(size_t(channels), 0.0f);
    bool fromWeights = weight->fromWeights || bias->fromWeights;
    SmallVector<Operation *> chain;
    Value y = conv->getResult(0);
    while (y.hasOneUse()) {
      Operation *user = *y.getUsers().begin();
      if (!isa<tosa::AddOp, tosa::SubOp, tosa::MulOp>(user) || user->getResult(0).getType() != outType) break;
      if (auto m = dyn_cast<tosa::MulOp>(user); m && !isZeroConstant(m.getShift())) break;
      bool yFirst = user->getOperand(0) == y;
      auto c = perChannel(user->getOperand(yFirst ? 1 : 0), outType);
      if (!c) break;
      for (int64_t f = 0; f < channels; ++f) {
        float k = c->data()[size_t(f)];
        float &s = scale[size_t(f)], &t = shift[size_t(f)];
        if (isa<tosa::AddOp>(user)) t += k;
        else if (isa<tosa::MulOp>(user)) s *= k, t *= k;
        else if (yFirst) t -= k;            // y - k
        else s = -s, t = k - t;             // k - y
      }
      fromWeights |= c->fromWeights;
      chain.push_back(user);
      y = user->getResult(0);
    }
    if (chain.empty()) continue;
    // Filter: out channel f is W[f, ...] for conv2d (FHWC) and the flat last
    // two dims (c * M + m) for depthwise (HWCM).
    bool depthwise = isa<tosa::DepthwiseConv2DOp>(conv);
    int64_t inner = depthwise ? channels : weight->size() / channels;
    if (weight->size() % channels) continue;
    // Scaled where it is when the filter is a blob made at load that only
    // this conv reads (a transposed filter), else in a copy of its own.
    MutableArrayRef<float> inPlace = changeableInPlace(*weight, conv->getOperand(1), blobReaders);
    MutableArrayRef<float> w = inPlace.empty() ? MutableArrayRef<float>(weight->own()) : inPlace;
    if (depthwise) {
      for (int64_t i = 0; i < int64_t(w.size()); ++i) w[size_t(i)] *= scale[size_t(i % inner)];
    } else {
      for (int64_t f = 0; f < channels; ++f)
        for (float &x : w.slice(size_t(f * inner), size_t(inner))) x *= scale[size_t(f)];
    }
    std::vector<float> newBias(static_cast<size_t>(channels));
    for (int64_t f = 0; f < channels; ++f)
      newBias[size_t(f)] = bias->data()[bias->size() == 1 ? 0 : size_t(f)] * scale[size_t(f)] + shift[size_t(f)];
    OpBuilder b(conv);
    auto wType = cast<RankedTensorType>(conv->getOperand(1).getType());
    auto bType = RankedTensorType::get({channels}, outType.getElementType());
    Value oldW = conv->getOperand(1), oldB = conv->getOperand(2);
    if (inPlace.empty())  // else the filter's constant holds the scaled values already
      conv->setOperand(1, makeConstant(b, conv->getLoc(), wType, std::move(weight->values), fromWeights));
    conv->setOperand(2, makeConstant(b, conv->getLoc(), bType, std::move(newBias), fromWeights));
    y.replaceAllUsesWith(conv->getResult(0));
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      SmallVector<Value> operands((*it)->getOperands());
      (*it)->erase();
      for (Value in : operands)
        if (Operation *def = in.getDefiningOp(); def && def->use_empty() && isa<tosa::ConstOp>(def)) def->erase();
    }
    for (Value old : {oldW, oldB})
      if (Operation *def = old.getDefiningOp(); def && def->use_empty()) def->erase();
    folded += int64_t(chain.size());
  }
}

/// The uniform value of an f32 constant, if it is one.
std::optional<float> uniformF32(Value v) {
  std::optional<Constant> c = readF32(v);
  if (!c || c->data().empty() || llvm::any_of(c->data(), [&](float x) { return x != c->data()[0]; }))
    return std::nullopt;
  return c->data()[0];
}

void strengthReducePow(func::FuncOp fn, int64_t &reduced) {
  SmallVector<tosa::PowOp> pows;
  fn.walk([&](tosa::PowOp op) { pows.push_back(op); });
  for (tosa::PowOp op : pows) {
    Value x = op.getInput1();
    auto type = dyn_cast<RankedTensorType>(op.getType());
    // The exponent only broadcasts: the result has x's type.
    if (!type || x.getType() != type || !type.getElementType().isF32()) continue;
    std::optional<float> e = uniformF32(op.getInput2());
    if (!e || !llvm::is_contained({1.0f, 2.0f, 3.0f, 4.0f, -1.0f, -2.0f, -0.5f}, *e)) continue;
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto shiftType = RankedTensorType::get({1}, b.getI8Type());
    Value shift = tosa::ConstOp::create(b, loc, shiftType, DenseElementsAttr::get(shiftType, b.getI8IntegerAttr(0).getValue()));
    auto mul = [&](Value l, Value r) -> Value { return tosa::MulOp::create(b, loc, type, l, r, shift); };
    Value result;
    if (*e == 1.0f) result = x;
    else if (*e == 2.0f) result = mul(x, x);
    else if (*e == 3.0f) result = mul(mul(x, x), x);
    else if (*e == 4.0f) {
      Value sq = mul(x, x);
      result = mul(sq, sq);
    } else if (*e == -1.0f) result = tosa::ReciprocalOp::create(b, loc, type, x);
    else if (*e == -2.0f) result = tosa::ReciprocalOp::create(b, loc, type, mul(x, x));
    else result = tosa::RsqrtOp::create(b, loc, type, x);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    ++reduced;
  }
}

/// Whether `v` is a splat float constant of -inf.
bool isNegInfSplat(Value v) {
  DenseElementsAttr values;
  if (!matchPattern(v, m_Constant(&values)) || !values.isSplat() || !isa<FloatType>(values.getElementType()))
    return false;
  APFloat f = values.getSplatValue<APFloat>();
  return f.isInfinity() && f.isNegative();
}

/// x when `v` is x, or a tosa.cast of x to a float type that represents
/// every value of x's exactly (-inf stays -inf, nothing else becomes it:
/// not bf16 -> f16, whose range is smaller); else null.
Value uncastFloat(Value v) {
  if (auto cast = v.getDefiningOp<tosa::CastOp>()) {
    auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getInput().getType()));
    auto to = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getType()));
    if (from && to && APFloat::isRepresentableBy(from.getFloatSemantics(), to.getFloatSemantics()))
      return cast.getInput();
    return nullptr;
  }
  return isa<FloatType>(getElementTypeOrSelf(v.getType())) ? v : nullptr;
}

void rowAllNegInfAsMax(func::FuncOp fn, int64_t &rewritten) {
  SmallVector<tosa::ReduceAllOp> alls;
  fn.walk([&](tosa::ReduceAllOp op) { alls.push_back(op); });
  for (tosa::ReduceAllOp all : alls) {
    auto eq = all.getInput().getDefiningOp<tosa::EqualOp>();
    if (!eq) continue;
    Value l = eq.getInput1(), r = eq.getInput2();
    Value x = isNegInfSplat(r) ? uncastFloat(l) : isNegInfSplat(l) ? uncastFloat(r) : Value();
    auto xType = x ? dyn_cast<RankedTensorType>(x.getType()) : RankedTensorType();
    auto eqType = dyn_cast<RankedTensorType>(eq.getType());
    // The compare must not broadcast x (its result has x's shape).
    if (!xType || !eqType || xType.getShape() != eqType.getShape()) continue;
    uint32_t axis = all.getAxis();
    // The row maximum of x over the axis, NaN-propagating: an existing one
    // (the softmax's), else a new one.
    tosa::ReduceMaxOp max;
    for (Operation *user : x.getUsers())
      if (auto m = dyn_cast<tosa::ReduceMaxOp>(user);
          m && m.getAxis() == axis && m.getNanMode() == tosa::NanPropagationMode::PROPAGATE &&
          m->getBlock() == all->getBlock() && m->isBeforeInBlock(all))
        max = m;
    OpBuilder b(all);
    Location loc = all.getLoc();
    if (!max) {
      SmallVector<int64_t> shape(xType.getShape());
      shape[axis] = 1;
      max = tosa::ReduceMaxOp::create(b, loc, RankedTensorType::get(shape, xType.getElementType()), x,
                                      b.getI32IntegerAttr(int32_t(axis)));
    }
    // -inf of x's type, shaped to broadcast.
    auto maxType = cast<RankedTensorType>(max.getType());
    auto scalarType = RankedTensorType::get(SmallVector<int64_t>(maxType.getRank(), 1), xType.getElementType());
    auto fty = cast<FloatType>(xType.getElementType());
    Value negInf = tosa::ConstOp::create(
        b, loc, scalarType,
        DenseElementsAttr::get(scalarType, APFloat::getInf(fty.getFloatSemantics(), /*Negative=*/true)));
    auto result = tosa::EqualOp::create(b, loc, all.getType(), max.getResult(), negInf);
    all.getResult().replaceAllUsesWith(result.getResult());
    all.erase();
    if (eq->use_empty()) {
      Value in1 = eq.getInput1(), in2 = eq.getInput2();
      eq.erase();
      for (Value v : {in1, in2})
        if (auto cast = v.getDefiningOp<tosa::CastOp>(); cast && cast->use_empty()) cast.erase();
    }
    ++rewritten;
  }
}

/// The bounded pair `outer` ends: min(max(x, lo), hi) or max(min(x, hi), lo)
/// with uniform f32 constants lo <= hi, no broadcast of x, both ops
/// propagating NaN, the inner one read by `outer` alone.
struct BoundedPair {
  Value x;
  float lo, hi;
  Operation *inner;
};
template <typename Outer, typename Inner>
std::optional<BoundedPair> boundedPair(Outer outer) {
  auto type = dyn_cast<RankedTensorType>(outer.getType());
  if (!type || !type.getElementType().isF32() || outer.getNanMode() != tosa::NanPropagationMode::PROPAGATE)
    return std::nullopt;
  for (auto [innerSide, boundSide] : {std::pair{0, 1}, std::pair{1, 0}}) {
    auto inner = outer->getOperand(innerSide).template getDefiningOp<Inner>();
    std::optional<float> outerBound = uniformF32(outer->getOperand(boundSide));
    if (!inner || !outerBound || !inner->hasOneUse() || inner.getType() != type ||
        inner.getNanMode() != tosa::NanPropagationMode::PROPAGATE)
      continue;
    for (auto [xSide, innerBoundSide] : {std::pair{0, 1}, std::pair{1, 0}}) {
      Value x = inner->getOperand(xSide);
      std::optional<float> innerBound = uniformF32(inner->getOperand(innerBoundSide));
      if (x.getType() != type || !innerBound) continue;
      // min(max(x, lo), hi): the inner op is the maximum.
      float lo = std::is_same_v<Inner, tosa::MaximumOp> ? *innerBound : *outerBound;
      float hi = std::is_same_v<Inner, tosa::MaximumOp> ? *outerBound : *innerBound;
      if (lo <= hi) return BoundedPair{x, lo, hi, inner.getOperation()};
    }
  }
  return std::nullopt;
}

void boundsAsClamps(func::FuncOp fn, int64_t &rewritten) {
  SmallVector<Operation *> outers;
  fn.walk([&](Operation *op) {
    if (isa<tosa::MinimumOp, tosa::MaximumOp>(op)) outers.push_back(op);
  });
  llvm::DenseSet<Operation *> erased;  // inner ops of earlier matches (visited already: they come first)
  for (Operation *op : outers) {
    if (erased.contains(op)) continue;
    std::optional<BoundedPair> match;
    if (auto mn = dyn_cast<tosa::MinimumOp>(op)) match = boundedPair<tosa::MinimumOp, tosa::MaximumOp>(mn);
    else match = boundedPair<tosa::MaximumOp, tosa::MinimumOp>(cast<tosa::MaximumOp>(op));
    if (!match) continue;
    OpBuilder b(op);
    Type f32 = b.getF32Type();
    Value clamp = tosa::ClampOp::create(b, op->getLoc(), op->getResult(0).getType(), match->x,
                                        b.getFloatAttr(f32, match->lo), b.getFloatAttr(f32, match->hi));
    op->getResult(0).replaceAllUsesWith(clamp);
    op->erase();
    erased.insert(match->inner);
    match->inner->erase();  // its one reader was `op`
    ++rewritten;
  }
}

struct KilnFoldConstantsPass : public impl::KilnFoldConstantsBase<KilnFoldConstantsPass> {
  using Base::Base;
  void runOnOperation() override {
    int64_t ops = 0, intoConvs = 0, pows = 0, rowChecks = 0, clamps = 0;
    SmallVector<func::FuncOp> fns;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal()) fns.push_back(fn);
    // Part 1 in every function first: the blobs it makes are counted with
    // the model's own, once for the module (part 2 changes a blob in place
    // only where one constant in the whole module reads it).
    for (func::FuncOp fn : fns) foldConstantOps(fn, ops);
    llvm::DenseMap<const AsmResourceBlob *, int> blobReaders = countBlobReaders(getOperation());
    for (func::FuncOp fn : fns) {
      foldIntoConvolutions(fn, blobReaders, intoConvs);
      strengthReducePow(fn, pows);
      rowAllNegInfAsMax(fn, rowChecks);
      boundsAsClamps(fn, clamps);
    }
    numBoundsAsClamps += clamps;
    numFolded += ops;
    numIntoConvolutions += intoConvs;
    numPowReduced += pows;
    numRowAllNegInf += rowChecks;
  }
};

}  // namespace
}  // namespace kiln::lowering
