// Elementwise kernels: unary, binary (TOSA broadcasting), select, clamp, cast.
// Same-shape operands run as flat Eigen array expressions (vectorized);
// broadcast operands index through strides. Large tensors are split over the
// executor's workers.
#include "kernels/KernelUtil.h"
#include "kernels/VectorKernels.h"

#include <Eigen/Core>

#include <algorithm>
#include <limits>

namespace kiln::kernels {
namespace {
using namespace util;

constexpr int64_t kGrain = 16384;

bool isInt(DType t) {
  return t == DType::i64 || t == DType::i32 || t == DType::i16 || t == DType::i8 || t == DType::u8;
}
bool isFloatType(DType t) { return t == DType::f32 || t == DType::f64; }

// --- unary ------------------------------------------------------------------

enum class Dom { Float, Int, IntOrFloat, Bool };
bool inDomain(Dom d, DType t) {
  switch (d) {
  case Dom::Float: return isFloatType(t);
  case Dom::Int: return isInt(t);
  case Dom::IntOrFloat: return isFloatType(t) || isInt(t);
  case Dom::Bool: return t == DType::i1;
  }
  return false;
}

/// Whether C++ type T is in the domain (compile-time twin of inDomain).
template <Dom D, typename T> constexpr bool typeInDomain() {
  constexpr bool isBool = std::is_same_v<T, bool>;
  if constexpr (D == Dom::Float) return std::is_floating_point_v<T>;
  else if constexpr (D == Dom::Int) return std::is_integral_v<T> && !isBool;
  else if constexpr (D == Dom::IntOrFloat) return !isBool;
  else return isBool;
}

#define UNARY(NAME, OPNAME, DOM, EXPR)                                                        \
  struct NAME {                                                                               \
    static constexpr const char *op = OPNAME;                                                 \
    static constexpr Dom dom = DOM;                                                           \
    template <typename T> static T apply(T x) { return EXPR; }                               \
  };
UNARY(Abs, "tosa.abs", Dom::IntOrFloat, x < T(0) ? T(-x) : x)
UNARY(Ceil, "tosa.ceil", Dom::Float, T(std::ceil(x)))
UNARY(Floor, "tosa.floor", Dom::Float, T(std::floor(x)))
UNARY(Exp, "tosa.exp", Dom::Float, T(std::exp(x)))
UNARY(Log, "tosa.log", Dom::Float, T(std::log(x)))
UNARY(Sin, "tosa.sin", Dom::Float, T(std::sin(x)))
UNARY(Cos, "tosa.cos", Dom::Float, T(std::cos(x)))
UNARY(Tanh, "tosa.tanh", Dom::Float, T(std::tanh(x)))
UNARY(Erf, "tosa.erf", Dom::Float, T(std::erf(x)))
UNARY(Sigmoid, "tosa.sigmoid", Dom::Float, T(T(1) / (T(1) + std::exp(-x))))
UNARY(Rsqrt, "tosa.rsqrt", Dom::Float, T(T(1) / std::sqrt(x)))
UNARY(Reciprocal, "tosa.reciprocal", Dom::Float, T(T(1) / x))
UNARY(Identity, "tosa.identity", Dom::IntOrFloat, x)
UNARY(BitwiseNot, "tosa.bitwise_not", Dom::Int, T(~x))
UNARY(Clz, "tosa.clz", Dom::Int,
      T(x == 0 ? int(sizeof(T) * 8)
               : __builtin_clzll(uint64_t(std::make_unsigned_t<T>(x))) - int(64 - sizeof(T) * 8)))
UNARY(LogicalNot, "tosa.logical_not", Dom::Bool, T(!x))
UNARY(Negate, "tosa.negate", Dom::IntOrFloat, T(-x))
#undef UNARY

template <typename Op>
llvm::Expected<std::vector<TensorType>> unaryShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity(Op::op, in, 1)) return std::move(e);
  if (!inDomain(Op::dom, in[0].dtype))
    return fail(llvm::Twine("no ") + Op::op + " kernel for " + std::string(dtypeName(in[0].dtype)));
  if (llvm::StringRef(Op::op) == "tosa.negate" &&
      (attrs.getIntOr("input1_zp", 0) != 0 || attrs.getIntOr("output_zp", 0) != 0))
    return fail("tosa.negate kernel: only zero points of 0");
  return std::vector<TensorType>{in[0]};
}

template <typename Op> llvm::Error unaryCompute(const KernelArgs &a) {
  int64_t n = a.outputTypes[0].numElements();
  if (!dispatch(a.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = Store<T>;
    const S *x = static_cast<const S *>(a.inputs[0]);
    S *y = static_cast<S *>(a.outputs[0]);
    if constexpr (typeInDomain<Op::dom, T>())
      parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = S(Op::template apply<T>(T(x[i])));
      });
  }))
    return noComputeType(a.inputTypes[0].dtype);
  return llvm::Error::success();
}

/// exp and sigmoid of f32 in vectors built per width (VectorKernels.h),
/// not libm per element: registered for f32 beside the general kernels.
template <VectorUnary V> llvm::Error vectorUnaryCompute(const KernelArgs &a) {
  int64_t n = a.outputTypes[0].numElements();
  UnaryFn f = kernels::unary(V);
  const float *x = static_cast<const float *>(a.inputs[0]);
  float *y = static_cast<float *>(a.outputs[0]);
  parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) { f(x + b, y + b, e - b); });
  return llvm::Error::success();
}

// --- clamp --------------------------------------------------------------------

llvm::Expected<std::vector<TensorType>> clampShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.clamp", in, 1)) return std::move(e);
  if (!inDomain(Dom::IntOrFloat, in[0].dtype))
    return fail("no tosa.clamp kernel for " + std::string(dtypeName(in[0].dtype)));
  if (!attrs.has("min_val") || !attrs.has("max_val")) return fail("tosa.clamp needs min_val and max_val");
  if (auto e = propagatesNaN(attrs, "tosa.clamp")) return std::move(e);
  return std::vector<TensorType>{in[0]};
}

llvm::Error clampCompute(const KernelArgs &a) {
  double lo = a.attrs.getFloatOr("min_val", 0), hi = a.attrs.getFloatOr("max_val", 0);
  int64_t n = a.outputTypes[0].numElements();
  if (!dispatch(a.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = Store<T>;
    const S *x = static_cast<const S *>(a.inputs[0]);
    S *y = static_cast<S *>(a.outputs[0]);
    S l = S(lo), h = S(hi);
    if constexpr (std::is_same_v<S, float>) {  // in vectors (VectorKernels.h)
      ClampFn f = kernels::clamp();
      parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) { f(x + b, y + b, e - b, l, h); });
      return;
    }
    parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = x[i] < l ? l : (x[i] > h ? h : x[i]);
    });
  }))
    return noComputeType(a.inputTypes[0].dtype);
  return llvm::Error::success();
}

// --- binary -------------------------------------------------------------------

enum class Res { Same, Bool };
#define BINARY(NAME, OPNAME, DOM, RES, EXPR)                                                   \
  struct NAME {                                                                                \
    static constexpr const char *op = OPNAME;                                                  \
    static constexpr Dom dom = DOM;                                                            \
    static constexpr Res res = RES;                                                            \
    template <typename T> static auto apply(T a, T b) { return EXPR; }                        \
  };
// Shifts by an amount outside [0, bits) (TOSA leaves them undefined) give
// 0, or the sign for arithmetic right shifts — as generated code does
// (kiln-guard-traps).
template <typename T> bool shiftInRange(T b) {
  return std::make_unsigned_t<T>(b) < std::make_unsigned_t<T>(sizeof(T) * 8);
}
template <typename T> T shl(T a, T b) {
  if constexpr (std::is_integral_v<T>) return shiftInRange(b) ? T(std::make_unsigned_t<T>(a) << b) : T(0);
  else return a;
}
template <typename T> T lshr(T a, T b) {
  if constexpr (std::is_integral_v<T>) return shiftInRange(b) ? T(std::make_unsigned_t<T>(a) >> b) : T(0);
  else return a;
}
template <typename T> T ashr(T a, T b) {
  if constexpr (std::is_integral_v<T>) return shiftInRange(b) ? T(a >> b) : T(a < 0 ? -1 : 0);
  else return a;
}
BINARY(Add, "tosa.add", Dom::IntOrFloat, Res::Same, wrapAdd(a, b))
BINARY(Sub, "tosa.sub", Dom::IntOrFloat, Res::Same, wrapSub(a, b))
BINARY(Mul, "tosa.mul", Dom::IntOrFloat, Res::Same, wrapMul(a, b))
BINARY(Maximum, "tosa.maximum", Dom::IntOrFloat, Res::Same, maxPropagatingNaN(a, b))
BINARY(Minimum, "tosa.minimum", Dom::IntOrFloat, Res::Same, minPropagatingNaN(a, b))
BINARY(Pow, "tosa.pow", Dom::Float, Res::Same, T(std::pow(a, b)))
// Division by zero is an error before any element is computed (binaryCompute);
// INT_MIN / -1 wraps to INT_MIN as two's complement does, instead of trapping.
BINARY(IntDiv, "tosa.intdiv", Dom::Int, Res::Same,
       T(b == 0 ? 0 : b == T(-1) ? T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(a)) : a / b))
BINARY(BitwiseAnd, "tosa.bitwise_and", Dom::Int, Res::Same, T(a & b))
BINARY(BitwiseOr, "tosa.bitwise_or", Dom::Int, Res::Same, T(a | b))
BINARY(BitwiseXor, "tosa.bitwise_xor", Dom::Int, Res::Same, T(a ^ b))
BINARY(LogicalAnd, "tosa.logical_and", Dom::Bool, Res::Same, T(a && b))
BINARY(LogicalOr, "tosa.logical_or", Dom::Bool, Res::Same, T(a || b))
BINARY(LogicalXor, "tosa.logical_xor", Dom::Bool, Res::Same, T(a != b))
BINARY(LogicalLeftShift, "tosa.logical_left_shift", Dom::Int, Res::Same, shl(a, b))
BINARY(LogicalRightShift, "tosa.logical_right_shift", Dom::Int, Res::Same, lshr(a, b))
BINARY(ArithmeticRightShift, "tosa.arithmetic_right_shift", Dom::Int, Res::Same, ashr(a, b))
BINARY(Equal, "tosa.equal", Dom::IntOrFloat, Res::Bool, bool(a == b))
BINARY(Greater, "tosa.greater", Dom::IntOrFloat, Res::Bool, bool(a > b))
BINARY(GreaterEqual, "tosa.greater_equal", Dom::IntOrFloat, Res::Bool, bool(a >= b))
#undef BINARY

template <typename Op>
llvm::Expected<std::vector<TensorType>> binaryShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity(Op::op, in, 2)) return std::move(e);
  if (in[0].dtype != in[1].dtype)
    return fail(llvm::Twine(Op::op) + ": operand dtypes differ (" + std::string(dtypeName(in[0].dtype)) +
                ", " + std::string(dtypeName(in[1].dtype)) + ")");
  if (!inDomain(Op::dom, in[0].dtype))
    return fail(llvm::Twine("no ") + Op::op + " kernel for " + std::string(dtypeName(in[0].dtype)));
  if (llvm::StringRef(Op::op) == "tosa.mul" && attrs.getIntOr("shift", 0) != 0)
    return fail("tosa.mul kernel: only shift 0");
  if (llvm::StringRef(Op::op) == "tosa.arithmetic_right_shift" && attrs.getIntOr("round", 0) != 0)
    return fail("tosa.arithmetic_right_shift kernel: only round = false");
  auto shape = broadcast(in);
  if (!shape) return withContext(shape.takeError(), std::string(Op::op) + ": ");
  return std::vector<TensorType>{TensorType{Op::res == Res::Bool ? DType::i1 : in[0].dtype, *shape}};
}

/// The output of a broadcasting op as rows of `inner` elements over which
/// operand A's offset advances by `stepA` and B's by `stepB` (each 0 or 1):
/// trailing dimensions merged while both operands stay contiguous (or both
/// broadcast) across them.
struct BroadcastRows {
  int64_t inner = 1, stepA = 1, stepB = 1;
};
BroadcastRows broadcastRows(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> sa, llvm::ArrayRef<int64_t> sb) {
  BroadcastRows r;
  int64_t d = int64_t(shape.size()) - 1;
  while (d >= 0 && shape[d] == 1) --d;  // unit dimensions move nothing
  if (d < 0) return r;
  r.inner = shape[d];
  r.stepA = sa[d] ? 1 : 0;
  r.stepB = sb[d] ? 1 : 0;
  if ((r.stepA && sa[d] != 1) || (r.stepB && sb[d] != 1)) return BroadcastRows{1, 1, 1};  // not contiguous
  // An operand continues across dimension d-1 when it advances by `inner`
  // there (contiguous) or by 0 while it is broadcast in the row too.
  auto continues = [&](int64_t step, int64_t stride) { return step ? stride == r.inner : stride == 0; };
  for (--d; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (!continues(r.stepA, sa[d]) || !continues(r.stepB, sb[d])) break;
    r.inner *= shape[d];
  }
  return r;
}

template <typename Op> llvm::Error binaryCompute(const KernelArgs &a) {
  const TensorType &o = a.outputTypes[0];
  if constexpr (std::is_same_v<Op, IntDiv>) {
    int64_t zeroAt = -1;
    (void)dispatch(a.inputTypes[1].dtype, [&](auto tag) {  // integers only (the shape function)
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T *y = static_cast<const T *>(a.inputs[1]);
        for (int64_t i = 0, n = a.inputTypes[1].numElements(); i < n && zeroAt < 0; ++i)
          if (y[i] == 0) zeroAt = i;
      }
    });
    if (zeroAt >= 0) return fail("tosa.intdiv: division by zero (divisor element " + llvm::Twine(zeroAt) + ")");
  }
  int64_t n = o.numElements();
  bool flat = a.inputTypes[0].shape == o.shape && a.inputTypes[1].shape == o.shape;
  std::vector<int64_t> sa, sb;  // only broadcasting needs strides
  if (!flat) {
    sa = broadcastStrides(a.inputTypes[0].shape, o.shape);
    sb = broadcastStrides(a.inputTypes[1].shape, o.shape);
  }
  if (!dispatch(a.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (typeInDomain<Op::dom, T>()) {
    using S = Store<T>;
    using R = std::conditional_t<Op::res == Res::Bool, uint8_t, S>;
    const S *x = static_cast<const S *>(a.inputs[0]);
    const S *y = static_cast<const S *>(a.inputs[1]);
    R *z = static_cast<R *>(a.outputs[0]);
    if (flat) {
      if constexpr (std::is_same_v<Op, Add> && std::is_floating_point_v<T>) {
        parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
          using A = Eigen::Array<T, Eigen::Dynamic, 1>;
          Eigen::Map<A>(z + b, e - b) = Eigen::Map<const A>(x + b, e - b) + Eigen::Map<const A>(y + b, e - b);
        });
        return;
      }
      parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) z[i] = R(Op::template apply<T>(T(x[i]), T(y[i])));
      });
      return;
    }
    // Rows of the output over which each operand's offset advances by 0
    // (broadcast) or 1: one offset computation per row, then a loop the
    // compiler vectorizes (a scalar or a per-channel bias used to cost a
    // division per dimension per element: MobileNetV2's clamps as
    // maximum/minimum ran at 2 GB/s).
    BroadcastRows rows = broadcastRows(o.shape, sa, sb);
    auto apply = [](T u, T v) { return R(Op::template apply<T>(u, v)); };
    parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e;) {
        int64_t j = i % rows.inner, len = std::min(e - i, rows.inner - j), row = i - j;
        const S *xs = x + offsetOf(row, o.shape, sa) + j * rows.stepA;
        const S *ys = y + offsetOf(row, o.shape, sb) + j * rows.stepB;
        R *zs = z + i;
        if (rows.stepA && rows.stepB) {
          for (int64_t k = 0; k < len; ++k) zs[k] = apply(T(xs[k]), T(ys[k]));
        } else if (rows.stepA) {
          T v = T(*ys);
          for (int64_t k = 0; k < len; ++k) zs[k] = apply(T(xs[k]), v);
        } else if (rows.stepB) {
          T u = T(*xs);
          for (int64_t k = 0; k < len; ++k) zs[k] = apply(u, T(ys[k]));
        } else {
          R r = apply(T(*xs), T(*ys));
          for (int64_t k = 0; k < len; ++k) zs[k] = r;
        }
        i += len;
      }
    });
    }
  }))
    return noComputeType(a.inputTypes[0].dtype);
  return llvm::Error::success();
}

// --- select -------------------------------------------------------------------

llvm::Expected<std::vector<TensorType>> selectShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectArity("tosa.select", in, 3)) return std::move(e);
  if (in[0].dtype != DType::i1) return fail("tosa.select: the condition must be i1");
  if (in[1].dtype != in[2].dtype) return fail("tosa.select: value dtypes differ");
  if (!inDomain(Dom::IntOrFloat, in[1].dtype) && in[1].dtype != DType::i1)
    return fail("no tosa.select kernel for " + std::string(dtypeName(in[1].dtype)));
  auto shape = broadcast(in);
  if (!shape) return shape.takeError();
  return std::vector<TensorType>{TensorType{in[1].dtype, *shape}};
}

llvm::Error selectCompute(const KernelArgs &a) {
  const TensorType &o = a.outputTypes[0];
  auto sp = broadcastStrides(a.inputTypes[0].shape, o.shape);
  auto sx = broadcastStrides(a.inputTypes[1].shape, o.shape);
  auto sy = broadcastStrides(a.inputTypes[2].shape, o.shape);
  size_t es = dtypeSize(o.dtype);
  const uint8_t *p = static_cast<const uint8_t *>(a.inputs[0]);
  const char *x = static_cast<const char *>(a.inputs[1]), *y = static_cast<const char *>(a.inputs[2]);
  char *z = static_cast<char *>(a.outputs[0]);
  parallel(a.executor, o.numElements(), kGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const char *src = p[offsetOf(i, o.shape, sp)] ? x + offsetOf(i, o.shape, sx) * es
                                                     : y + offsetOf(i, o.shape, sy) * es;
      std::memcpy(z + i * es, src, es);
    }
  });
  return llvm::Error::success();
}

// --- cast -------------------------------------------------------------------


llvm::Expected<std::vector<TensorType>> castShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.cast", in, 1)) return std::move(e);
  auto to = attrs.getString("to");
  if (!to) return to.takeError();
  auto dt = parseDType(*to);
  if (!dt) return fail("tosa.cast kernel: no kernel for target type " + *to);
  return std::vector<TensorType>{TensorType{*dt, in[0].shape}};
}

double loadAsDouble(DType t, const void *base, int64_t i) {
  switch (t) {
  case DType::f16: return halfToFloat(static_cast<const uint16_t *>(base)[i]);
  case DType::bf16: return bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
  default: break;
  }
  double v = 0;
  (void)dispatch(t, [&](auto tag) {  // every other dtype has a compute type
    using S = Store<decltype(tag)>;
    v = double(static_cast<const S *>(base)[i]);
  });
  return v;
}

llvm::Error castCompute(const KernelArgs &a) {
  DType from = a.inputTypes[0].dtype, to = a.outputTypes[0].dtype;
  int64_t n = a.outputTypes[0].numElements();
  bool fromInt = !isFloat(from);
  parallel(a.executor, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      double v = loadAsDouble(from, a.inputs[0], i);
      void *out = a.outputs[0];
      switch (to) {
      case DType::f32: static_cast<float *>(out)[i] = float(v); break;
      case DType::f64: static_cast<double *>(out)[i] = v; break;
      case DType::f16: static_cast<uint16_t *>(out)[i] = floatToHalf(float(v)); break;
      case DType::bf16: static_cast<uint16_t *>(out)[i] = floatToBf16(float(v)); break;
      case DType::i1: static_cast<uint8_t *>(out)[i] = v != 0; break;
      default:
        (void)dispatch(to, [&](auto tag) {  // f16, bf16 handled above
          using T = decltype(tag);
          using S = Store<T>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            // int -> int wraps (truncates); float -> int rounds half to even and saturates.
            static_cast<S *>(out)[i] = fromInt ? S(int64_t(v)) : saturatingRound<S>(v);
          }
        });
      }
    }
  });
  return llvm::Error::success();
}

// --- tosa.custom kiln.gelu: GELU activation, a custom op with no MLIR lowering ---
llvm::Expected<std::vector<TensorType>> geluShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectArity("kiln.gelu", in, 1)) return std::move(e);
  if (in[0].dtype != DType::f32) return fail("no kiln.gelu kernel for " + std::string(dtypeName(in[0].dtype)));
  return std::vector<TensorType>{in[0]};
}
llvm::Error geluCompute(const KernelArgs &a) {
  const float *x = static_cast<const float *>(a.inputs[0]);
  float *y = static_cast<float *>(a.outputs[0]);
  parallel(a.executor, a.outputTypes[0].numElements(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678f));
  });
  return llvm::Error::success();
}

template <typename Op> KernelDef unary() {
  return {Op::op, "eigen", &unaryShape<Op>, &unaryCompute<Op>};
}
template <typename Op> KernelDef binary() {
  return {Op::op, "eigen", &binaryShape<Op>, &binaryCompute<Op>};
}

}  // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  for (KernelDef d : {unary<Abs>(), unary<Ceil>(), unary<Floor>(), unary<Exp>(), unary<Log>(),
                      unary<Sin>(), unary<Cos>(), unary<Tanh>(), unary<Erf>(), unary<Sigmoid>(),
                      unary<Rsqrt>(), unary<Reciprocal>(), unary<Identity>(), unary<BitwiseNot>(),
                      unary<Clz>(), unary<LogicalNot>(), unary<Negate>()})
    llvm::cantFail(r.add(d));
  for (KernelDef d :
       {binary<Add>(), binary<Sub>(), binary<Mul>(), binary<Maximum>(), binary<Minimum>(),
        binary<Pow>(), binary<IntDiv>(), binary<BitwiseAnd>(), binary<BitwiseOr>(),
        binary<BitwiseXor>(), binary<LogicalAnd>(), binary<LogicalOr>(), binary<LogicalXor>(),
        binary<LogicalLeftShift>(), binary<LogicalRightShift>(), binary<ArithmeticRightShift>(),
        binary<Equal>(), binary<Greater>(), binary<GreaterEqual>()})
    llvm::cantFail(r.add(d));
  llvm::cantFail(r.add({"tosa.exp", "vector", &unaryShape<Exp>, &vectorUnaryCompute<VectorUnary::kExp>, {DType::f32}}));
  llvm::cantFail(
      r.add({"tosa.sigmoid", "vector", &unaryShape<Sigmoid>, &vectorUnaryCompute<VectorUnary::kSigmoid>, {DType::f32}}));
  llvm::cantFail(r.add({"tosa.erf", "vector", &unaryShape<Erf>, &vectorUnaryCompute<VectorUnary::kErf>, {DType::f32}}));
  llvm::cantFail(r.add({"tosa.tanh", "vector", &unaryShape<Tanh>, &vectorUnaryCompute<VectorUnary::kTanh>, {DType::f32}}));
  llvm::cantFail(r.add({"tosa.clamp", "cpu", &clampShape, &clampCompute}));
  llvm::cantFail(r.add({"tosa.select", "cpu", &selectShape, &selectCompute}));
  llvm::cantFail(r.add({"tosa.cast", "cpu", &castShape, &castCompute}));
  llvm::cantFail(r.add({"tosa.custom:kiln.gelu", "cpu", &geluShape, &geluCompute}));
}

}  // namespace kiln::kernels
