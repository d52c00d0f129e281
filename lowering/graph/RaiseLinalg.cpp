//===- RaiseLinalg.cpp - linalg-on-tensors input as TOSA -------------------===//
//
// kiln-raise-linalg: a model that arrives as linalg on tensors (torch-mlir's
// `linalg-on-tensors` output, hand-written linalg) gets the graph rewrites a
// TOSA model gets. kiln's graph work — layout transposes that cancel
// (kiln-propagate-transposes), batch norms folded into convolutions and
// constant subgraphs evaluated once (kiln-fold-constants), weights hoisted
// and stored in the layout their consumer reads, handwritten kernels chosen
// by measurement — is written against TOSA; on linalg input it did nothing,
// and NCHW named convolutions ran as scalar loops (ResNet-50: 95x slower
// than its TOSA export).
//
// Each op is raised on its own when TOSA expresses it exactly (same values
// up to the rounding of a reassociated division or average), static shapes
// only; an op that cannot be raised stays linalg, reading and feeding the
// same tensors, so a graph may mix both:
//
//   linalg.conv_2d_nchw_fchw, linalg.depthwise_conv_2d_nchw_chw,
//   linalg.conv_2d_nhwc_fhwc / _hwcf, linalg.pooling_nchw_max / _sum
//     -> tosa.conv2d / depthwise_conv2d / max_pool2d / avg_pool2d between
//        NCHW <-> NHWC transposes; a zero tensor.pad of the input becomes
//        the op's padding, a fill(0) init nothing, a broadcast 1-D init its
//        bias, any other init an add;
//   linalg.matmul, linalg.batch_matmul -> tosa.matmul (+ reshapes);
//   linalg.transpose, linalg.broadcast -> tosa.transpose, reshape + tile;
//   linalg.generic, every loop parallel, with a body of float arithmetic
//     (add, sub, mul, div, max, min, neg, exp, log, tanh, erf, rsqrt, abs,
//     floor, ceil, pow, compare + select; relu's compare + select is a
//     clamp) over inputs read through projections and broadcasts -> one
//     TOSA op per body op on operands reshaped and transposed into the loop
//     order; a reduction generic (sum, max, min over some loops) -> the
//     elementwise part, then tosa.reduce_* per reduced loop;
//   tensor.expand_shape / collapse_shape / pad / concat / extract_slice,
//     arith.constant tensors -> tosa.reshape / pad / concat / slice / const.
//
// KILN_RAISE_LINALG=0 leaves linalg input as it is (to compare).
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Passes.h"
#include "lowering/ir/TosaBuild.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"

#include <cfloat>
#include <cmath>
#include <numeric>
#include <optional>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNRAISELINALG
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

// ---------------------------------------------------------------------------
// Small builders.

RankedTensorType staticTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.hasStaticShape() ? r : RankedTensorType();
}

bool isF32Tensor(Value v) {
  auto t = staticTensor(v.getType());
  return t && t.getElementType().isF32();
}

/// Element types the elementwise raise takes: floats (f32, f64), booleans,
/// and the i32/i64 of index arithmetic (positions, masks, token ids).
bool raisableElement(Type t) {
  return t.isF32() || t.isF64() || t.isInteger(1) || t.isSignlessInteger(32) || t.isSignlessInteger(64);
}

/// A named op on tensors whose operands are all static f32 tensors: what
/// the conv, pool and matmul raisers take.
bool staticF32(linalg::LinalgOp op) {
  return op.hasPureTensorSemantics() && llvm::all_of(op->getOperands(), isF32Tensor);
}

Value reshape(ImplicitLocOpBuilder &b, Value v, ArrayRef<int64_t> shape) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape) return v;
  // A reshape of a reshape is one.
  if (auto inner = v.getDefiningOp<tosa::ReshapeOp>()) return reshape(b, inner.getInput1(), shape);
  return tosa::ReshapeOp::create(b, RankedTensorType::get(shape, t.getElementType()), v,
                                 tosa::getTosaConstShape(b, shape));
}

Value transpose(ImplicitLocOpBuilder &b, Value v, ArrayRef<int32_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int32_t(i);
  if (identity) return v;
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int32_t p : perm) shape.push_back(t.getDimSize(p));
  return tosa::TransposeOp::create(b, RankedTensorType::get(shape, t.getElementType()), v,
                                   b.getDenseI32ArrayAttr(perm));
}

Value splat(ImplicitLocOpBuilder &b, double value, int64_t rank, Type elementType = {}) {
  if (!elementType) elementType = b.getF32Type();
  auto type = RankedTensorType::get(SmallVector<int64_t>(rank, 1), elementType);
  if (isa<IntegerType>(elementType))
    return tosa::ConstOp::create(
        b, type, DenseElementsAttr::get(type, b.getIntegerAttr(elementType, APInt(elementType.getIntOrFloatBitWidth(),
                                                                                   uint64_t(int64_t(value)), true))));
  return tosa::ConstOp::create(b, type, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

Value zeros(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  return tosa::ConstOp::create(b, type, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0f)));
}

Value mulShift(ImplicitLocOpBuilder &b) {
  auto type = RankedTensorType::get({1}, b.getI8Type());
  return tosa::ConstOp::create(b, type, DenseElementsAttr::get(type, b.getI8IntegerAttr(0).getValue()));
}

/// Broadcast `v` (sizes 1 or equal) to `shape` with tosa.tile.
Value tileTo(ImplicitLocOpBuilder &b, Value v, ArrayRef<int64_t> shape) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape) return v;
  SmallVector<int64_t> multiples;
  for (int64_t i = 0; i < t.getRank(); ++i) multiples.push_back(t.getDimSize(i) == shape[i] ? 1 : shape[i]);
  return tosa::TileOp::create(b, RankedTensorType::get(shape, t.getElementType()), v,
                              tosa::getTosaConstShape(b, multiples));
}

/// A scalar computed from constants only (captured arith.constant, a
/// truncf/extf of one, arithmetic on them): torch-mlir computes batch
/// norm's epsilon as `arith.truncf %eps : f64 to f32` inside the body.
std::optional<double> constScalar(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def) return std::nullopt;
  if (auto c = dyn_cast<arith::ConstantOp>(def)) {
    if (auto f = dyn_cast<FloatAttr>(c.getValue())) return f.getValueAsDouble();
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()); i && !i.getType().isIndex()) return double(i.getInt());
    return std::nullopt;
  }
  auto unary = [&](auto fn) -> std::optional<double> {
    std::optional<double> x = constScalar(def->getOperand(0));
    if (!x) return std::nullopt;
    return fn(*x);
  };
  auto binary = [&](auto fn) -> std::optional<double> {
    std::optional<double> x = constScalar(def->getOperand(0)), y = constScalar(def->getOperand(1));
    if (!x || !y) return std::nullopt;
    return fn(*x, *y);
  };
  auto round = [&](double x) { return def->getResult(0).getType().isF32() ? double(float(x)) : x; };
  if (isa<arith::TruncFOp, arith::ExtFOp, arith::SIToFPOp>(def)) return unary([&](double x) { return round(x); });
  if (isa<arith::NegFOp>(def)) return unary([](double x) { return -x; });
  if (isa<arith::AddFOp>(def)) return binary([&](double x, double y) { return round(x + y); });
  if (isa<arith::SubFOp>(def)) return binary([&](double x, double y) { return round(x - y); });
  if (isa<arith::MulFOp>(def)) return binary([&](double x, double y) { return round(x * y); });
  if (isa<arith::DivFOp>(def)) return binary([&](double x, double y) { return round(x / y); });
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Elementwise and reduction generics.

/// A value of the body: a tensor in the loop order (rank = loops, size 1
/// where it is broadcast), or a scalar constant not yet materialized.
struct BodyValue {
  Value tensor;
  std::optional<double> scalar;
  Type scalarType = {};  // of `scalar` (f32 or f64)
};

class GenericRaiser {
public:
  GenericRaiser(ImplicitLocOpBuilder &b, linalg::GenericOp op) : b(b), op(op) {
    bounds = op.getStaticLoopRanges();
    rank = int64_t(bounds.size());
  }

  /// The raised value of the generic's one used result (softmax's max
  /// comes with an argmax nobody reads), or null.
  Value raise() {
    if (!op.hasPureTensorSemantics()) return {};
    for (Value v : op->getOperands())
      if (!staticTensor(v.getType())) return {};
    for (int64_t s : bounds)
      if (ShapedType::isDynamic(s)) return {};
    int64_t used = -1;
    for (OpResult r : op->getResults()) {
      if (r.use_empty()) continue;
      if (used >= 0) return {};
      used = r.getResultNumber();
    }
    if (used < 0) return {};
    resultIndex = unsigned(used);
    OpResult resultValue = op->getResult(resultIndex);
    if (!raisableElement(cast<RankedTensorType>(resultValue.getType()).getElementType())) return {};
    elementType = cast<RankedTensorType>(resultValue.getType()).getElementType();
    Block &body = op.getRegion().front();
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    BlockArgument outArg = body.getArgument(op.getNumDpsInputs() + resultIndex);
    AffineMap outMap = op.getIndexingMapsArray()[op.getNumDpsInputs() + resultIndex];

    SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
    SmallVector<int64_t> reduced;
    for (int64_t d = 0; d < rank; ++d)
      if (iters[d] == utils::IteratorType::reduction) reduced.push_back(d);

    Value result;
    if (reduced.empty()) {
      if (!outMap.isPermutation()) return {};
      std::optional<BodyValue> y = raiseValue(yield.getOperand(resultIndex));
      if (!y) return {};
      Value t = materialize(*y);
      if (!t) return {};
      t = tileTo(b, t, bounds);
      // Loop order -> the result's dimension order.
      SmallVector<int32_t> perm;
      for (AffineExpr e : outMap.getResults()) perm.push_back(int32_t(cast<AffineDimExpr>(e).getPosition()));
      result = transpose(b, t, perm);
    } else {
      // yield combine(x, out): sum, max or min of x over the reduced loops.
      Operation *combine = yield.getOperand(resultIndex).getDefiningOp();
      if (!combine || combine->getBlock() != &body || combine->getNumOperands() != 2) return {};
      if (!isa<arith::AddFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp, arith::AndIOp,
               arith::OrIOp>(combine))
        return {};
      bool logical = isa<arith::AndIOp, arith::OrIOp>(combine);
      if (logical != elementType.isInteger(1)) return {};
      Value x;
      if (combine->getOperand(1) == outArg) x = combine->getOperand(0);
      else if (combine->getOperand(0) == outArg) x = combine->getOperand(1);
      else return {};
      // Out's only use is the combine; the output map drops exactly the
      // reduced loops (or keeps them as constant 0s: unit dimensions).
      // (x may not read the accumulator: only the combine does.)
      forbidden = outArg;
      auto outType = cast<RankedTensorType>(resultValue.getType());
      SmallVector<int64_t> kept;
      for (auto [i, e] : llvm::enumerate(outMap.getResults())) {
        if (auto d = dyn_cast<AffineDimExpr>(e)) {
          if (llvm::is_contained(kept, int64_t(d.getPosition()))) return {};
          kept.push_back(d.getPosition());
        } else if (auto c = dyn_cast<AffineConstantExpr>(e); !c || c.getValue() != 0 || outType.getDimSize(i) != 1) {
          return {};
        }
      }
      for (int64_t d : reduced)
        if (llvm::is_contained(kept, d)) return {};
      if (int64_t(kept.size() + reduced.size()) != rank) return {};
      std::optional<BodyValue> xv = raiseValue(x);
      if (!xv) return {};
      Value t = materialize(*xv);
      if (!t) return {};
      t = tileTo(b, t, bounds);
      SmallVector<int64_t> shape(bounds);
      for (int64_t d : reduced) {
        shape[d] = 1;
        auto type = RankedTensorType::get(shape, elementType);
        IntegerAttr axis = b.getI32IntegerAttr(int32_t(d));
        if (isa<arith::AddFOp>(combine)) t = tosa::ReduceSumOp::create(b, type, t, axis);
        else if (isa<arith::AndIOp>(combine)) t = tosa::ReduceAllOp::create(b, type, t, axis);
        else if (isa<arith::OrIOp>(combine)) t = tosa::ReduceAnyOp::create(b, type, t, axis);
        else if (isa<arith::MaximumFOp>(combine)) t = tosa::ReduceMaxOp::create(b, type, t, axis);
        else if (isa<arith::MaxNumFOp>(combine))
          t = tosa::ReduceMaxOp::create(b, type, t, axis,
                                        tosa::NanPropagationModeAttr::get(b.getContext(), tosa::NanPropagationMode::IGNORE));
        else if (isa<arith::MinimumFOp>(combine)) t = tosa::ReduceMinOp::create(b, type, t, axis);
        else
          t = tosa::ReduceMinOp::create(b, type, t, axis,
                                        tosa::NanPropagationModeAttr::get(b.getContext(), tosa::NanPropagationMode::IGNORE));
      }
      // Drop the reduced loops (loop order of the kept ones), then into
      // the output's order.
      SmallVector<int64_t> keptSorted(kept), keptShape;
      llvm::sort(keptSorted);
      for (int64_t d : keptSorted) keptShape.push_back(bounds[d]);
      t = reshape(b, t, keptShape);
      SmallVector<int32_t> perm;
      for (int64_t d : kept) perm.push_back(int32_t(llvm::find(keptSorted, d) - keptSorted.begin()));
      t = reshape(b, transpose(b, t, perm), outType.getShape());
      // The init: the reduction's identity adds nothing; anything else is
      // combined with the result.
      Value init = op.getDpsInitOperand(resultIndex)->get();
      std::optional<double> fill;
      if (auto f = init.getDefiningOp<linalg::FillOp>()) fill = constScalar(f.getInputs()[0]);
      bool identity = false;
      if (fill) {
        if (isa<arith::AndIOp>(combine)) identity = *fill != 0.0;  // true
        else if (isa<arith::AddFOp, arith::OrIOp>(combine)) identity = *fill == 0.0;
        else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine)) identity = *fill == -INFINITY;
        else identity = *fill == INFINITY;
      }
      if (!identity && logical) return {};
      if (!identity) {
        auto type = cast<RankedTensorType>(t.getType());
        if (isa<arith::AddFOp>(combine)) t = tosa::AddOp::create(b, type, t, init);
        else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine)) t = tosa::MaximumOp::create(b, type, t, init);
        else t = tosa::MinimumOp::create(b, type, t, init);
      }
      result = t;
    }
    if (!result || result.getType() != resultValue.getType()) return {};
    return result;
  }

  /// Which result raise() raised.
  unsigned resultIndex = 0;

private:
  /// `v` (an operand of the generic read through `map`) in the loop
  /// order: constant-0 results (unit dimensions) dropped, the rest
  /// transposed into loop order, unit dimensions inserted for the loops it
  /// does not vary along.
  Value inLoopOrder(Value v, AffineMap map) {
    auto type = cast<RankedTensorType>(v.getType());
    Type et = type.getElementType();
    if (!raisableElement(et)) return {};
    // A broadcast that TOSA's own broadcasting does: read its source.
    if (auto tile = v.getDefiningOp<tosa::TileOp>()) v = tile.getInput1(), type = cast<RankedTensorType>(v.getType());
    SmallVector<std::pair<int64_t, int64_t>> dims;  // (loop, size)
    for (auto [i, e] : llvm::enumerate(map.getResults())) {
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        int64_t size = type.getDimSize(i);
        if (size != bounds[d.getPosition()] && size != 1) return {};
        for (auto &p : dims)
          if (p.first == d.getPosition()) return {};  // a diagonal
        dims.push_back({d.getPosition(), size});
        continue;
      }
      auto c = dyn_cast<AffineConstantExpr>(e);
      if (!c || c.getValue() != 0 || type.getDimSize(i) != 1) return {};
    }
    SmallVector<int64_t> keptShape;
    for (auto &p : dims) keptShape.push_back(p.second);
    v = reshape(b, v, keptShape);
    SmallVector<int32_t> perm(dims.size());
    std::iota(perm.begin(), perm.end(), 0);
    llvm::sort(perm, [&](int32_t x, int32_t y) { return dims[x].first < dims[y].first; });
    v = transpose(b, v, perm);
    SmallVector<int64_t> full(rank, 1);
    for (auto &p : dims) full[p.first] = p.second;
    return reshape(b, v, full);
  }

  Value materialize(const BodyValue &v) {
    if (v.tensor) return v.tensor;
    return splat(b, *v.scalar, rank, v.scalarType);
  }

  std::optional<BodyValue> raiseValue(Value v) {
    if (auto it = values.find(v); it != values.end()) return it->second;
    std::optional<BodyValue> r = compute(v);
    if (r) values[v] = *r;
    return r;
  }

  std::optional<BodyValue> compute(Value v) {
    Block &body = op.getRegion().front();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &body || v == forbidden) return std::nullopt;
      OpOperand &operand = op->getOpOperand(arg.getArgNumber());
      // Out is read only by an init that is also an input (copies).
      Value t = inLoopOrder(operand.get(), op.getMatchingIndexingMap(&operand));
      if (!t) return std::nullopt;
      return BodyValue{t, std::nullopt};
    }
    if (std::optional<double> c = constScalar(v)) {
      // Materialized as splats of their type (integer constants are read
      // directly where they may appear: fpowi's n).
      if (!raisableElement(v.getType()) || v.getType().isInteger(1)) return std::nullopt;
      return BodyValue{{}, c, v.getType()};
    }
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || def->getNumResults() != 1) return std::nullopt;
    Type type = v.getType();
    // A loop's index as a number (positions: torch's arange): a constant
    // 0, 1, ..., n-1 along that loop.
    if (auto cast = dyn_cast<arith::IndexCastOp>(def); cast && isa<IntegerType>(type))
      if (auto index = cast.getIn().getDefiningOp<linalg::IndexOp>()) {
        int64_t d = int64_t(index.getDim()), n = bounds[d];
        SmallVector<int64_t> shape(rank, 1);
        shape[d] = n;
        auto t = RankedTensorType::get(shape, type);
        SmallVector<APInt> values;
        for (int64_t i = 0; i < n; ++i) values.push_back(APInt(type.getIntOrFloatBitWidth(), uint64_t(i), true));
        return BodyValue{tosa::ConstOp::create(b, t, DenseElementsAttr::get(t, values)), std::nullopt};
      }
    if (!raisableElement(type)) return std::nullopt;

    // relu and its kin: select(cmp(x, c), x, c) is a clamp.
    if (auto sel = dyn_cast<arith::SelectOp>(def))
      if (std::optional<BodyValue> clamp = raiseClamp(sel)) return clamp;

    // x ** n with a constant integer n (kiln-fold-constants makes
    // multiplies of the small ones).
    if (auto powi = dyn_cast<math::FPowIOp>(def)) {
      std::optional<double> n = constScalar(powi.getRhs());
      std::optional<BodyValue> x = raiseValue(powi.getLhs());
      if (!n || !x || !x->tensor) return std::nullopt;
      Type et = cast<RankedTensorType>(x->tensor.getType()).getElementType();
      return BodyValue{tosa::PowOp::create(b, x->tensor.getType(), x->tensor, splat(b, *n, rank, et)), std::nullopt};
    }
    SmallVector<Value> operands;
    for (Value o : def->getOperands()) {
      std::optional<BodyValue> ov = raiseValue(o);
      if (!ov) return std::nullopt;
      Value t = materialize(*ov);
      if (!t) return std::nullopt;
      operands.push_back(t);
    }
    auto resultType = [&](Type element) {
      SmallVector<int64_t> shape(rank, 1);
      for (Value o : operands) {
        auto ot = cast<RankedTensorType>(o.getType());
        for (int64_t i = 0; i < rank; ++i) shape[i] = std::max(shape[i], ot.getDimSize(i));
      }
      return RankedTensorType::get(shape, element);
    };
    Type f32 = type, i1 = b.getI1Type();  // (f32: the op's float type)
    Value out;
    bool boolean = type.isInteger(1);
    if (isa<arith::AddIOp>(def) && !boolean) out = tosa::AddOp::create(b, resultType(type), operands[0], operands[1]);
    else if (isa<arith::SubIOp>(def) && !boolean)
      out = tosa::SubOp::create(b, resultType(type), operands[0], operands[1]);
    else if (isa<arith::MulIOp>(def) && !boolean)
      out = tosa::MulOp::create(b, resultType(type), operands[0], operands[1], mulShift(b));
    else if (isa<arith::AndIOp>(def))
      out = boolean ? Value(tosa::LogicalAndOp::create(b, resultType(type), operands[0], operands[1]))
                    : Value(tosa::BitwiseAndOp::create(b, resultType(type), operands[0], operands[1]));
    else if (isa<arith::OrIOp>(def))
      out = boolean ? Value(tosa::LogicalOrOp::create(b, resultType(type), operands[0], operands[1]))
                    : Value(tosa::BitwiseOrOp::create(b, resultType(type), operands[0], operands[1]));
    else if (isa<arith::XOrIOp>(def))
      out = boolean ? Value(tosa::LogicalXorOp::create(b, resultType(type), operands[0], operands[1]))
                    : Value(tosa::BitwiseXorOp::create(b, resultType(type), operands[0], operands[1]));
    else if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
      using P = arith::CmpIPredicate;
      Value x = operands[0], y = operands[1];
      switch (cmp.getPredicate()) {
      case P::sgt: out = tosa::GreaterOp::create(b, resultType(i1), x, y); break;
      case P::sge: out = tosa::GreaterEqualOp::create(b, resultType(i1), x, y); break;
      case P::slt: out = tosa::GreaterOp::create(b, resultType(i1), y, x); break;
      case P::sle: out = tosa::GreaterEqualOp::create(b, resultType(i1), y, x); break;
      case P::eq: out = tosa::EqualOp::create(b, resultType(i1), x, y); break;
      case P::ne: out = tosa::LogicalNotOp::create(b, resultType(i1), tosa::EqualOp::create(b, resultType(i1), x, y)); break;
      default: return std::nullopt;  // unsigned orders
      }
    } else if (isa<arith::AddFOp>(def)) out = tosa::AddOp::create(b, resultType(f32), operands[0], operands[1]);
    else if (isa<arith::SubFOp>(def)) out = tosa::SubOp::create(b, resultType(f32), operands[0], operands[1]);
    else if (isa<arith::MulFOp>(def))
      out = tosa::MulOp::create(b, resultType(f32), operands[0], operands[1], mulShift(b));
    else if (isa<arith::DivFOp>(def)) {
      auto rt = cast<RankedTensorType>(operands[1].getType());
      Value r = tosa::ReciprocalOp::create(b, rt, operands[1]);
      out = tosa::MulOp::create(b, resultType(f32), operands[0], r, mulShift(b));
    } else if (isa<arith::MaximumFOp>(def))
      out = tosa::MaximumOp::create(b, resultType(f32), operands[0], operands[1]);
    else if (isa<arith::MinimumFOp>(def))
      out = tosa::MinimumOp::create(b, resultType(f32), operands[0], operands[1]);
    else if (isa<arith::MaxNumFOp>(def))
      out = tosa::MaximumOp::create(b, resultType(f32), operands[0], operands[1],
                                    tosa::NanPropagationModeAttr::get(b.getContext(), tosa::NanPropagationMode::IGNORE));
    else if (isa<arith::MinNumFOp>(def))
      out = tosa::MinimumOp::create(b, resultType(f32), operands[0], operands[1],
                                    tosa::NanPropagationModeAttr::get(b.getContext(), tosa::NanPropagationMode::IGNORE));
    else if (isa<arith::NegFOp>(def)) out = tosa::NegateOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::ExpOp>(def)) out = tosa::ExpOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::LogOp>(def)) out = tosa::LogOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::TanhOp>(def)) out = tosa::TanhOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::ErfOp>(def)) out = tosa::ErfOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::RsqrtOp>(def)) out = tosa::RsqrtOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::AbsFOp>(def)) out = tosa::AbsOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::FloorOp>(def)) out = tosa::FloorOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::CeilOp>(def)) out = tosa::CeilOp::create(b, resultType(f32), operands[0]);
    else if (isa<math::SqrtOp>(def)) {
      out = tosa::PowOp::create(b, resultType(f32), operands[0], splat(b, 0.5, rank, type));
    } else if (isa<math::PowFOp>(def)) out = tosa::PowOp::create(b, resultType(f32), operands[0], operands[1]);
    else if (auto cmp = dyn_cast<arith::CmpFOp>(def)) {
      using P = arith::CmpFPredicate;
      Value x = operands[0], y = operands[1];
      switch (cmp.getPredicate()) {
      case P::OGT: case P::UGT: out = tosa::GreaterOp::create(b, resultType(i1), x, y); break;
      case P::OGE: case P::UGE: out = tosa::GreaterEqualOp::create(b, resultType(i1), x, y); break;
      case P::OLT: case P::ULT: out = tosa::GreaterOp::create(b, resultType(i1), y, x); break;
      case P::OLE: case P::ULE: out = tosa::GreaterEqualOp::create(b, resultType(i1), y, x); break;
      case P::OEQ: case P::UEQ: out = tosa::EqualOp::create(b, resultType(i1), x, y); break;
      default: return std::nullopt;
      }
    } else if (isa<arith::ExtFOp, arith::TruncFOp>(def)) {
      out = tosa::CastOp::create(b, resultType(type), operands[0]);
    } else if (isa<arith::SelectOp>(def)) {
      if (!def->getOperand(0).getType().isInteger(1)) return std::nullopt;
      out = tosa::SelectOp::create(b, resultType(type), operands[0], operands[1], operands[2]);
    } else {
      return std::nullopt;
    }
    return BodyValue{out, std::nullopt};
  }

  /// select(x > c, x, c) is max(x, c) and select(x > c, c, x) min(x, c)
  /// (>=, <, <=, either side, ordered or not, alike): tosa.clamp, what
  /// relu and relu6 are in TOSA (and what fuses into a conv's epilogue).
  /// NaN aside (compare-and-select passes or drops it by the predicate's
  /// order, a clamp propagates it).
  std::optional<BodyValue> raiseClamp(arith::SelectOp sel) {
    auto cmp = sel.getCondition().getDefiningOp<arith::CmpFOp>();
    if (!cmp || cmp->getBlock() != sel->getBlock()) return std::nullopt;
    using P = arith::CmpFPredicate;
    P p = cmp.getPredicate();
    bool greater = p == P::OGT || p == P::UGT || p == P::OGE || p == P::UGE;
    bool less = p == P::OLT || p == P::ULT || p == P::OLE || p == P::ULE;
    if (!greater && !less) return std::nullopt;
    Value x = cmp.getLhs();
    std::optional<double> c = constScalar(cmp.getRhs());
    if (!c) {  // c < x is x > c
      x = cmp.getRhs();
      c = constScalar(cmp.getLhs());
      std::swap(greater, less);
    }
    if (!c || !std::isfinite(*c) || constScalar(x)) return std::nullopt;
    bool max;  // the result is max(x, c), else min(x, c)
    std::optional<double> t = constScalar(sel.getTrueValue()), f = constScalar(sel.getFalseValue());
    if (sel.getTrueValue() == x && f && *f == *c) max = greater;
    else if (sel.getFalseValue() == x && t && *t == *c) max = less;
    else return std::nullopt;
    std::optional<BodyValue> xv = raiseValue(x);
    if (!xv || !xv->tensor) return std::nullopt;
    Type et = cast<RankedTensorType>(xv->tensor.getType()).getElementType();
    double top = et.isF64() ? DBL_MAX : FLT_MAX;
    double lo = max ? *c : -top, hi = max ? top : *c;
    // clamp(clamp(x, lo, inf), -inf, hi) is one clamp (relu6).
    Value in = xv->tensor;
    bool onlyHere = llvm::all_of(x.getUsers(), [&](Operation *u) { return u == cmp || u == sel; });
    if (auto inner = in.getDefiningOp<tosa::ClampOp>(); inner && onlyHere && in.use_empty()) {
      auto innerLo = dyn_cast<FloatAttr>(inner.getMinValAttr()), innerHi = dyn_cast<FloatAttr>(inner.getMaxValAttr());
      if (innerLo && innerHi) {
        lo = std::max(lo, innerLo.getValueAsDouble());
        hi = std::min(hi, innerHi.getValueAsDouble());
        if (lo <= hi) in = inner.getInput();
        else lo = max ? *c : -top, hi = max ? top : *c;
      }
    }
    Value out = tosa::ClampOp::create(b, in.getType(), in, b.getFloatAttr(et, lo), b.getFloatAttr(et, hi));
    return BodyValue{out, std::nullopt};
  }

  ImplicitLocOpBuilder &b;
  linalg::GenericOp op;
  SmallVector<int64_t> bounds;
  int64_t rank = 0;
  llvm::DenseMap<Value, BodyValue> values;
  Type elementType;  // of the raised result
  Value forbidden;  // a reduction's accumulator
};

// ---------------------------------------------------------------------------
// Convolutions and pools.

/// The input of a window op with its zero (or, for max pools, lowest)
/// tensor.pad on the spatial dimensions `h`, `w` folded in: [top, bottom,
/// left, right].
struct PaddedInput {
  Value input;
  SmallVector<int64_t, 4> pad = {0, 0, 0, 0};
};

PaddedInput foldPad(Value input, int64_t h, int64_t w, bool maxPool) {
  PaddedInput r{input};
  auto pad = input.getDefiningOp<tensor::PadOp>();
  if (!pad || !staticTensor(pad.getSource().getType())) return r;
  std::optional<double> value;
  if (Value c = pad.getConstantPaddingValue()) value = constScalar(c);
  if (!value) return r;
  if (maxPool ? !(*value <= -FLT_MAX) : *value != 0.0) return r;
  ArrayRef<int64_t> lo = pad.getStaticLow(), hi = pad.getStaticHigh();
  for (int64_t i = 0; i < int64_t(lo.size()); ++i) {
    if (ShapedType::isDynamic(lo[i]) || ShapedType::isDynamic(hi[i]) || lo[i] < 0 || hi[i] < 0) return r;
    if (i != h && i != w && (lo[i] != 0 || hi[i] != 0)) return r;
  }
  r.input = pad.getSource();
  r.pad = {lo[h], hi[h], lo[w], hi[w]};
  return r;
}

/// TOSA wants (in - 1 + pads - (k - 1) * dilation) divisible by the
/// stride; the rows past the last window are dropped: from the bottom (or
/// right) padding first, then from the input (tosa.slice).
bool exactWindows(ImplicitLocOpBuilder &b, Value &nhwc, SmallVector<int64_t, 4> &pad, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> stride, ArrayRef<int64_t> dilation) {
  auto type = cast<RankedTensorType>(nhwc.getType());
  SmallVector<int64_t> size(type.getShape());
  bool slice = false;
  for (int i = 0; i < 2; ++i) {
    int64_t span = size[1 + i] - 1 + pad[2 * i] + pad[2 * i + 1] - (kernel[i] - 1) * dilation[i];
    if (span < 0) return false;
    int64_t extra = span % stride[i];
    int64_t fromPad = std::min(extra, pad[2 * i + 1]);
    pad[2 * i + 1] -= fromPad;
    extra -= fromPad;
    if (extra > 0) size[1 + i] -= extra, slice = true;
  }
  if (slice)
    nhwc = tosa::SliceOp::create(b, RankedTensorType::get(size, type.getElementType()), nhwc,
                                 tosa::getTosaConstShape(b, SmallVector<int64_t>(4, 0)),
                                 tosa::getTosaConstShape(b, size));
  return true;
}

SmallVector<int64_t> attrValues(DenseIntElementsAttr a) {
  SmallVector<int64_t> v;
  for (const APInt &x : a.getValues<APInt>()) v.push_back(x.getSExtValue());
  return v;
}

constexpr int32_t kToNHWC[] = {0, 2, 3, 1}, kToNCHW[] = {0, 3, 1, 2};

/// The conv's init as a bias: a fill of 0 (none), a 1-D tensor broadcast
/// along the channels (`channelDim` of the output), else null (an add).
std::optional<Value> biasOf(ImplicitLocOpBuilder &b, Value init, int64_t channelDim, int64_t channels) {
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    std::optional<double> c = constScalar(fill.getInputs()[0]);
    if (c && *c == 0.0) return zeros(b, {channels});
    return std::nullopt;
  }
  if (auto br = init.getDefiningOp<linalg::BroadcastOp>()) {
    auto bt = staticTensor(br.getInput().getType());
    ArrayRef<int64_t> dims = br.getDimensions();
    if (!bt || bt.getRank() != 1 || bt.getDimSize(0) != channels || !bt.getElementType().isF32() ||
        llvm::is_contained(dims, channelDim) || int64_t(dims.size()) != br.getInit().getType().getRank() - 1)
      return std::nullopt;
    return br.getInput();
  }
  if (auto g = init.getDefiningOp<linalg::GenericOp>()) {
    if (g.getNumDpsInputs() != 1 || g->getNumResults() != 1) return std::nullopt;
    Block &body = g.getRegion().front();
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    if (yield.getOperand(0) != body.getArgument(0)) return std::nullopt;
    AffineMap in = g.getIndexingMapsArray()[0], out = g.getIndexingMapsArray()[1];
    if (!out.isIdentity() || in.getNumResults() != 1) return std::nullopt;
    auto d = dyn_cast<AffineDimExpr>(in.getResult(0));
    Value bias = g.getDpsInputOperand(0)->get();
    auto bt = staticTensor(bias.getType());
    if (!d || int64_t(d.getPosition()) != channelDim || !bt || bt.getRank() != 1 || bt.getDimSize(0) != channels ||
        !bt.getElementType().isF32())
      return std::nullopt;
    return bias;
  }
  return std::nullopt;
}

template <typename NchwOp>
Value raiseNchwWindow(ImplicitLocOpBuilder &b, NchwOp op) {
  if (!staticF32(op)) return {};
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> stride = attrValues(op.getStrides()), dilation = attrValues(op.getDilations());
  constexpr bool isConv = std::is_same_v<NchwOp, linalg::Conv2DNchwFchwOp>;
  constexpr bool isDepthwise = std::is_same_v<NchwOp, linalg::DepthwiseConv2DNchwChwOp>;
  constexpr bool isMax = std::is_same_v<NchwOp, linalg::PoolingNchwMaxOp>;
  PaddedInput in = foldPad(op.getInputs()[0], 2, 3, isMax);
  auto filterType = cast<RankedTensorType>(op.getInputs()[1].getType());
  SmallVector<int64_t> kernel = {filterType.getDimSize(filterType.getRank() - 2),
                                 filterType.getDimSize(filterType.getRank() - 1)};
  Value init = op.getOutputs()[0];
  Value x = transpose(b, in.input, kToNHWC);
  if (!exactWindows(b, x, in.pad, kernel, stride, dilation)) return {};
  auto nhwcOut = RankedTensorType::get({outType.getDimSize(0), outType.getDimSize(2), outType.getDimSize(3),
                                        outType.getDimSize(1)},
                                       b.getF32Type());
  Value y;
  if constexpr (isConv || isDepthwise) {
    int64_t channels = outType.getDimSize(1);
    std::optional<Value> bias = biasOf(b, init, 1, channels);
    Value zero = zeros(b, {channels});
    Value filter = op.getInputs()[1];
    TypeAttr acc = TypeAttr::get(b.getF32Type());
    if constexpr (isConv) {
      filter = transpose(b, filter, kToNHWC);  // FCHW -> FHWC (OHWI)
      y = tosa::Conv2DOp::create(b, nhwcOut, x, filter, bias.value_or(zero), b.getDenseI64ArrayAttr(in.pad),
                                 b.getDenseI64ArrayAttr(stride), b.getDenseI64ArrayAttr(dilation), acc);
    } else {
      // CHW -> HWC -> HWC1 (one filter per channel).
      filter = transpose(b, filter, ArrayRef<int32_t>{1, 2, 0});
      filter = reshape(b, filter, {kernel[0], kernel[1], channels, 1});
      y = tosa::DepthwiseConv2DOp::create(b, nhwcOut, x, filter, bias.value_or(zero), b.getDenseI64ArrayAttr(in.pad),
                                          b.getDenseI64ArrayAttr(stride), b.getDenseI64ArrayAttr(dilation), acc);
    }
    y = transpose(b, y, kToNCHW);
    if (!bias) y = tosa::AddOp::create(b, outType, y, init);
  } else {
    for (int64_t d : dilation)
      if (d != 1) return {};
    if constexpr (isMax) {
      // Padding is never the maximum: TOSA's max pool ignores it, and
      // wants it smaller than the window.
      if (in.pad[0] >= kernel[0] || in.pad[1] >= kernel[0] || in.pad[2] >= kernel[1] || in.pad[3] >= kernel[1])
        return {};
      y = tosa::MaxPool2dOp::create(b, nhwcOut, x, kernel, stride, in.pad);
      y = transpose(b, y, kToNCHW);
      auto fill = init.getDefiningOp<linalg::FillOp>();
      std::optional<double> c = fill ? constScalar(fill.getInputs()[0]) : std::nullopt;
      if (!c || !(*c <= -FLT_MAX)) y = tosa::MaximumOp::create(b, outType, y, init);
    } else {
      // A sum is the average times the window (no padding: TOSA's
      // average leaves it out of the count).
      if (llvm::any_of(in.pad, [](int64_t p) { return p != 0; })) return {};
      TypeAttr acc = TypeAttr::get(b.getF32Type());
      y = tosa::AvgPool2dOp::create(b, nhwcOut, x, b.getDenseI64ArrayAttr(kernel), b.getDenseI64ArrayAttr(stride),
                                    b.getDenseI64ArrayAttr(in.pad), acc);
      y = tosa::MulOp::create(b, nhwcOut, y, splat(b, double(kernel[0] * kernel[1]), 4), mulShift(b));
      y = transpose(b, y, kToNCHW);
      auto fill = init.getDefiningOp<linalg::FillOp>();
      std::optional<double> c = fill ? constScalar(fill.getInputs()[0]) : std::nullopt;
      if (!c || *c != 0.0) y = tosa::AddOp::create(b, outType, y, init);
    }
  }
  return y.getType() == outType ? y : Value();
}

/// The accumulator: a fill of 0 adds nothing, anything else is added.
Value addInit(ImplicitLocOpBuilder &b, Value y, Value init) {
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    if (std::optional<double> c = constScalar(fill.getInputs()[0]); c && *c == 0.0) return y;
  return tosa::AddOp::create(b, y.getType(), y, init);
}

/// A grouped conv (NGCHW input, GFCHW filter: ResNeXt, RegNet) has no TOSA
/// form: it becomes kiln's grouped conv op (tosa.custom kiln.grouped_conv2d,
/// lowering/ir/Conventions.h) between the same layout transposes as the
/// other convs (so that they cancel with its neighbours'), its filter
/// transposed to GFHWC (folded at load) and its zero padding a tosa.pad. A
/// kernel plan runs it on its kernel; generated code lowers it to
/// linalg.conv_2d_nhwgc_gfhwc (kiln-grouped-conv-to-linalg), which
/// kiln-cpu-strategy runs as a loop over the groups of NHWC convs
/// (groupedConvsAsLoops).
Value raiseGroupedConv(ImplicitLocOpBuilder &b, linalg::Conv2DNgchwGfchwOp op) {
  if (!staticF32(op)) return {};
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());  // N G Fg OH OW
  auto inType = cast<RankedTensorType>(op.getInputs()[0].getType());  // N G Cg H W
  auto fType = cast<RankedTensorType>(op.getInputs()[1].getType());   // G Fg Cg KH KW
  int64_t n = inType.getDimSize(0), groups = inType.getDimSize(1), cg = inType.getDimSize(2);
  int64_t fg = fType.getDimSize(1), oh = outType.getDimSize(3), ow = outType.getDimSize(4);
  // The NCHW tensor the grouped view was made from (and its zero pad).
  Value x4;
  if (auto e = op.getInputs()[0].getDefiningOp<tensor::ExpandShapeOp>();
      e && e.getSrcType().getRank() == 4 && e.getReassociationIndices()[1].size() == 2)
    x4 = e.getSrc();
  else
    x4 = reshape(b, op.getInputs()[0], {n, groups * cg, inType.getDimSize(3), inType.getDimSize(4)});
  PaddedInput in = foldPad(x4, 2, 3, false);
  Value x = transpose(b, in.input, kToNHWC);
  if (llvm::any_of(in.pad, [](int64_t p) { return p != 0; }))
    x = tosaPad(b, x, {0, 0, in.pad[0], in.pad[1], in.pad[2], in.pad[3], 0, 0}, 0.0);
  auto xt = cast<RankedTensorType>(x.getType());
  x = reshape(b, x, {n, xt.getDimSize(1), xt.getDimSize(2), groups, cg});
  Value filter = transpose(b, op.getInputs()[1], ArrayRef<int32_t>{0, 1, 3, 4, 2});  // GFCHW -> GFHWC
  auto accType = RankedTensorType::get({n, oh, ow, groups, fg}, b.getF32Type());
  auto conv = tosa::CustomOp::create(b, TypeRange{accType}, kGroupedConvOp, kWinogradDomain, "", ValueRange{x, filter});
  conv->setAttr("stride", b.getDenseI64ArrayAttr(attrValues(op.getStrides())));
  conv->setAttr("dilation", b.getDenseI64ArrayAttr(attrValues(op.getDilations())));
  Value y = conv->getResult(0);
  y = reshape(b, transpose(b, reshape(b, y, {n, oh, ow, groups * fg}), kToNCHW), outType.getShape());
  return addInit(b, y, op.getOutputs()[0]);
}

/// NHWC convs (hand-written linalg; what tosa-to-linalg itself makes).
template <typename NhwcOp>
Value raiseNhwcConv(ImplicitLocOpBuilder &b, NhwcOp op) {
  if (!staticF32(op)) return {};
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> stride = attrValues(op.getStrides()), dilation = attrValues(op.getDilations());
  PaddedInput in = foldPad(op.getInputs()[0], 1, 2, false);
  Value filter = op.getInputs()[1];
  if constexpr (std::is_same_v<NhwcOp, linalg::Conv2DNhwcHwcfOp>) filter = transpose(b, filter, kToNCHW);  // -> FHWC
  auto ft = cast<RankedTensorType>(filter.getType());
  SmallVector<int64_t> kernel = {ft.getDimSize(1), ft.getDimSize(2)};
  Value x = in.input;
  if (!exactWindows(b, x, in.pad, kernel, stride, dilation)) return {};
  int64_t channels = outType.getDimSize(3);
  Value init = op.getOutputs()[0];
  std::optional<Value> bias = biasOf(b, init, 3, channels);
  Value y = tosa::Conv2DOp::create(b, outType, x, filter, bias.value_or(zeros(b, {channels})),
                                   b.getDenseI64ArrayAttr(in.pad), b.getDenseI64ArrayAttr(stride),
                                   b.getDenseI64ArrayAttr(dilation), TypeAttr::get(b.getF32Type()));
  if (!bias) y = tosa::AddOp::create(b, outType, y, init);
  return y;
}

// ---------------------------------------------------------------------------
// Matmuls, layout ops, tensor ops.

Value raiseMatmul(ImplicitLocOpBuilder &b, linalg::LinalgOp op) {
  if (!staticF32(op)) return {};
  bool batched = isa<linalg::BatchMatmulOp>(op);
  if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation()); mm && mm.hasUserDefinedMaps()) return {};
  if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation()); bmm && bmm.hasUserDefinedMaps()) return {};
  if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op)) return {};
  // No casts in the body (matmul's cast attribute is for mixed types).
  Value a = op.getDpsInputOperand(0)->get(), bm = op.getDpsInputOperand(1)->get();
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  auto at = cast<RankedTensorType>(a.getType()), bt = cast<RankedTensorType>(bm.getType());
  if (!batched) {
    a = reshape(b, a, {1, at.getDimSize(0), at.getDimSize(1)});
    bm = reshape(b, bm, {1, bt.getDimSize(0), bt.getDimSize(1)});
  }
  auto t3 = batched ? outType
                    : RankedTensorType::get({1, outType.getDimSize(0), outType.getDimSize(1)}, b.getF32Type());
  Value y = tosa::MatMulOp::create(b, t3, a, bm);
  y = reshape(b, y, outType.getShape());
  return addInit(b, y, op.getDpsInitOperand(0)->get());
}

/// A linalg.generic that reads one tensor it captures with tensor.extract
/// at indices that are loop indices (in order) or constants, and yields the
/// element: torch-mlir's form of a broadcast whose sizes were dynamic
/// (BERT's mask and LayerNorm statistics from the ONNX route). It is a
/// slice of the constant-indexed dims, a reshape, a tile.
Value raiseExtractBroadcast(ImplicitLocOpBuilder &b, linalg::GenericOp g) {
  if (!g.hasPureTensorSemantics() || g.getNumResults() != 1 || g.getNumDpsInputs() != 0) return {};
  auto outType = staticTensor(g.getResult(0).getType());
  if (!outType || !g.getIndexingMapsArray()[0].isIdentity()) return {};
  Block &body = g.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto extract = yield.getNumOperands() == 1 ? yield.getOperand(0).getDefiningOp<tensor::ExtractOp>() : nullptr;
  if (!extract || extract->getBlock() != &body || !body.getArgument(0).use_empty()) return {};
  auto src = staticTensor(extract.getTensor().getType());
  if (!src || extract.getTensor().getParentBlock() == &body) return {};
  for (Operation &inner : body)
    if (!isa<linalg::IndexOp, arith::ConstantOp, tensor::ExtractOp, linalg::YieldOp>(inner)) return {};
  SmallVector<int64_t> offsets, sizes, shape(outType.getRank(), 1);
  int64_t lastLoop = -1;
  for (auto [d, index] : llvm::enumerate(extract.getIndices())) {
    if (auto loop = index.getDefiningOp<linalg::IndexOp>()) {
      int64_t k = int64_t(loop.getDim());
      if (k <= lastLoop || src.getDimSize(d) < outType.getDimSize(k)) return {};  // in order, in bounds
      lastLoop = k;
      offsets.push_back(0), sizes.push_back(outType.getDimSize(k));
      shape[k] = outType.getDimSize(k);
    } else if (auto c = getConstantIntValue(index)) {
      if (*c < 0 || *c >= src.getDimSize(d)) return {};
      offsets.push_back(*c), sizes.push_back(1);
    } else {
      return {};
    }
  }
  Value y = extract.getTensor();
  if (ArrayRef<int64_t>(sizes) != src.getShape())
    y = tosa::SliceOp::create(b, RankedTensorType::get(sizes, src.getElementType()), y,
                              tosa::getTosaConstShape(b, offsets), tosa::getTosaConstShape(b, sizes));
  return tileTo(b, reshape(b, y, shape), outType.getShape());
}

/// A linalg.generic that reads rows of a captured 2-D table at indices from
/// its one input: y[i, j] = table[idx[i], j] (an embedding lookup; or
/// table[idx[i], c] into a 1-wide output), the index through
/// arith.index_cast. tosa.gather of the table's rows; its kernel checks the
/// indices (out of range is an error naming it, where the extract was
/// undefined).
Value raiseExtractGather(ImplicitLocOpBuilder &b, linalg::GenericOp g) {
  if (!g.hasPureTensorSemantics() || g.getNumResults() != 1 || g.getNumDpsInputs() != 1) return {};
  auto outType = staticTensor(g.getResult(0).getType());
  auto idxType = staticTensor(g.getDpsInputs()[0].getType());
  if (!outType || !idxType || outType.getRank() != 2 || idxType.getRank() != 1 ||
      !isa<IntegerType>(idxType.getElementType()) || idxType.getElementType().isInteger(1))
    return {};
  auto maps = g.getIndexingMapsArray();
  MLIRContext *ctx = g.getContext();
  if (maps[0] != AffineMap::get(2, 0, getAffineDimExpr(0, ctx)) || !maps[1].isIdentity()) return {};
  Block &body = g.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto extract = yield.getOperand(0).getDefiningOp<tensor::ExtractOp>();
  if (!extract || extract->getBlock() != &body || !body.getArgument(1).use_empty()) return {};
  auto table = staticTensor(extract.getTensor().getType());
  if (!table || table.getRank() != 2 || extract.getTensor().getParentBlock() == &body) return {};
  auto row = extract.getIndices()[0].getDefiningOp<arith::IndexCastOp>();
  if (!row || row.getIn() != body.getArgument(0)) return {};
  int64_t n = outType.getDimSize(0), width = outType.getDimSize(1);
  Value values = extract.getTensor();
  Value column = extract.getIndices()[1];
  if (auto loop = column.getDefiningOp<linalg::IndexOp>(); loop && loop.getDim() == 1 && width == table.getDimSize(1)) {
    // whole rows
  } else if (std::optional<int64_t> c = getConstantIntValue(column); c && width == 1 && *c >= 0 &&
                                                                      *c < table.getDimSize(1)) {
    SmallVector<int64_t> offsets = {0, *c}, sizes = {table.getDimSize(0), 1};
    values = tosa::SliceOp::create(b, RankedTensorType::get(sizes, table.getElementType()), values,
                                   tosa::getTosaConstShape(b, offsets), tosa::getTosaConstShape(b, sizes));
  } else {
    return {};
  }
  for (Operation &inner : body)
    if (!isa<linalg::IndexOp, arith::IndexCastOp, arith::ConstantOp, tensor::ExtractOp, linalg::YieldOp>(inner))
      return {};
  Value idx = g.getDpsInputs()[0];
  if (!idxType.getElementType().isSignlessInteger(32))
    idx = tosa::CastOp::create(b, RankedTensorType::get(idxType.getShape(), b.getI32Type()), idx);
  Value y = tosa::GatherOp::create(b, RankedTensorType::get({1, n, width}, table.getElementType()),
                                   reshape(b, values, {1, table.getDimSize(0), width}), reshape(b, idx, {1, n}));
  return reshape(b, y, outType.getShape());
}

Value raiseOther(ImplicitLocOpBuilder &b, Operation *op) {
  if (op->getNumResults() != 1) return {};
  // cast (static -> dynamic), tensor.reshape to a constant shape, cast
  // (-> static): torch-mlir's reshape whose sizes were dynamic at export.
  if (auto cast = dyn_cast<tensor::CastOp>(op)) {
    auto outType = staticTensor(cast.getType());
    auto r = cast.getSource().getDefiningOp<tensor::ReshapeOp>();
    auto in = r ? r.getSource().getDefiningOp<tensor::CastOp>() : nullptr;
    auto inType = in ? staticTensor(in.getSource().getType()) : nullptr;
    DenseIntElementsAttr shape;
    if (!outType || !inType || !matchPattern(r.getShape(), m_Constant(&shape)) ||
        inType.getNumElements() != outType.getNumElements())
      return {};
    SmallVector<int64_t> dims;
    for (const APInt &v : shape.getValues<APInt>()) dims.push_back(v.getSExtValue());
    if (ArrayRef<int64_t>(dims) != outType.getShape()) return {};
    return reshape(b, in.getSource(), outType.getShape());
  }
  if (op->getNumResults() != 1) return {};
  auto outType = staticTensor(op->getResult(0).getType());
  if (!outType) return {};
  for (Value v : op->getOperands())
    if (isa<mlir::TensorType>(v.getType()) && !staticTensor(v.getType())) return {};
  Type element = outType.getElementType();
  if (!raisableElement(element)) return {};  // data movement: any of them; arithmetic: f32 below
  // A tensor filled with a constant (torch-mlir's scalars as 0-d tensors)
  // that generics read as an input. (A fill that inits a conv, a matmul or
  // a reduction stays: their raisers read it as "starts from 0".)
  if (auto f = dyn_cast<linalg::FillOp>(op)) {
    bool readOnly = llvm::all_of(f->getUses(), [](OpOperand &use) {
      auto g = dyn_cast<linalg::GenericOp>(use.getOwner());
      return g && g.isDpsInput(&use);
    });
    std::optional<double> value =
        readOnly && f.hasPureTensorSemantics() ? constScalar(f.getInputs()[0]) : std::nullopt;
    if (!value || f.getInputs()[0].getType() != element) return {};
    Value one = splat(b, *value, outType.getRank(), element);
    return tileTo(b, one, outType.getShape());
  }

  if (auto t = dyn_cast<linalg::TransposeOp>(op)) {
    if (!t.hasPureTensorSemantics()) return {};
    SmallVector<int32_t> perm(t.getPermutation().begin(), t.getPermutation().end());
    return transpose(b, t.getInput(), perm);
  }
  if (auto br = dyn_cast<linalg::BroadcastOp>(op)) {
    if (!br.hasPureTensorSemantics()) return {};
    SmallVector<int64_t> shape(outType.getShape());
    for (int64_t d : br.getDimensions()) shape[d] = 1;
    return tileTo(b, reshape(b, br.getInput(), shape), outType.getShape());
  }
  if (auto e = dyn_cast<tensor::ExpandShapeOp>(op)) return reshape(b, e.getSrc(), outType.getShape());
  if (auto c = dyn_cast<tensor::CollapseShapeOp>(op)) return reshape(b, c.getSrc(), outType.getShape());
  if (auto p = dyn_cast<tensor::PadOp>(op)) {
    if (!element.isF32()) return {};
    if (p.getNofold()) return {};
    Value padValue = p.getConstantPaddingValue();
    std::optional<double> value = padValue ? constScalar(padValue) : std::nullopt;
    if (!value) return {};
    SmallVector<int64_t> padding;
    for (auto [lo, hi] : llvm::zip(p.getStaticLow(), p.getStaticHigh())) {
      if (ShapedType::isDynamic(lo) || ShapedType::isDynamic(hi) || lo < 0 || hi < 0) return {};
      padding.push_back(lo), padding.push_back(hi);
    }
    return tosaPad(b, p.getSource(), padding, double(float(*value)));
  }
  if (auto c = dyn_cast<tensor::ConcatOp>(op)) {
    return tosa::ConcatOp::create(b, outType, c.getInputs(), b.getI32IntegerAttr(int32_t(c.getDim())));
  }
  if (auto s = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto src = staticTensor(s.getSource().getType());
    if (!src || !s.hasUnitStride()) return {};
    SmallVector<int64_t> offsets(s.getStaticOffsets().begin(), s.getStaticOffsets().end()),
        sizes(s.getStaticSizes().begin(), s.getStaticSizes().end());
    for (int64_t i = 0; i < int64_t(offsets.size()); ++i)
      if (ShapedType::isDynamic(offsets[i]) || ShapedType::isDynamic(sizes[i])) return {};
    Value y = tosa::SliceOp::create(b, RankedTensorType::get(sizes, element), s.getSource(),
                                    tosa::getTosaConstShape(b, offsets), tosa::getTosaConstShape(b, sizes));
    return reshape(b, y, outType.getShape());  // rank-reducing slices
  }
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto value = dyn_cast<ElementsAttr>(c.getValue());
    if (!value || value.getType() != outType) return {};
    return tosa::ConstOp::create(b, outType, value);
  }
  return {};
}

struct RaiseLinalg : impl::KilnRaiseLinalgBase<RaiseLinalg> {
  void runOnOperation() override {
    if (const char *env = std::getenv("KILN_RAISE_LINALG"); env && std::string(env) == "0") return;
    for (func::FuncOp fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal()) continue;
      // Named ops first: they read their original producers (a pad, a
      // fill, a bias broadcast) before those are raised themselves.
      bool named = raise(fn, /*named=*/true);
      bool rest = raise(fn, /*named=*/false);
      if (!named && !rest) continue;
      eraseDead(fn);
      // One constant per shape and value (every mul's shift, the splats).
      IRRewriter rewriter(fn.getContext());
      DominanceInfo dominance(fn);
      eliminateCommonSubExpressions(rewriter, dominance, fn);
    }
  }

  /// Raises the ops of `fn`'s body: the named ops, or the rest. Returns
  /// whether any was raised.
  bool raise(func::FuncOp fn, bool named) {
    SmallVector<Operation *> ops;
    for (Block &block : fn.getBody())
      for (Operation &op : block) ops.push_back(&op);
    bool any = false;
    for (Operation *op : ops) {
      if (op->use_empty()) continue;
      Operation *before = op->getPrevNode();
      ImplicitLocOpBuilder b(op->getLoc(), op);
      Value y;
      unsigned resultIndex = 0;
      if (named) {
        if (auto c = dyn_cast<linalg::Conv2DNchwFchwOp>(op)) y = raiseNchwWindow(b, c);
        else if (auto c = dyn_cast<linalg::DepthwiseConv2DNchwChwOp>(op)) y = raiseNchwWindow(b, c);
        else if (auto p = dyn_cast<linalg::PoolingNchwMaxOp>(op)) y = raiseNchwWindow(b, p);
        else if (auto p = dyn_cast<linalg::PoolingNchwSumOp>(op)) y = raiseNchwWindow(b, p);
        else if (auto c = dyn_cast<linalg::Conv2DNgchwGfchwOp>(op)) y = raiseGroupedConv(b, c);
        else if (auto c = dyn_cast<linalg::Conv2DNhwcFhwcOp>(op)) y = raiseNhwcConv(b, c);
        else if (auto c = dyn_cast<linalg::Conv2DNhwcHwcfOp>(op)) y = raiseNhwcConv(b, c);
        else if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op)) y = raiseMatmul(b, cast<linalg::LinalgOp>(op));
      } else if (auto g = dyn_cast<linalg::GenericOp>(op)) {
        if (!(y = raiseExtractBroadcast(b, g)) && !(y = raiseExtractGather(b, g))) {
          GenericRaiser raiser(b, g);
          y = raiser.raise();
          resultIndex = raiser.resultIndex;
        }
      } else {
        y = raiseOther(b, op);
      }
      // What was made (between `before` and `op`) must verify, or the op
      // stays as it was.
      SmallVector<Operation *> made;
      for (Operation *m = before ? before->getNextNode() : &op->getBlock()->front(); m != op; m = m->getNextNode())
        made.push_back(m);
      if (y && !allVerify(made)) y = {};
      if (!y) {
        for (Operation *m : llvm::reverse(made)) m->dropAllUses(), m->erase();
        continue;
      }
      op->getResult(resultIndex).replaceAllUsesWith(y);
      if (op->use_empty()) op->erase();
      any = true;
    }
    return any;
  }

  static bool allVerify(ArrayRef<Operation *> ops) {
    if (ops.empty()) return true;
    // Quietly: a failure only means the op stays linalg.
    ScopedDiagnosticHandler quiet(ops.front()->getContext(), [](Diagnostic &) { return success(); });
    for (Operation *m : ops)
      if (failed(verify(m, /*verifyRecursively=*/false))) return false;
    return true;
  }

  /// What the raised ops no longer read: pads, fills, empties, constants,
  /// the original generics.
  static void eraseDead(func::FuncOp fn) {
    SmallVector<Operation *> worklist;
    for (Block &block : fn.getBody())
      for (Operation &op : block) worklist.push_back(&op);
    llvm::SmallPtrSet<Operation *, 16> erased;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (erased.contains(op) || !isOpTriviallyDead(op)) continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && def->getParentOp() == fn.getOperation()) worklist.push_back(def);
      erased.insert(op);
      op->erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
