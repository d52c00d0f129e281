// Every TOSA op that MLIR 22's TOSA conversions (tosa-to-linalg[-named],
// tosa-to-tensor, tosa-to-arith, tosa-to-scf) lower, JIT-compiled through
// kiln's CPU pipeline and compared with a plain scalar C++ reference.
// f32 everywhere, plus the integer and boolean types where TOSA defines the op.
//
// Each case is a one-op (or few-op) function written in MLIR's generic form;
// inputs are deterministic; the reference works on doubles.
#include "jit/Compiler.h"
#include "kernels/KernelRegistry.h"
#include "ops/OpTable.h"
#include "tests/TestRuntime.h"
#include "tests/reference/Reference.h"
#include "runtime/Poison.h"

#include "llvm/ADT/bit.h"
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>
#include <random>

using namespace kiln;

namespace {

using Values = std::vector<double>;
using RefFn = std::function<std::vector<Values>(const std::vector<Values> &in)>;

struct Case {
  std::string name;
  std::vector<TensorType> args;
  std::vector<TensorType> results;
  std::string body;  // uses %a0, %a1, ...; defines %r0, %r1, ...
  RefFn ref;
  double rtol = 1e-5, atol = 1e-6;
  // Inputs: [lo, hi] per argument (integers drawn uniformly, floats too).
  std::vector<std::pair<double, double>> ranges;
  bool positiveOnly = false;  // floats drawn from [lo, hi] with |x| >= 0.25
  bool paddedRows = false;    // generated code reads a weight stored with padded rows
  bool panels = false;        // ... or a conv filter stored in panels (streamed filters)
};

TensorType tt(DType d, std::vector<int64_t> s) { return TensorType{d, Shape(s.begin(), s.end())}; }
std::string mt(const TensorType &t) { return "tensor<" + t.str() + ">"; }

std::string zeroConst(const std::string &name, DType d) {
  std::string v = isFloat(d) ? "0.0" : "0";
  std::string ty = "tensor<1x" + std::string(dtypeName(d)) + ">";
  return "  %" + name + " = \"tosa.const\"() <{values = dense<" + v + "> : " + ty + "}> : () -> " +
         ty + "\n";
}
std::string shapeConst(const std::string &name, std::vector<int64_t> v) {
  std::string list;
  for (size_t i = 0; i < v.size(); ++i) list += (i ? ", " : "") + std::to_string(v[i]);
  std::string n = std::to_string(v.size());
  return "  %" + name + " = \"tosa.const_shape\"() <{values = dense<[" + list + "]> : tensor<" + n +
         "xindex>}> : () -> !tosa.shape<" + n + ">\n";
}
std::string shiftConst() {
  return "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n";
}

Tensor makeInput(const TensorType &t, std::pair<double, double> range, unsigned seed,
                 bool avoidSmall) {
  Tensor x = Tensor::empty(t.dtype, t.shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(range.first, range.second);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    double v = real(rng);
    if (avoidSmall && std::abs(v) < 0.25) v = v < 0 ? -0.25 - std::abs(v) : 0.25 + v;
    int64_t iv = int64_t(std::floor(v));
    switch (t.dtype) {
    case DType::f32: x.data<float>()[i] = float(v); break;
    case DType::f64: x.data<double>()[i] = v; break;
    case DType::f16: x.data<uint16_t>()[i] = floatToHalf(float(v)); break;
    case DType::bf16: x.data<uint16_t>()[i] = floatToBf16(float(v)); break;
    case DType::i64: x.data<int64_t>()[i] = iv; break;
    case DType::i32: x.data<int32_t>()[i] = int32_t(iv); break;
    case DType::i16: x.data<int16_t>()[i] = int16_t(iv); break;
    case DType::i8: x.data<int8_t>()[i] = int8_t(iv); break;
    case DType::u8: x.data<uint8_t>()[i] = uint8_t(iv); break;
    case DType::i1: x.data<uint8_t>()[i] = v > 0.5 ? 1 : 0; break;
    }
  }
  return x;
}

// --- reference helpers -----------------------------------------------------

Values mapD(const Values &x, const std::function<double(double)> &f) {
  Values y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

std::vector<int64_t> stridesOf(const Shape &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = int64_t(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// Elementwise over broadcast operands (TOSA: equal ranks, dims 1 broadcast).
Values broadcastMap(const std::vector<Values> &in, const std::vector<TensorType> &types,
                    const TensorType &out, const std::function<double(const Values &)> &f) {
  Values y(size_t(out.numElements()));
  auto ost = stridesOf(out.shape);
  std::vector<std::vector<int64_t>> ist;
  for (auto &t : types) ist.push_back(stridesOf(t.shape));
  Values args(in.size());
  for (int64_t i = 0; i < out.numElements(); ++i) {
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t off = 0, rem = i;
      for (size_t d = 0; d < out.shape.size(); ++d) {
        int64_t idx = rem / ost[d];
        rem %= ost[d];
        if (types[k].shape[d] != 1) off += idx * ist[k][d];
      }
      args[k] = in[k][off];
    }
    y[i] = f(args);
  }
  return y;
}

Case unary(const std::string &op, DType d, std::vector<int64_t> shape,
           std::function<double(double)> f, std::pair<double, double> range = {-2, 2}) {
  Case c;
  TensorType t = tt(d, shape);
  c.name = op + "_" + std::string(dtypeName(d));
  c.args = {t};
  c.results = {t};
  c.body = "  %r0 = \"tosa." + op + "\"(%a0) : (" + mt(t) + ") -> " + mt(t) + "\n";
  c.ref = [f](const std::vector<Values> &in) { return std::vector<Values>{mapD(in[0], f)}; };
  c.ranges = {range};
  return c;
}

Case binary(const std::string &op, DType d, std::vector<int64_t> sa, std::vector<int64_t> sb,
            std::function<double(double, double)> f, DType resultType,
            std::pair<double, double> ra = {-2, 2}, std::pair<double, double> rb = {-2, 2},
            const std::string &props = "") {
  Case c;
  TensorType a = tt(d, sa), b = tt(d, sb);
  Shape os;
  for (size_t i = 0; i < sa.size(); ++i) os.push_back(std::max(sa[i], sb[i]));
  TensorType o{resultType, os};
  c.name = op + "_" + std::string(dtypeName(d)) + (sa == sb ? "" : "_broadcast");
  c.args = {a, b};
  c.results = {o};
  bool isMul = op == "mul";
  c.body = (isMul ? shiftConst() : "") + "  %r0 = \"tosa." + op + "\"(%a0, %a1" +
           (isMul ? ", %shift" : "") + ")" + (props.empty() ? "" : " <{" + props + "}>") + " : (" +
           mt(a) + ", " + mt(b) + (isMul ? ", tensor<1xi8>" : "") + ") -> " + mt(o) + "\n";
  std::vector<TensorType> types = {a, b};
  c.ref = [f, types, o](const std::vector<Values> &in) {
    return std::vector<Values>{
        broadcastMap(in, types, o, [&](const Values &v) { return f(v[0], v[1]); })};
  };
  c.ranges = {ra, rb};
  return c;
}

double wrap32(double v) { return double(int32_t(uint32_t(int64_t(v)))); }

Case reduce(const std::string &op, DType d, std::vector<int64_t> shape, int axis,
            std::function<double(double, double)> f, double init) {
  Case c;
  TensorType t = tt(d, shape);
  TensorType o = t;
  o.shape[axis] = 1;
  c.name = op + "_" + std::string(dtypeName(d)) + "_axis" + std::to_string(axis);
  c.args = {t};
  c.results = {o};
  c.body = "  %r0 = \"tosa." + op + "\"(%a0) <{axis = " + std::to_string(axis) + " : i32}> : (" +
           mt(t) + ") -> " + mt(o) + "\n";
  c.ref = [=](const std::vector<Values> &in) {
    Values y(size_t(o.numElements()), init);
    auto ist = stridesOf(t.shape), ost = stridesOf(o.shape);
    for (int64_t i = 0; i < t.numElements(); ++i) {
      int64_t rem = i, off = 0;
      for (size_t dd = 0; dd < t.shape.size(); ++dd) {
        int64_t idx = rem / ist[dd];
        rem %= ist[dd];
        if (int(dd) != axis) off += idx * ost[dd];
      }
      y[off] = f(y[off], in[0][i]);
    }
    return std::vector<Values>{y};
  };
  c.ranges = {d == DType::i32 ? std::pair<double, double>{-50, 50} : std::pair<double, double>{-2, 2}};
  if (op == "reduce_product") c.ranges = {{0.5, 1.5}};
  return c;
}

Case cast(DType from, DType to, std::function<double(double)> f, std::pair<double, double> range) {
  Case c;
  TensorType a = tt(from, {4, 9}), o = tt(to, {4, 9});
  c.name = "cast_" + std::string(dtypeName(from)) + "_to_" + std::string(dtypeName(to));
  c.args = {a};
  c.results = {o};
  c.body = "  %r0 = \"tosa.cast\"(%a0) : (" + mt(a) + ") -> " + mt(o) + "\n";
  c.ref = [f](const std::vector<Values> &in) { return std::vector<Values>{mapD(in[0], f)}; };
  c.ranges = {range};
  return c;
}

double roundF16(double v) { return halfToFloat(floatToHalf(float(v))); }
double roundBf16(double v) { return bf16ToFloat(floatToBf16(float(v))); }
double sat(double v, double lo, double hi) { return std::min(hi, std::max(lo, v)); }

std::vector<Case> allCases() {
  std::vector<Case> cs;
  const DType F = DType::f32, I = DType::i32, B = DType::i1;
  std::vector<int64_t> s = {3, 37};

  // Elementwise unary, f32.
  cs.push_back(unary("abs", F, s, [](double x) { return std::abs(x); }));
  cs.push_back(unary("ceil", F, s, [](double x) { return std::ceil(x); }));
  cs.push_back(unary("floor", F, s, [](double x) { return std::floor(x); }));
  cs.push_back(unary("exp", F, s, [](double x) { return std::exp(x); }));
  cs.push_back(unary("log", F, s, [](double x) { return std::log(x); }, {0.01, 5}));
  cs.push_back(unary("sin", F, s, [](double x) { return std::sin(x); }, {-4, 4}));
  cs.push_back(unary("cos", F, s, [](double x) { return std::cos(x); }, {-4, 4}));
  cs.push_back(unary("tanh", F, s, [](double x) { return std::tanh(x); }, {-4, 4}));
  cs.push_back(unary("erf", F, s, [](double x) { return std::erf(x); }, {-3, 3}));
  cs.push_back(unary("sigmoid", F, s, [](double x) { return 1 / (1 + std::exp(-x)); }, {-6, 6}));
  {
    // Past where the vectorized sigmoid clamps exp's argument ([-87, 88])
    // and where f32's exp overflows, in whole vectors of every width.
    Case c = unary("sigmoid", F, {4, 64}, [](double x) { return 1 / (1 + std::exp(-x)); }, {-120, 120});
    c.name += "_wide";
    cs.push_back(c);
  }
  cs.push_back(unary("rsqrt", F, s, [](double x) { return 1 / std::sqrt(x); }, {0.05, 9}));
  {
    Case c = unary("reciprocal", F, s, [](double x) { return 1 / x; });
    c.positiveOnly = true;
    cs.push_back(c);
  }
  cs.push_back(unary("identity", F, {2, 3, 4}, [](double x) { return x; }));
  cs.push_back(unary("exp", F, {1}, [](double x) { return std::exp(x); }));
  cs.push_back(unary("exp", F, {}, [](double x) { return std::exp(x); }));
  // Integer / boolean unary.
  cs.push_back(unary("abs", I, s, [](double x) { return std::abs(x); }, {-100, 100}));
  cs.push_back(unary("bitwise_not", I, s, [](double x) { return double(~int32_t(x)); }, {-100, 100}));
  cs.push_back(unary("clz", I, s, [](double x) {
    return double(llvm::countl_zero(uint32_t(int32_t(x))));
  }, {-5, 100000}));
  cs.push_back(unary("logical_not", B, s, [](double x) { return x ? 0.0 : 1.0; }, {0, 1}));
  for (DType d : {F, I}) {  // negate has zero-point operands
    Case c;
    TensorType t = tt(d, s);
    std::string zt = "tensor<1x" + std::string(dtypeName(d)) + ">";
    c.name = "negate_" + std::string(dtypeName(d));
    c.args = {t};
    c.results = {t};
    c.body = zeroConst("zp", d) + "  %r0 = \"tosa.negate\"(%a0, %zp, %zp) : (" + mt(t) + ", " + zt +
             ", " + zt + ") -> " + mt(t) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[0], [](float x) { return -x; })};
    };
    c.ranges = {d == F ? std::pair<double, double>{-2, 2} : std::pair<double, double>{-100, 100}};
    cs.push_back(c);
  }

  // Elementwise binary, f32 (same shape and broadcast).
  auto fb = [&](const std::string &op, std::function<double(double, double)> f, DType rt,
                std::pair<double, double> ra = {-2, 2}, std::pair<double, double> rb = {-2, 2}) {
    cs.push_back(binary(op, F, s, s, f, rt, ra, rb));
    cs.push_back(binary(op, F, {3, 1, 5}, {1, 4, 5}, f, rt, ra, rb));
  };
  fb("add", [](double a, double b) { return a + b; }, F);
  fb("sub", [](double a, double b) { return a - b; }, F);
  fb("mul", [](double a, double b) { return a * b; }, F);
  fb("maximum", [](double a, double b) { return std::max(a, b); }, F);
  fb("minimum", [](double a, double b) { return std::min(a, b); }, F);
  fb("pow", [](double a, double b) { return std::pow(a, b); }, F, {0.1, 3}, {-2, 2});
  fb("equal", [](double a, double b) { return a == b; }, B, {-2, 2}, {-2, 2});
  fb("greater", [](double a, double b) { return a > b; }, B);
  fb("greater_equal", [](double a, double b) { return a >= b; }, B);
  {  // equal on values that do coincide
    Case c = binary("equal", I, s, s, [](double a, double b) { return a == b; }, B, {0, 3}, {0, 3});
    cs.push_back(c);
  }
  // Integer binary (i32; wraparound where C++ would overflow).
  auto ib = [&](const std::string &op, std::function<double(double, double)> f,
                std::pair<double, double> ra = {-1000, 1000},
                std::pair<double, double> rb = {-1000, 1000}, const std::string &props = "",
                DType d = DType::i32) {
    cs.push_back(binary(op, d, s, s, f, d, ra, rb, props));
  };
  ib("add", [](double a, double b) { return a + b; });
  ib("sub", [](double a, double b) { return a - b; });
  ib("mul", [](double a, double b) { return wrap32(a * b); }, {-100000, 100000}, {-100000, 100000});
  ib("intdiv", [](double a, double b) { return double(int32_t(a) / int32_t(b)); }, {-1000, 1000},
     {1, 30});
  ib("maximum", [](double a, double b) { return std::max(a, b); });
  ib("minimum", [](double a, double b) { return std::min(a, b); });
  ib("bitwise_and", [](double a, double b) { return double(int32_t(a) & int32_t(b)); });
  ib("bitwise_or", [](double a, double b) { return double(int32_t(a) | int32_t(b)); });
  ib("bitwise_xor", [](double a, double b) { return double(int32_t(a) ^ int32_t(b)); });
  ib("logical_left_shift",
     [](double a, double b) { return double(int32_t(uint32_t(int32_t(a)) << int(b))); }, {-1000, 1000},
     {0, 31});
  ib("logical_right_shift",
     [](double a, double b) { return double(int32_t(uint32_t(int32_t(a)) >> int(b))); },
     {-1000, 1000}, {0, 31});
  ib("arithmetic_right_shift", [](double a, double b) { return double(int32_t(a) >> int(b)); },
     {-1000, 1000}, {0, 31}, "round = false");
  ib("add", [](double a, double b) { return double(int8_t(int(a) + int(b))); }, {-100, 100},
     {-100, 100}, "", DType::i8);
  ib("add", [](double a, double b) { return a + b; }, {-1000, 1000}, {-1000, 1000}, "", DType::i16);
  ib("add", [](double a, double b) { return a + b; }, {-1e9, 1e9}, {-1e9, 1e9}, "", DType::i64);
  cs.push_back(binary("greater", I, s, s, [](double a, double b) { return a > b; }, B, {-5, 5}, {-5, 5}));
  for (auto [op, f] : std::vector<std::pair<std::string, std::function<double(double, double)>>>{
           {"logical_and", [](double a, double b) { return double(a && b); }},
           {"logical_or", [](double a, double b) { return double(a || b); }},
           {"logical_xor", [](double a, double b) { return double(bool(a) != bool(b)); }}})
    cs.push_back(binary(op, B, s, s, f, B, {0, 1}, {0, 1}));

  // select and clamp. A condition broadcast along dim 1, and a row's flag
  // (a mask, safe softmax's "all masked") broadcast along the innermost
  // dimension: vectorized, the flag read one byte at a time.
  auto selectCase = [&](std::string name, TensorType p, TensorType a, TensorType b, TensorType o) {
    Case c;
    c.name = std::move(name);
    c.args = {p, a, b};
    c.results = {o};
    c.body = "  %r0 = \"tosa.select\"(%a0, %a1, %a2) : (" + mt(p) + ", " + mt(a) + ", " + mt(b) +
             ") -> " + mt(o) + "\n";
    std::vector<TensorType> types = {p, a, b};
    c.ref = [=](const std::vector<Values> &in) {
      return std::vector<Values>{
          broadcastMap(in, types, o, [](const Values &v) { return v[0] ? v[1] : v[2]; })};
    };
    c.ranges = {{0, 1}, {-2, 2}, {-2, 2}};
    cs.push_back(c);
  };
  selectCase("select_f32_broadcast", tt(B, {3, 1, 5}), tt(F, {3, 4, 5}), tt(F, {1, 4, 5}), tt(F, {3, 4, 5}));
  selectCase("select_f32_row_flag", tt(B, {3, 4, 1}), tt(F, {3, 4, 40}), tt(F, {3, 4, 40}), tt(F, {3, 4, 40}));
  {
    Case c = unary("clamp", F, s, [](double x) { return sat(x, -0.5, 0.75); });
    c.body = "  %r0 = \"tosa.clamp\"(%a0) <{min_val = -0.5 : f32, max_val = 0.75 : f32}> : "
             "(tensor<3x37xf32>) -> tensor<3x37xf32>\n";
    cs.push_back(c);
    Case ci = unary("clamp", I, s, [](double x) { return sat(x, -3, 5); }, {-10, 10});
    ci.body = "  %r0 = \"tosa.clamp\"(%a0) <{min_val = -3 : i32, max_val = 5 : i32}> : "
              "(tensor<3x37xi32>) -> tensor<3x37xi32>\n";
    cs.push_back(ci);
  }

  // Casts.
  cs.push_back(cast(F, I, [](double x) { return std::nearbyint(float(x)); }, {-100, 100}));
  cs.push_back(cast(F, DType::i8, [](double x) { return sat(std::nearbyint(float(x)), -128, 127); },
                    {-300, 300}));
  cs.push_back(cast(I, F, [](double x) { return x; }, {-1000, 1000}));
  cs.push_back(cast(DType::i8, I, [](double x) { return x; }, {-128, 127}));
  cs.push_back(cast(I, DType::i8, [](double x) { return double(int8_t(int32_t(x))); }, {-1000, 1000}));
  cs.push_back(cast(F, DType::f16, roundF16, {-100, 100}));
  cs.push_back(cast(F, DType::bf16, roundBf16, {-100, 100}));
  cs.push_back(cast(DType::f16, F, [](double x) { return x; }, {-100, 100}));
  cs.push_back(cast(B, I, [](double x) { return x; }, {0, 1}));
  cs.push_back(cast(F, B, [](double x) { return x != 0; }, {-1, 1}));

  // Reductions.
  auto add = [](double a, double b) { return a + b; };
  auto mul = [](double a, double b) { return a * b; };
  auto mx = [](double a, double b) { return std::max(a, b); };
  auto mn = [](double a, double b) { return std::min(a, b); };
  double inf = std::numeric_limits<double>::infinity();
  cs.push_back(reduce("reduce_sum", F, {3, 5, 7}, 0, add, 0));
  cs.push_back(reduce("reduce_sum", F, {3, 5, 7}, 2, add, 0));
  cs.push_back(reduce("reduce_product", F, {3, 5, 7}, 1, mul, 1));
  cs.push_back(reduce("reduce_max", F, {3, 5, 7}, 1, mx, -inf));
  cs.push_back(reduce("reduce_min", F, {3, 5, 7}, 2, mn, inf));
  cs.push_back(reduce("reduce_sum", I, {3, 5, 7}, 1, add, 0));
  cs.push_back(reduce("reduce_max", I, {3, 5, 7}, 0, mx, -inf));
  // Over 1 MiB: parallel blocks of the outer parallel loops (a
  // squeeze-and-excitation pool over W of a 56x56x144 map; a reduction over
  // the outermost loop, which the blocks must leave whole).
  for (auto [op, shape, axis] : {std::tuple<const char *, std::vector<int64_t>, int>{"reduce_sum", {1, 56, 56, 144}, 2},
                                 {"reduce_max", {64, 72, 64}, 0}}) {
    Case c = reduce(op, F, shape, axis, std::string(op) == "reduce_sum" ? add : mx,
                    std::string(op) == "reduce_sum" ? 0 : -inf);
    c.name += "_parallel";
    c.atol = 2e-5;  // 56 f32 terms of up to 2: rounding of a few 1e-6 where they cancel
    cs.push_back(c);
  }
  {
    Case c = reduce("reduce_all", B, {3, 5}, 1, [](double a, double b) { return double(a && b); }, 1);
    c.ranges = {{0.2, 1}};  // mostly true, so both answers occur
    cs.push_back(c);
    Case c2 = reduce("reduce_any", B, {3, 5}, 0, [](double a, double b) { return double(a || b); }, 0);
    c2.ranges = {{0, 0.6}};
    cs.push_back(c2);
  }
  {
    Case c;
    TensorType t = tt(F, {4, 9}), o = tt(I, {4});
    c.name = "argmax_f32";
    c.args = {t};
    c.results = {o};
    c.body = "  %r0 = \"tosa.argmax\"(%a0) <{axis = 1 : i32}> : (" + mt(t) + ") -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(4);
      for (int r = 0; r < 4; ++r)
        y[r] = double(std::max_element(in[0].begin() + r * 9, in[0].begin() + r * 9 + 9) -
                      (in[0].begin() + r * 9));
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }

  // Data movement.
  {
    Case c;
    TensorType t = tt(F, {2, 3, 4}), o = tt(F, {4, 2, 3});
    c.name = "transpose_f32";
    c.args = {t};
    c.results = {o};
    c.body = "  %r0 = \"tosa.transpose\"(%a0) <{perms = array<i32: 2, 0, 1>}> : (" + mt(t) +
             ") -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(24);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
          for (int k = 0; k < 4; ++k) y[(k * 2 + a) * 3 + b] = in[0][(a * 3 + b) * 4 + k];
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  // Transposes as attention and image layouts write them: the head split
  // (rows stay rows: vectors, a tail of 4 when rows are 20), K^T (the
  // innermost dimension moves: blocks transposed in registers, 16x12 /
  // 8x8 / 4x4 by vector width), int32 too; a 3-wide innermost dimension
  // (NCHW -> NHWC of an image) stays on loops.
  auto transposeCase = [&](std::string name, DType d, std::vector<int64_t> in, std::vector<int64_t> perm) {
    Case c;
    std::vector<int64_t> out(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) out[k] = in[size_t(perm[k])];
    TensorType t = tt(d, in), o = tt(d, out);
    c.name = std::move(name);
    c.args = {t};
    c.results = {o};
    std::string perms;
    for (int64_t q : perm) perms += (perms.empty() ? "" : ", ") + std::to_string(q);
    c.body = "  %r0 = \"tosa.transpose\"(%a0) <{perms = array<i32: " + perms + ">}> : (" + mt(t) + ") -> " +
             mt(o) + "\n";
    c.ref = [in, out, perm](const std::vector<Values> &x) {
      size_t n = x[0].size(), rank = in.size();
      Values y(n);
      std::vector<int64_t> idx(rank, 0);  // output index, row-major
      for (size_t e = 0; e < n; ++e) {
        int64_t src = 0;  // input offset of output element idx
        for (size_t a = 0; a < rank; ++a) {
          // input dim a is output dim k with perm[k] == a
          size_t k = size_t(std::find(perm.begin(), perm.end(), int64_t(a)) - perm.begin());
          src = src * in[a] + idx[k];
        }
        y[e] = x[0][size_t(src)];
        for (size_t k = rank; k-- > 0;)
          if (++idx[k] < out[k]) break;
          else idx[k] = 0;
      }
      return std::vector<Values>{y};
    };
    c.ranges = {d == I ? std::pair<double, double>{-50, 50} : std::pair<double, double>{-2, 2}};
    cs.push_back(c);
  };
  transposeCase("transpose_heads_f32", F, {1, 24, 4, 16}, {0, 2, 1, 3});
  transposeCase("transpose_heads_tail_f32", F, {1, 6, 3, 20}, {0, 2, 1, 3});
  transposeCase("transpose_kt_f32", F, {1, 24, 3, 16}, {0, 2, 3, 1});
  transposeCase("transpose_kt_i32", I, {1, 32, 2, 16}, {0, 2, 3, 1});
  transposeCase("transpose_nchw_to_nhwc_f32", F, {1, 3, 10, 12}, {0, 2, 3, 1});
  // K^T over keys that no block of 8 divides (37, 21: vector blocks and a
  // peeled remainder, as ViT's 197).
  transposeCase("transpose_kt_odd_keys_f32", F, {1, 2, 37, 16}, {0, 1, 3, 2});
  transposeCase("transpose_kt_odd_keys_i32", I, {1, 3, 21, 8}, {0, 1, 3, 2});
  // Output rows of a few elements whose dimension before them is the
  // input's innermost: blocks (two batches, and rows of 1100 in chunks of
  // 1024 on the kernel).
  transposeCase("transpose_nchw_to_nhwc_long_rows_f32", F, {2, 3, 4, 1100}, {0, 2, 3, 1});
  transposeCase("transpose_short_rows_i32", I, {2, 5, 3, 7}, {0, 2, 3, 1});
  // ShuffleNet's layout changes around its channel shuffle: 58 channels,
  // which no block of 8 or more divides (on loops; blocks over the whole
  // vectors of channels and the rest on loops made its kernels 17% faster
  // but their compile 0.7 s longer, and were not kept).
  transposeCase("transpose_nhwc_to_nchw_ragged_f32", F, {1, 6, 12, 58}, {0, 3, 1, 2});
  transposeCase("transpose_nchw_to_nhwc_ragged_f32", F, {1, 58, 6, 12}, {0, 2, 3, 1});
  {
    Case c;
    TensorType t = tt(I, {2, 3, 4}), o = tt(I, {6, 4});
    c.name = "reshape_i32";
    c.args = {t};
    c.results = {o};
    c.body = shapeConst("s", {6, 4}) + "  %r0 = \"tosa.reshape\"(%a0, %s) : (" + mt(t) +
             ", !tosa.shape<2>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) { return std::vector<Values>{in[0]}; };
    c.ranges = {{-100, 100}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType t = tt(F, {4, 6}), o = tt(F, {2, 3});
    c.name = "slice_f32";
    c.args = {t};
    c.results = {o};
    c.body = shapeConst("st", {1, 2}) + shapeConst("sz", {2, 3}) +
             "  %r0 = \"tosa.slice\"(%a0, %st, %sz) : (" + mt(t) +
             ", !tosa.shape<2>, !tosa.shape<2>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y;
      for (int i = 1; i < 3; ++i)
        for (int j = 2; j < 5; ++j) y.push_back(in[0][i * 6 + j]);
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType t = tt(F, {2, 3}), o = tt(F, {3, 6});
    c.name = "pad_f32";
    c.args = {t};
    c.results = {o};
    c.body = shapeConst("p", {1, 0, 2, 1}) +
             "  %pc = \"tosa.const\"() <{values = dense<-1.5> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
             "  %r0 = \"tosa.pad\"(%a0, %p, %pc) : (" + mt(t) + ", !tosa.shape<4>, tensor<1xf32>) -> " +
             mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(18, -1.5);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) y[(i + 1) * 6 + j + 2] = in[0][i * 3 + j];
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  // tosa.pad in every other dtype its kernel takes: the kernel moves
  // elements by size (issue 31: the f16/bf16 kernel wrote nothing and
  // returned whatever the output memory held).
  for (DType d : {DType::f16, DType::bf16, DType::f64, DType::i8, DType::i32, DType::i64}) {
    Case c;
    TensorType t = tt(d, {2, 3}), o = tt(d, {3, 6});
    std::string ty = std::string(dtypeName(d));
    c.name = "pad_" + ty;
    c.args = {t};
    c.results = {o};
    double fill = isFloat(d) ? -1.5 : -3;
    c.body = shapeConst("p", {1, 0, 2, 1}) + "  %pc = \"tosa.const\"() <{values = dense<" +
             (isFloat(d) ? std::string("-1.5") : std::string("-3")) + "> : tensor<1x" + ty + ">}> : () -> tensor<1x" +
             ty + ">\n" + "  %r0 = \"tosa.pad\"(%a0, %p, %pc) : (" + mt(t) + ", !tosa.shape<4>, tensor<1x" + ty +
             ">) -> " + mt(o) + "\n";
    c.ref = [fill](const std::vector<Values> &in) {
      Values y(18, fill);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) y[(i + 1) * 6 + j + 2] = in[0][i * 3 + j];
      return std::vector<Values>{y};
    };
    c.ranges = {{-8, 8}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType a = tt(F, {2, 3}), b = tt(F, {2, 2}), o = tt(F, {2, 5});
    c.name = "concat_f32_axis1";
    c.args = {a, b};
    c.results = {o};
    c.body = "  %r0 = \"tosa.concat\"(%a0, %a1) <{axis = 1 : i32}> : (" + mt(a) + ", " + mt(b) +
             ") -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y;
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 3; ++j) y.push_back(in[0][i * 3 + j]);
        for (int j = 0; j < 2; ++j) y.push_back(in[1][i * 2 + j]);
      }
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}, {-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType t = tt(I, {3, 4});
    c.name = "reverse_i32_axis0";
    c.args = {t};
    c.results = {t};
    c.body = "  %r0 = \"tosa.reverse\"(%a0) <{axis = 0 : i32}> : (" + mt(t) + ") -> " + mt(t) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(12);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) y[(2 - i) * 4 + j] = in[0][i * 4 + j];
      return std::vector<Values>{y};
    };
    c.ranges = {{-100, 100}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType t = tt(F, {2, 3}), o = tt(F, {4, 6});
    c.name = "tile_f32";
    c.args = {t};
    c.results = {o};
    c.body = shapeConst("m", {2, 2}) + "  %r0 = \"tosa.tile\"(%a0, %m) : (" + mt(t) +
             ", !tosa.shape<2>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(24);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) y[i * 6 + j] = in[0][(i % 2) * 3 + j % 3];
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType v = tt(F, {2, 5, 3}), idx = tt(I, {2, 4}), o = tt(F, {2, 4, 3});
    c.name = "gather_f32";
    c.args = {v, idx};
    c.results = {o};
    c.body = "  %r0 = \"tosa.gather\"(%a0, %a1) : (" + mt(v) + ", " + mt(idx) + ") -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(24);
      for (int n = 0; n < 2; ++n)
        for (int w = 0; w < 4; ++w)
          for (int ch = 0; ch < 3; ++ch)
            y[(n * 4 + w) * 3 + ch] = in[0][(n * 5 + int(in[1][n * 4 + w])) * 3 + ch];
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}, {0, 4.999}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType v = tt(F, {2, 5, 3}), in = tt(F, {2, 2, 3});
    c.name = "scatter_f32";
    c.args = {v, in};
    c.results = {v};
    c.body = "  %idx = \"tosa.const\"() <{values = dense<[[1, 3], [4, 0]]> : tensor<2x2xi32>}> : () -> tensor<2x2xi32>\n"
             "  %r0 = \"tosa.scatter\"(%a0, %idx, %a1) : (" + mt(v) + ", tensor<2x2xi32>, " + mt(in) +
             ") -> " + mt(v) + "\n";
    c.ref = [](const std::vector<Values> &x) {
      Values y = x[0];
      const int idx[2][2] = {{1, 3}, {4, 0}};
      for (int n = 0; n < 2; ++n)
        for (int w = 0; w < 2; ++w)
          for (int ch = 0; ch < 3; ++ch) y[(n * 5 + idx[n][w]) * 3 + ch] = x[1][(n * 2 + w) * 3 + ch];
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}, {-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(DType::i8, {3, 11}), table = tt(DType::i8, {256});
    c.name = "table_i8";
    c.args = {x, table};
    c.results = {x};
    c.body = "  %r0 = \"tosa.table\"(%a0, %a1) : (" + mt(x) + ", " + mt(table) + ") -> " + mt(x) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[0], [&](float v) { return float(in[1][int(v) + 128]); })};
    };
    c.ranges = {{-128, 127.99}, {-128, 127.99}};
    cs.push_back(c);
  }

  // Convolutions, matmul, pooling (f32, and i8 with i32 accumulation).
  {
    Case c;
    TensorType x = tt(F, {1, 7, 9, 3}), w = tt(F, {4, 3, 3, 3}), b = tt(F, {4}), o = tt(F, {1, 4, 8, 4});
    c.name = "conv2d_f32_stride_pad_dilation";
    c.args = {x, w, b};
    c.results = {o};
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.conv2d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, "
             "pad = array<i64: 1, 1, 2, 1>, stride = array<i64: 2, 1>, dilation = array<i64: 1, 2>}> : (" +
             mt(x) + ", " + mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      const int64_t pad[4] = {1, 1, 2, 1}, st[2] = {2, 1}, dl[2] = {1, 2};
      ref::Dims os;
      ref::Vec y = ref::conv2d(ref::Vec(in[0].begin(), in[0].end()), {1, 7, 9, 3},
                               ref::Vec(in[1].begin(), in[1].end()), {4, 3, 3, 3},
                               ref::Vec(in[2].begin(), in[2].end()), pad, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(DType::i8, {1, 5, 5, 2}), w = tt(DType::i8, {3, 3, 3, 2}), b = tt(I, {3}),
               o = tt(I, {1, 5, 5, 3});
    c.name = "conv2d_i8_acc_i32";
    c.args = {x, w, b};
    c.results = {o};
    c.body = zeroConst("zp", DType::i8) +
             "  %r0 = \"tosa.conv2d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = i32, "
             "pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>}> : (" +
             mt(x) + ", " + mt(w) + ", " + mt(b) + ", tensor<1xi8>, tensor<1xi8>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      const int64_t pad[4] = {1, 1, 1, 1}, st[2] = {1, 1}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec y = ref::conv2d(ref::Vec(in[0].begin(), in[0].end()), {1, 5, 5, 2},
                               ref::Vec(in[1].begin(), in[1].end()), {3, 3, 3, 2},
                               ref::Vec(in[2].begin(), in[2].end()), pad, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-128, 127.99}, {-128, 127.99}, {-1000, 1000}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(F, {1, 6, 6, 2}), w = tt(F, {3, 3, 2, 2}), b = tt(F, {4}), o = tt(F, {1, 3, 3, 4});
    c.name = "depthwise_conv2d_f32";
    c.args = {x, w, b};
    c.results = {o};
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.depthwise_conv2d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, "
             "pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>}> : (" +
             mt(x) + ", " + mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      const int64_t pad[4] = {1, 0, 1, 0}, st[2] = {2, 2}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec y = ref::depthwiseConv2d(ref::Vec(in[0].begin(), in[0].end()), {1, 6, 6, 2},
                                        ref::Vec(in[1].begin(), in[1].end()), {3, 3, 2, 2},
                                        ref::Vec(in[2].begin(), in[2].end()), pad, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(F, {1, 4, 5, 5, 2}), w = tt(F, {3, 2, 3, 3, 2}), b = tt(F, {3}),
               o = tt(F, {1, 3, 5, 5, 3});
    c.name = "conv3d_f32";
    c.args = {x, w, b};
    c.results = {o};
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.conv3d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, "
             "pad = array<i64: 0, 0, 1, 1, 1, 1>, stride = array<i64: 1, 1, 1>, dilation = array<i64: 1, 1, 1>}> : (" +
             mt(x) + ", " + mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(75 * 3);
      for (int od = 0; od < 3; ++od)
        for (int oh = 0; oh < 5; ++oh)
          for (int ow = 0; ow < 5; ++ow)
            for (int f = 0; f < 3; ++f) {
              double acc = in[2][f];
              for (int kd = 0; kd < 2; ++kd)
                for (int kh = 0; kh < 3; ++kh)
                  for (int kw = 0; kw < 3; ++kw) {
                    int id = od + kd, ih = oh + kh - 1, iw = ow + kw - 1;
                    if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
                    for (int ch = 0; ch < 2; ++ch)
                      acc += in[0][(((id * 5) + ih) * 5 + iw) * 2 + ch] *
                             in[1][((((f * 2 + kd) * 3 + kh) * 3) + kw) * 2 + ch];
                  }
              y[((od * 5 + oh) * 5 + ow) * 3 + f] = acc;
            }
      return std::vector<Values>{y};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(F, {1, 3, 3, 2}), w = tt(F, {3, 3, 3, 2}), b = tt(F, {3}), o = tt(F, {1, 7, 7, 3});
    c.name = "transpose_conv2d_f32";
    c.args = {x, w, b};
    c.results = {o};
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.transpose_conv2d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, "
             "out_pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (" +
             mt(x) + ", " + mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      Values y(49 * 3);
      for (int i = 0; i < 49; ++i)
        for (int f = 0; f < 3; ++f) y[i * 3 + f] = in[2][f];
      for (int ih = 0; ih < 3; ++ih)
        for (int iw = 0; iw < 3; ++iw)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              for (int f = 0; f < 3; ++f)
                for (int ch = 0; ch < 2; ++ch)
                  y[((ih * 2 + kh) * 7 + iw * 2 + kw) * 3 + f] +=
                      in[0][(ih * 3 + iw) * 2 + ch] * in[1][((f * 3 + kh) * 3 + kw) * 2 + ch];
      return std::vector<Values>{y};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  for (DType d : {F, DType::i8}) {
    Case c;
    DType acc = d == F ? F : I;
    TensorType a = tt(d, {2, 3, 17}), b = tt(d, {2, 17, 5}), o = tt(acc, {2, 3, 5});
    std::string zt = "tensor<1x" + std::string(dtypeName(d)) + ">";
    c.name = "matmul_" + std::string(dtypeName(d));
    c.args = {a, b};
    c.results = {o};
    c.body = zeroConst("zp", d) + "  %r0 = \"tosa.matmul\"(%a0, %a1, %zp, %zp) : (" + mt(a) + ", " +
             mt(b) + ", " + zt + ", " + zt + ") -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      ref::Vec y = ref::matmul(ref::Vec(in[0].begin(), in[0].end()), ref::Vec(in[1].begin(), in[1].end()),
                               2, 3, 17, 5);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = d == F ? std::vector<std::pair<double, double>>{{-1, 1}, {-1, 1}}
                      : std::vector<std::pair<double, double>>{{-128, 127.99}, {-128, 127.99}};
    c.rtol = 1e-5;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  for (bool isMax : {true, false}) {
    Case c;
    TensorType x = tt(F, {1, 6, 7, 3}), o = tt(F, {1, 3, 4, 3});
    c.name = isMax ? "max_pool2d_f32_padded" : "avg_pool2d_f32_padded";
    c.args = {x};
    c.results = {o};
    std::string geo = "kernel = array<i64: 3, 2>, stride = array<i64: 2, 2>, pad = array<i64: 1, 0, 0, 1>";
    c.body = isMax ? "  %r0 = \"tosa.max_pool2d\"(%a0) <{" + geo + "}> : (" + mt(x) + ") -> " + mt(o) + "\n"
                   : zeroConst("zp", F) + "  %r0 = \"tosa.avg_pool2d\"(%a0, %zp, %zp) <{acc_type = f32, " +
                         geo + "}> : (" + mt(x) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [isMax](const std::vector<Values> &in) {
      const int64_t k[2] = {3, 2}, st[2] = {2, 2}, pad[4] = {1, 0, 0, 1};
      ref::Dims os;
      ref::Vec y = ref::pool2d(ref::Vec(in[0].begin(), in[0].end()), {1, 6, 7, 3}, k, st, pad, isMax, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(F, {1, 2, 3, 2}), o = tt(F, {1, 3, 5, 2});
    c.name = "resize_nearest_f32";
    c.args = {x};
    c.results = {o};
    c.body = shapeConst("sc", {2, 1, 2, 1}) + shapeConst("off", {0, 0}) +
             "  %r0 = \"tosa.resize\"(%a0, %sc, %off, %off) <{mode = #tosa.resize_mode<NEAREST_NEIGHBOR>}> : (" +
             mt(x) + ", !tosa.shape<4>, !tosa.shape<2>, !tosa.shape<2>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      // TOSA: y = oy * scale_d + offset; iy = y / scale_n; round up when the remainder >= scale_n / 2.
      Values y;
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 5; ++ox)
          for (int ch = 0; ch < 2; ++ch) {
            int iy = oy / 2 + (oy % 2 >= 1 ? 1 : 0), ix = ox / 2 + (ox % 2 >= 1 ? 1 : 0);
            iy = std::min(iy, 1);
            ix = std::min(ix, 2);
            y.push_back(in[0][(iy * 3 + ix) * 2 + ch]);
          }
      return std::vector<Values>{y};
    };
    c.ranges = {{-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(I, {3, 7}), o = tt(DType::i8, {3, 7});
    c.name = "rescale_i32_to_i8_half";
    c.args = {x};
    c.results = {o};
    c.body = "  %m = \"tosa.const\"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>\n"
             "  %s = \"tosa.const\"() <{values = dense<31> : tensor<1xi8>}> : () -> tensor<1xi8>\n" +
             zeroConst("zi", I) + zeroConst("zo", DType::i8) +
             "  %r0 = \"tosa.rescale\"(%a0, %m, %s, %zi, %zo) <{scale32 = true, rounding_mode = "
             "#tosa.rounding_mode<SINGLE_ROUND>, per_channel = false, input_unsigned = false, "
             "output_unsigned = false}> : (" + mt(x) +
             ", tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> " + mt(o) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[0], [](float v) {
        int64_t r = (int64_t(v) * (int64_t(1) << 30) + (int64_t(1) << 30)) >> 31;
        return float(sat(double(r), -128, 127));
      })};
    };
    c.ranges = {{-400, 400}};
    cs.push_back(c);
  }
  {
    // apply_scale: (value * multiplier + 2^(shift-1)) >> shift, elementwise.
    Case c;
    TensorType x = tt(I, {3, 7}), m = tt(I, {3, 7}), sh = tt(DType::i8, {3, 7});
    c.name = "apply_scale_i32_single_round";
    c.args = {x};
    c.results = {x};
    c.body = "  %m = \"tosa.const\"() <{values = dense<1073741824> : " + mt(m) + "}> : () -> " + mt(m) + "\n" +
             "  %s = \"tosa.const\"() <{values = dense<31> : " + mt(sh) + "}> : () -> " + mt(sh) + "\n" +
             "  %r0 = \"tosa.apply_scale\"(%a0, %m, %s) <{rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>}> : (" +
             mt(x) + ", " + mt(m) + ", " + mt(sh) + ") -> " + mt(x) + "\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[0], [](float v) {
        return float((int64_t(v) * (int64_t(1) << 30) + (int64_t(1) << 30)) >> 31);
      })};
    };
    c.ranges = {{-400, 400}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType x = tt(F, {2, 4, 8}), o = tt(F, {2, 4, 5});
    c.name = "rfft2d_f32";
    c.args = {x};
    c.results = {o, o};
    c.body = "  %r0, %r1 = \"tosa.rfft2d\"(%a0) : (" + mt(x) + ") -> (" + mt(o) + ", " + mt(o) + ")\n";
    c.ref = [](const std::vector<Values> &in) {
      Values re(40), im(40);
      for (int n = 0; n < 2; ++n)
        for (int oy = 0; oy < 4; ++oy)
          for (int ox = 0; ox < 5; ++ox) {
            double sr = 0, si = 0;
            for (int iy = 0; iy < 4; ++iy)
              for (int ix = 0; ix < 8; ++ix) {
                double a = 2 * M_PI * (double(iy * oy) / 4 + double(ix * ox) / 8);
                double v = in[0][(n * 4 + iy) * 8 + ix];
                sr += v * std::cos(a);
                si -= v * std::sin(a);
              }
            re[(n * 4 + oy) * 5 + ox] = sr;
            im[(n * 4 + oy) * 5 + ox] = si;
          }
      return std::vector<Values>{re, im};
    };
    c.ranges = {{-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }

  for (bool inverse : {false, true}) {
    Case c;
    TensorType x = tt(F, {2, 4, 8});
    c.name = inverse ? "fft2d_inverse_f32" : "fft2d_f32";
    c.args = {x, x};
    c.results = {x, x};
    c.body = std::string("  %r0, %r1 = \"tosa.fft2d\"(%a0, %a1) <{inverse = ") + (inverse ? "true" : "false") +
             "}> : (" + mt(x) + ", " + mt(x) + ") -> (" + mt(x) + ", " + mt(x) + ")\n";
    c.ref = [inverse](const std::vector<Values> &in) {
      // TOSA FFT2D (unnormalized): a = sign * 2pi (iy*oy/H + ix*ox/W), sign = -1 when inverse.
      Values re(64), im(64);
      double sign = inverse ? -1.0 : 1.0;
      for (int n = 0; n < 2; ++n)
        for (int oy = 0; oy < 4; ++oy)
          for (int ox = 0; ox < 8; ++ox) {
            double sr = 0, si = 0;
            for (int iy = 0; iy < 4; ++iy)
              for (int ix = 0; ix < 8; ++ix) {
                double a = sign * 2 * M_PI * (double(iy * oy) / 4 + double(ix * ox) / 8);
                double vr = in[0][(n * 4 + iy) * 8 + ix], vi = in[1][(n * 4 + iy) * 8 + ix];
                sr += vr * std::cos(a) + vi * std::sin(a);
                si += -vr * std::sin(a) + vi * std::cos(a);
              }
            re[(n * 4 + oy) * 8 + ox] = sr;
            im[(n * 4 + oy) * 8 + ox] = si;
          }
      return std::vector<Values>{re, im};
    };
    c.ranges = {{-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }

  // Control flow (tosa-to-scf).
  {
    Case c;
    TensorType p = tt(B, {}), x = tt(F, {5});
    c.name = "cond_if_f32";
    c.args = {p, x};
    c.results = {x};
    c.body = "  %r0 = \"tosa.cond_if\"(%a0, %a1) ({\n"
             "  ^bb0(%t: tensor<5xf32>):\n"
             "    %e = \"tosa.exp\"(%t) : (tensor<5xf32>) -> tensor<5xf32>\n"
             "    \"tosa.yield\"(%e) : (tensor<5xf32>) -> ()\n"
             "  }, {\n"
             "  ^bb0(%t: tensor<5xf32>):\n"
             "    %e = \"tosa.abs\"(%t) : (tensor<5xf32>) -> tensor<5xf32>\n"
             "    \"tosa.yield\"(%e) : (tensor<5xf32>) -> ()\n"
             "  }) : (tensor<i1>, tensor<5xf32>) -> tensor<5xf32>\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[1], [&](float v) {
        return in[0][0] ? std::exp(v) : std::abs(v);
      })};
    };
    c.ranges = {{0, 1}, {-2, 2}};
    cs.push_back(c);
  }
  {
    Case c;
    TensorType n = tt(I, {}), x = tt(F, {4});
    c.name = "while_loop_f32";
    c.args = {n, x};
    c.results = {x};
    // Doubles x, n times.
    c.body = "  %zero = \"tosa.const\"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>\n"
             "  %one = \"tosa.const\"() <{values = dense<1> : tensor<i32>}> : () -> tensor<i32>\n"
             "  %w:2 = \"tosa.while_loop\"(%a0, %a1) ({\n"
             "  ^bb0(%i: tensor<i32>, %v: tensor<4xf32>):\n"
             "    %c = \"tosa.greater\"(%i, %zero) : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
             "    \"tosa.yield\"(%c) : (tensor<i1>) -> ()\n"
             "  }, {\n"
             "  ^bb0(%i: tensor<i32>, %v: tensor<4xf32>):\n"
             "    %i2 = \"tosa.sub\"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n"
             "    %v2 = \"tosa.add\"(%v, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
             "    \"tosa.yield\"(%i2, %v2) : (tensor<i32>, tensor<4xf32>) -> ()\n"
             "  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)\n"
             "  %r0 = \"tosa.identity\"(%w#1) : (tensor<4xf32>) -> tensor<4xf32>\n";
    c.ref = [](const std::vector<Values> &in) {
      return std::vector<Values>{mapD(in[1],
                                          [&](float v) { return v * std::pow(2.0f, float(in[0][0])); })};
    };
    c.ranges = {{0, 6.99}, {-2, 2}};
    cs.push_back(c);
  }
  // Distinct test names: the same op at another shape gets its rank appended.
  std::map<std::string, int> seen;
  for (Case &c : cs)
    if (seen[c.name]++) c.name += "_rank" + std::to_string(c.args[0].shape.size());
  return cs;
}

/// Shape sweeps around vector and tile edges (8/16-wide vectors, 32-row
/// blocks), with broadcasting, odd strides and paddings.
std::vector<Case> sweepCases() {
  std::vector<Case> cs;
  const DType F = DType::f32;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000}) {
    Case c = binary("add", F, {2, n}, {2, n}, [](double a, double b) { return a + b; }, F);
    c.name = "add_f32_2x" + std::to_string(n);
    cs.push_back(c);
    Case e = unary("exp", F, {n}, [](double x) { return std::exp(x); });
    e.name = "exp_f32_" + std::to_string(n);
    cs.push_back(e);
  }
  // 1 MiB and more: rows shared among the threads (kiln-cpu-strategy),
  // a broadcast operand sliced with them; row counts that 8 does not divide.
  for (auto [a, b] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{300, 1000}, {300, 1000}}, {{3, 299, 333}, {3, 1, 333}}}) {
    Case c = binary("add", F, a, b, [](double x, double y) { return x + y; }, F);
    c.name = "add_parallel_" + shapeToString(a) + "_" + shapeToString(b);
    cs.push_back(c);
  }
  {
    Case e = unary("exp", F, {257, 1031}, [](double x) { return std::exp(x); });
    e.name = "exp_parallel_257x1031";
    cs.push_back(e);
    Case r = reduce("reduce_sum", F, {2, 150, 1000}, 2, [](double a, double b) { return a + b; }, 0);
    r.name = "reduce_sum_parallel_2x150x1000";
    r.rtol = 1e-5;
    r.atol = 1e-5;
    cs.push_back(r);
  }
  for (auto [a, b] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{1, 17}, {5, 17}}, {{5, 1}, {5, 33}}, {{1, 1}, {9, 65}}, {{4, 1, 16}, {1, 3, 16}},
           // the kernel's rows: trailing dimensions merged while both
           // operands stay contiguous or both broadcast, and not past that
           {{2, 3, 4}, {1, 3, 4}}, {{2, 3, 4}, {2, 1, 4}}, {{2, 3, 1}, {2, 3, 4}}, {{1, 1, 1, 1}, {1, 7, 9, 33}},
           {{1, 7, 1, 33}, {1, 7, 9, 33}}, {{1, 7, 9, 1}, {1, 1, 9, 1}}, {{3, 1, 5, 1}, {3, 4, 5, 6}}}) {
    Case c = binary("mul", F, a, b, [](double x, double y) { return x * y; }, F);
    c.name = "mul_broadcast_" + shapeToString(a) + "_" + shapeToString(b);
    cs.push_back(c);
  }
  struct MatmulShape {
    int64_t m, k, n, batch = 1;
  };
  for (auto [m, k, n, batch] : std::vector<MatmulShape>{
           {1, 1, 1}, {1, 64, 10}, {3, 5, 7}, {8, 32, 1}, {17, 33, 65}, {32, 16, 32}, {33, 9, 31}, {64, 64, 64},
           // register and cache tiles of kiln-cpu-strategy: whole, partial, odd
           {24, 300, 96}, {128, 64, 512}, {6, 40, 48}, {1, 512, 100},
           // rows that no good register tile divides: whole tiles and a
           // tail tile (7 rows at 256 bits; 13 at both widths, batched)
           {7, 48, 64}, {13, 40, 32, 2},
           // the kernel's column panels (64 wide): a 16-wide tail panel, batched
           {37, 24, 80, 3},
           // columns no vector divides (ViT's 197 tokens): whole-vector
           // tiles and one of the rest (5 at both widths; 1000 classes: 8
           // at 512 bits), rows with a tail; a prime reduction (x V over
           // 197 keys) in one block
           {19, 64, 197, 2}, {13, 40, 1000}, {13, 197, 64, 2},
           // a vector times a matrix of over 1 MiB: the kernel splits the
           // rows into uneven runs, one partial sum each; batched, each
           // batch's partial sums start afresh
           {1, 1281, 250}, {1, 700, 300, 3}}) {
    Case c;
    TensorType a = tt(F, {batch, m, k}), b = tt(F, {batch, k, n}), o = tt(F, {batch, m, n});
    c.name = "matmul_" + (batch > 1 ? std::to_string(batch) + "x" : std::string()) + std::to_string(m) + "x" +
             std::to_string(k) + "x" + std::to_string(n);
    c.args = {a, b};
    c.results = {o};
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.matmul\"(%a0, %a1, %zp, %zp) : (" + mt(a) + ", " + mt(b) +
             ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [m = m, k = k, n = n, batch = batch](const std::vector<Values> &in) {
      ref::Vec y =
          ref::matmul(ref::Vec(in[0].begin(), in[0].end()), ref::Vec(in[1].begin(), in[1].end()), batch, m, k, n);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  // A transformer's linear layer as torch-mlir exports it: a batch-1
  // matmul, a reshape to 2-D, the bias, a reshape back and GELU (erf). Big
  // enough for parallel tiles, into which kiln-cpu-strategy fuses the bias
  // and the GELU (the matmul flattened to 2-D, the two epilogues fused).
  // Over several k blocks (k = 600) each parallel block sums its products
  // in a buffer of its own, read by the epilogue; 50 rows leave a tail of
  // 2 after 6-row tiles (two FMA pipes), the row loop's peeled remainder.
  for (auto [m, k, n] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{64, 128, 256}, {32, 96, 384}, {50, 600, 256}}) {
    Case c;
    TensorType a = tt(F, {1, m, k}), b = tt(F, {1, k, n}), bias = tt(F, {1, n}), o = tt(F, {1, m, n}),
               flat = tt(F, {m, n});
    c.name = "matmul_bias_gelu_" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    c.args = {a, b, bias};
    c.results = {o};
    c.body = zeroConst("zp", F) +
             "  %s2 = tosa.const_shape {values = dense<[" + std::to_string(m) + ", " + std::to_string(n) +
             "]> : tensor<2xindex>} : () -> !tosa.shape<2>\n"
             "  %s3 = tosa.const_shape {values = dense<[1, " + std::to_string(m) + ", " + std::to_string(n) +
             "]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
             "  %half = \"tosa.const\"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
             "  %one = \"tosa.const\"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
             "  %rs2 = \"tosa.const\"() <{values = dense<0.707106769> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
             "  %sh = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
             "  %y = tosa.matmul %a0, %a1, %zp, %zp : (" + mt(a) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " +
             mt(o) + "\n"
             "  %f = tosa.reshape %y, %s2 : (" + mt(o) + ", !tosa.shape<2>) -> " + mt(flat) + "\n"
             "  %fb = tosa.add %f, %a2 : (" + mt(flat) + ", " + mt(bias) + ") -> " + mt(flat) + "\n"
             "  %z = tosa.reshape %fb, %s3 : (" + mt(flat) + ", !tosa.shape<3>) -> " + mt(o) + "\n"
             "  %zs = tosa.mul %z, %rs2, %sh : (" + mt(o) + ", tensor<1x1x1xf32>, tensor<1xi8>) -> " + mt(o) + "\n"
             "  %e = tosa.erf %zs : (" + mt(o) + ") -> " + mt(o) + "\n"
             "  %e1 = tosa.add %e, %one : (" + mt(o) + ", tensor<1x1x1xf32>) -> " + mt(o) + "\n"
             "  %eh = tosa.mul %e1, %half, %sh : (" + mt(o) + ", tensor<1x1x1xf32>, tensor<1xi8>) -> " + mt(o) + "\n"
             "  %r0 = tosa.mul %z, %eh, %sh : (" + mt(o) + ", " + mt(o) + ", tensor<1xi8>) -> " + mt(o) + "\n";
    c.ref = [m = m, k = k, n = n](const std::vector<Values> &in) {
      ref::Vec y = ref::matmul(ref::Vec(in[0].begin(), in[0].end()), ref::Vec(in[1].begin(), in[1].end()), 1, m, k, n);
      for (int64_t i = 0; i < m * n; ++i) {
        double z = y[i] + in[2][size_t(i % n)];
        y[i] = z * 0.5 * (1.0 + std::erf(z * 0.707106769));
      }
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }
  struct Conv {
    int64_t h, w, c, f, k, s, d;
    std::array<int64_t, 4> pad;
    int64_t n = 1;
  };
  for (const Conv &g : std::vector<Conv>{{5, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}},
                                         {7, 9, 3, 8, 3, 1, 1, {1, 1, 1, 1}},
                                         {8, 8, 16, 17, 3, 2, 1, {0, 1, 0, 1}},
                                         {11, 6, 5, 4, 3, 1, 2, {2, 2, 2, 2}},
                                         {9, 9, 4, 32, 5, 2, 1, {2, 2, 2, 2}},
                                         {6, 13, 2, 3, 2, 3, 1, {1, 0, 2, 1}},
                                         // kiln-cpu-strategy register tiles (ow x f) and filter blocks
                                         {16, 16, 8, 64, 3, 1, 1, {1, 1, 1, 1}},
                                         {14, 14, 16, 48, 1, 1, 1, {0, 0, 0, 0}},
                                         {15, 15, 8, 32, 3, 2, 1, {1, 1, 1, 1}},
                                         {7, 7, 256, 64, 3, 1, 1, {1, 1, 1, 1}},
                                         {12, 12, 3, 16, 7, 2, 1, {3, 2, 3, 2}},
                                         // output widths split into whole register tiles and a
                                         // tail: 7 and 14 at 256 bits, 13 at both widths
                                         {7, 7, 32, 128, 1, 1, 1, {0, 0, 0, 0}},
                                         {14, 14, 8, 16, 3, 1, 1, {1, 1, 1, 1}},
                                         {13, 13, 8, 32, 1, 1, 1, {0, 0, 0, 0}},
                                         // 1x1 on a 14-wide map: a matmul over the pixels at 512 bits
                                         {14, 14, 32, 64, 1, 1, 1, {0, 0, 0, 0}},
                                         // strided 1x1 over a batch (ResNet's downsampling projections
                                         // at batch 8): at 512 bits a matmul over a copy of the pixels
                                         // they read; one too small for threads, one in parallel blocks
                                         {13, 13, 32, 64, 1, 2, 1, {0, 0, 0, 0}, 4},
                                         {27, 27, 64, 128, 1, 2, 1, {0, 0, 0, 0}, 8}}) {
    int64_t oh = (g.h + g.pad[0] + g.pad[1] - (g.k - 1) * g.d - 1) / g.s + 1;
    int64_t ow = (g.w + g.pad[2] + g.pad[3] - (g.k - 1) * g.d - 1) / g.s + 1;
    if ((g.h + g.pad[0] + g.pad[1] - (g.k - 1) * g.d - 1) % g.s || (g.w + g.pad[2] + g.pad[3] - (g.k - 1) * g.d - 1) % g.s)
      continue;  // TOSA requires exact division
    Case c;
    TensorType x = tt(F, {g.n, g.h, g.w, g.c}), w = tt(F, {g.f, g.k, g.k, g.c}), b = tt(F, {g.f}),
               o = tt(F, {g.n, oh, ow, g.f});
    c.name = "conv2d_" + shapeToString(x.shape) + "_k" + std::to_string(g.k) + "_s" + std::to_string(g.s) +
             "_d" + std::to_string(g.d) + "_f" + std::to_string(g.f);
    c.args = {x, w, b};
    c.results = {o};
    std::string pad = std::to_string(g.pad[0]) + ", " + std::to_string(g.pad[1]) + ", " + std::to_string(g.pad[2]) +
                      ", " + std::to_string(g.pad[3]);
    c.body = zeroConst("zp", F) + "  %r0 = \"tosa.conv2d\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, pad = array<i64: " +
             pad + ">, stride = array<i64: " + std::to_string(g.s) + ", " + std::to_string(g.s) +
             ">, dilation = array<i64: " + std::to_string(g.d) + ", " + std::to_string(g.d) + ">}> : (" + mt(x) + ", " +
             mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [g, x, w](const std::vector<Values> &in) {
      const int64_t pad[4] = {g.pad[0], g.pad[1], g.pad[2], g.pad[3]}, st[2] = {g.s, g.s}, dl[2] = {g.d, g.d};
      ref::Dims os;
      ref::Vec y = ref::conv2d(ref::Vec(in[0].begin(), in[0].end()), ref::Dims(x.shape.begin(), x.shape.end()),
                               ref::Vec(in[1].begin(), in[1].end()), ref::Dims(w.shape.begin(), w.shape.end()),
                               ref::Vec(in[2].begin(), in[2].end()), pad, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }
  // kiln's grouped conv (tosa.custom kiln.grouped_conv2d: what
  // kiln-raise-linalg makes of ResNeXt's and RegNet's grouped convs): JIT
  // code through kiln-grouped-conv-to-linalg, and its kernel. Groups of 8
  // (RegNet's), odd channel and filter counts, strides, dilation, padding,
  // 1x1.
  struct Grouped {
    int64_t h, w, g, c, f, k, s, d;
    std::array<int64_t, 4> pad;
  };
  for (const Grouped &g : std::vector<Grouped>{{9, 9, 6, 8, 8, 3, 1, 1, {1, 1, 1, 1}},
                                               {11, 9, 3, 4, 5, 3, 2, 1, {1, 1, 0, 0}},
                                               {7, 7, 2, 16, 16, 1, 1, 1, {0, 0, 0, 0}},
                                               {10, 10, 4, 3, 2, 3, 1, 2, {2, 2, 2, 2}},
                                               // The kernel's groups packed into vectors: RegNet's
                                               // 13 groups of 8 (a last half-empty block at 512
                                               // bits), stride 2, ResNeXt-like groups of 4.
                                               {30, 30, 13, 8, 8, 3, 1, 1, {1, 1, 1, 1}},
                                               {15, 15, 5, 8, 8, 3, 2, 1, {1, 1, 1, 1}},
                                               {12, 12, 8, 4, 4, 3, 1, 1, {1, 1, 1, 1}},
                                               // Maps big enough for row blocks of every group
                                               // (Prepare.cpp): RegNet's stride-2 28x28, and
                                               // dilated groups of 4 on 40x40.
                                               {56, 56, 13, 8, 8, 3, 2, 1, {1, 1, 1, 1}},
                                               {40, 40, 6, 4, 4, 3, 1, 2, {2, 2, 2, 2}}}) {
    const int64_t spanH = g.h + g.pad[0] + g.pad[1] - (g.k - 1) * g.d - 1;
    const int64_t spanW = g.w + g.pad[2] + g.pad[3] - (g.k - 1) * g.d - 1;
    const int64_t oh = spanH / g.s + 1, ow = spanW / g.s + 1;
    Case c;
    TensorType x = tt(F, {1, g.h, g.w, g.g, g.c}), w = tt(F, {g.g, g.f, g.k, g.k, g.c}),
               o = tt(F, {1, oh, ow, g.g, g.f});
    c.name = "grouped_conv2d_" + shapeToString(x.shape) + "_k" + std::to_string(g.k) + "_s" + std::to_string(g.s) +
             "_d" + std::to_string(g.d) + "_f" + std::to_string(g.f);
    c.args = {x, w};
    c.results = {o};
    auto list = [](llvm::ArrayRef<int64_t> v) {
      std::string t;
      for (size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
      return t;
    };
    c.body = "  %r0 = \"tosa.custom\"(%a0, %a1) <{domain_name = \"kiln\", implementation_attrs = \"\", "
             "operator_name = \"grouped_conv2d\"}> {pad = array<i64: " + list(g.pad) + ">, stride = array<i64: " +
             list({g.s, g.s}) + ">, dilation = array<i64: " + list({g.d, g.d}) + ">} : (" + mt(x) + ", " + mt(w) +
             ") -> " + mt(o) + "\n";
    c.ref = [g, x, w](const std::vector<Values> &in) {
      const int64_t st[2] = {g.s, g.s}, dl[2] = {g.d, g.d};
      ref::Dims os;
      ref::Vec y = ref::groupedConv2d(ref::Vec(in[0].begin(), in[0].end()), ref::Dims(x.shape.begin(), x.shape.end()),
                                      ref::Vec(in[1].begin(), in[1].end()), ref::Dims(w.shape.begin(), w.shape.end()),
                                      g.pad.data(), st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }
  // Convs big enough for parallel tiles, whose bias init and elementwise
  // epilogue (clamp, a residual add) kiln-cpu-strategy fuses into those
  // tiles (the epilogue updating the conv's result in place).
  struct Fused {
    bool depthwise;
    int64_t h, c, f, k, s;
    std::array<int64_t, 4> pad;
    bool residual;
  };
  for (const Fused &g : std::vector<Fused>{{false, 28, 16, 64, 3, 1, {1, 1, 1, 1}, true},
                                           {false, 30, 24, 96, 1, 1, {0, 0, 0, 0}, false},
                                           {false, 14, 128, 256, 1, 1, {0, 0, 0, 0}, true},  // as a matmul
                                           {true, 60, 64, 64, 3, 2, {1, 0, 1, 0}, false},
                                           {true, 40, 48, 48, 3, 1, {1, 1, 1, 1}, true},
                                           // Filter and channel counts no vector divides
                                           // (ShuffleNet's 58 and 116): whole vectors and
                                           // a tile of the rest.
                                           {false, 28, 58, 58, 1, 1, {0, 0, 0, 0}, true},
                                           {true, 28, 58, 58, 3, 1, {1, 1, 1, 1}, false},
                                           {true, 56, 58, 58, 3, 1, {1, 1, 1, 1}, true},
                                           {true, 29, 116, 116, 3, 2, {1, 1, 1, 1}, true},
                                           // Blocks of filters no whole vector divides
                                           // (RegNet's 440 in blocks of 88 at 512 bits):
                                           // whole vectors and a tile of the rest in
                                           // each block, the residual in registers.
                                           {false, 14, 208, 440, 1, 1, {0, 0, 0, 0}, true},
                                           // 7 rows (an odd number of row blocks): the
                                           // channels halved too, 14 tasks.
                                           {true, 7, 960, 960, 3, 1, {1, 1, 1, 1}, true}}) {
    int64_t oh = (g.h + g.pad[0] + g.pad[1] - g.k) / g.s + 1;
    Case c;
    TensorType x = tt(F, {1, g.h, g.h, g.c}), b = tt(F, {g.f}), o = tt(F, {1, oh, oh, g.f});
    TensorType w = g.depthwise ? tt(F, {g.k, g.k, g.c, 1}) : tt(F, {g.f, g.k, g.k, g.c});
    c.name = std::string(g.depthwise ? "depthwise_conv2d" : "conv2d") + "_fused_" + shapeToString(x.shape) + "_k" +
             std::to_string(g.k) + "_s" + std::to_string(g.s) + (g.residual ? "_residual" : "") + "_clamp";
    c.args = {x, w, b};
    if (g.residual) c.args.push_back(o);
    c.results = {o};
    std::string pad = std::to_string(g.pad[0]) + ", " + std::to_string(g.pad[1]) + ", " + std::to_string(g.pad[2]) +
                      ", " + std::to_string(g.pad[3]);
    c.body = zeroConst("zp", F) + "  %y = \"tosa." + (g.depthwise ? "depthwise_conv2d" : "conv2d") +
             "\"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, pad = array<i64: " + pad + ">, stride = array<i64: " +
             std::to_string(g.s) + ", " + std::to_string(g.s) + ">, dilation = array<i64: 1, 1>}> : (" + mt(x) + ", " +
             mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    std::string v = "%y";
    if (g.residual) {
      c.body += "  %s = tosa.add %y, %a3 : (" + mt(o) + ", " + mt(o) + ") -> " + mt(o) + "\n";
      v = "%s";
    }
    c.body += "  %r0 = tosa.clamp " + v + " {min_val = 0.0 : f32, max_val = 0.5 : f32} : (" + mt(o) + ") -> " + mt(o) + "\n";
    c.ref = [g, x, w](const std::vector<Values> &in) {
      const int64_t pad[4] = {g.pad[0], g.pad[1], g.pad[2], g.pad[3]}, st[2] = {g.s, g.s}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec args[3] = {ref::Vec(in[0].begin(), in[0].end()), ref::Vec(in[1].begin(), in[1].end()),
                          ref::Vec(in[2].begin(), in[2].end())};
      ref::Dims xs(x.shape.begin(), x.shape.end()), ws(w.shape.begin(), w.shape.end());
      ref::Vec y = g.depthwise ? ref::depthwiseConv2d(args[0], xs, args[1], ws, args[2], pad, st, dl, os)
                               : ref::conv2d(args[0], xs, args[1], ws, args[2], pad, st, dl, os);
      for (size_t i = 0; i < y.size(); ++i) {
        double v = y[i] + (g.residual ? in[3][i] : 0.0);
        y[i] = std::min(0.5, std::max(0.0, v));
      }
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}, {-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cs.push_back(c);
  }
  // A constant weight of `shape` named %<name> (values sin(0.37 i + 0.5) / 2
  // in 6 digits, also written to `values` for the reference), built as a
  // flat tosa.const reshaped.
  auto constant = [](const std::string &name, const std::vector<int64_t> &shape, ref::Vec &values) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    values.resize(size_t(n));
    std::string lit;
    for (int64_t i = 0; i < n; ++i) {
      char text[32];
      std::snprintf(text, sizeof text, "%.6f", std::sin(0.37 * double(i) + 0.5) * 0.5);
      values[size_t(i)] = std::strtod(text, nullptr);
      lit += (i ? ", " : "") + std::string(text);
    }
    TensorType flat = tt(F, {n}), typed = tt(F, shape);
    return "  %" + name + "f = \"tosa.const\"() <{values = dense<[" + lit + "]> : " + mt(flat) + "}> : () -> " +
           mt(flat) + "\n" + shapeConst(name + "s", shape) + "  %" + name + " = tosa.reshape %" + name + "f, %" +
           name + "s : (" + mt(flat) + ", !tosa.shape<" + std::to_string(shape.size()) + ">) -> " + mt(typed) + "\n";
  };
  // Grouped convs on constant filters: the kernel reads the filter packed
  // once by the plan in vectors of several groups (kGroupedPackedFilter;
  // RegNet's 13 groups of 8 leave the last vector half empty at 512 bits),
  // the JIT code as it is.
  // (The second a batch of two: the kernel's rows of both images.)
  for (auto [n, h, groups, ch, s] : std::vector<std::array<int64_t, 5>>{{1, 14, 13, 8, 1}, {2, 15, 8, 4, 2}}) {
    const int64_t oh = (h + 2 - 3) / s + 1;
    Case c;
    TensorType x = tt(F, {n, h, h, groups, ch}), w = tt(F, {groups, ch, 3, 3, ch}), o = tt(F, {n, oh, oh, groups, ch});
    c.name = "grouped_conv2d_const_filter_" + shapeToString(x.shape) + "_s" + std::to_string(s);
    c.args = {x};
    c.results = {o};
    ref::Vec filter;
    const std::string st = std::to_string(s);
    c.body = constant("w", {groups, ch, 3, 3, ch}, filter) +
             "  %r0 = \"tosa.custom\"(%a0, %w) <{domain_name = \"kiln\", implementation_attrs = \"\", "
             "operator_name = \"grouped_conv2d\"}> {pad = array<i64: 1, 1, 1, 1>, stride = array<i64: " + st + ", " + st +
             ">, dilation = array<i64: 1, 1>} : (" + mt(x) + ", " + mt(w) + ") -> " + mt(o) + "\n";
    c.ref = [s, x, w, filter](const std::vector<Values> &in) {
      const int64_t pad[4] = {1, 1, 1, 1}, st[2] = {s, s}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec y = ref::groupedConv2d(ref::Vec(in[0].begin(), in[0].end()), ref::Dims(x.shape.begin(), x.shape.end()),
                                      filter, ref::Dims(w.shape.begin(), w.shape.end()), pad, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    c.panels = true;  // the JIT code's filter: hoisted in panels
    cs.push_back(c);
  }
  // 3x3 stride-1 convs on constant filters: hoisting stores the filters
  // Winograd-transformed and kiln-winograd-conv computes them in Winograd
  // form (F(4x4) and F(2x2) tiles, maps in whole tiles and not, a batch of
  // two, a batch of eight 7x7 maps, the conv's padding or none, a folded
  // clamp or none). The kernel
  // runtime runs the same graphs as direct convs.
  struct Wino {
    int64_t n, h, c, f;
    int64_t pad;
    bool clamp;
  };
  for (const Wino &g : std::vector<Wino>{{1, 32, 16, 16, 1, true},    // F(4x4), 64 tiles
                                         {1, 30, 8, 24, 1, false},    // F(4x4), edge tiles cut
                                         {2, 16, 16, 8, 1, true},     // F(2x2), batch 2
                                         {1, 34, 8, 16, 0, true},     // F(4x4), unpadded
                                         {1, 16, 8, 64, 1, true},     // F(2x2), filter rows padded
                                         {8, 7, 16, 16, 1, true}}) {  // F(2x2) over a batch's 128 tiles, 7x7 maps
    int64_t oh = g.h + 2 * g.pad - 2;
    Case c;
    TensorType x = tt(F, {g.n, g.h, g.h, g.c}), w = tt(F, {g.f, 3, 3, g.c}), b = tt(F, {g.f}),
               o = tt(F, {g.n, oh, oh, g.f});
    c.name = "conv2d_winograd_" + shapeToString(x.shape) + "_f" + std::to_string(g.f) + "_pad" +
             std::to_string(g.pad) + (g.clamp ? "_clamp" : "");
    c.args = {x, b};
    c.results = {o};
    // The filter as a constant (weights are what hoisting transforms).
    ref::Vec filter;
    std::string pad = std::to_string(g.pad);
    c.body = zeroConst("zp", F) + constant("w", {g.f, 3, 3, g.c}, filter) +
             "  %y = \"tosa.conv2d\"(%a0, %w, %a1, %zp, %zp) <{acc_type = f32, pad = array<i64: " + pad + ", " + pad +
             ", " + pad + ", " + pad + ">, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>}> : (" + mt(x) +
             ", " + mt(w) + ", " + mt(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.body += g.clamp ? "  %r0 = tosa.clamp %y {min_val = 0.0 : f32, max_val = 0.5 : f32} : (" + mt(o) + ") -> " +
                            mt(o) + "\n"
                      : "  %r0 = tosa.identity %y : (" + mt(o) + ") -> " + mt(o) + "\n";
    c.ref = [g, x, w, filter](const std::vector<Values> &in) {
      const int64_t pad[4] = {g.pad, g.pad, g.pad, g.pad}, st[2] = {1, 1}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec y = ref::conv2d(ref::Vec(in[0].begin(), in[0].end()), ref::Dims(x.shape.begin(), x.shape.end()),
                               filter, ref::Dims(w.shape.begin(), w.shape.end()), ref::Vec(in[1].begin(), in[1].end()),
                               pad, st, dl, os);
      if (g.clamp)
        for (auto &v : y) v = v < 0 ? 0 : v > 0.5 ? 0.5 : v;
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    c.paddedRows = g.f % 64 == 0;
    cs.push_back(c);
  }
  // Constant weights whose rows generated code walks down: a matmul's B
  // and conv filters with rows a multiple of 256 bytes are stored with
  // padded rows and read back through a slice (WeightLayouts::
  // padMatmulWeights); rows of other lengths stay as they are. A B bigger
  // than L2 (512 KiB) is stored in panels of the register tiles' columns
  // instead (WeightLayouts::panelMatmulWeights): 37 rows leave a tail of
  // row tiles, 320 columns five 64-wide panels (twenty 16-wide on AVX2).
  // Placed on the kernel, such a weight is stored once in the kernel's
  // panel order (kernels/MatmulPanels.h; 80 columns: a 16-wide last panel).
  // 520 columns at 512 bits (a classifier's 1000 at batch 8, smaller):
  // tiles of 8, in panels of 8 columns.
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {5, 24, 64}, {33, 16, 128}, {4, 8, 40}, {37, 512, 320}, {128, 768, 256}, {6, 24, 80}, {8, 512, 520}}) {
    Case c;
    TensorType a = tt(F, {1, m, k}), w = tt(F, {1, k, n}), o = tt(F, {1, m, n});
    c.name = "matmul_const_weight_" + shapeToString(a.shape) + "_n" + std::to_string(n);
    c.args = {a};
    c.results = {o};
    ref::Vec weight;
    c.body = zeroConst("zp", F) + constant("w", {1, k, n}, weight) + "  %r0 = tosa.matmul %a0, %w, %zp, %zp : (" +
             mt(a) + ", " + mt(w) + ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [m, k, n, weight](const std::vector<Values> &in) {
      Values y(size_t(m * n), 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t p = 0; p < k; ++p) y[size_t(i * n + j)] += in[0][size_t(i * k + p)] * weight[size_t(p * n + j)];
      return std::vector<Values>{y};
    };
    c.ranges = {{-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    c.panels = k * n * 4 > 512 * 1024;
    c.paddedRows = n % 64 == 0 && !c.panels;
    cs.push_back(c);
  }
  struct ConstConv {
    int64_t h, c, f, k, s;
  };
  // The last six stream their filter (bigger than L2, 16 or 196 output
  // pixels: streamingFilterBlock), which is stored in panels the conv reads
  // block by block: the 196-pixel ones as ResNet-50's 14x14 1x1 conv and
  // stride-2 3x3 (rows of 14 in register tiles of 7), and MobileNetV2's
  // 576 -> 96 (three blocks of 32 filters, each over both halves of the
  // rows), and its 576 -> 160 on 7x7 (odd rows: at 512 bits ten panels of
  // 16 filters, not five of 32). The 24 and 40 filters
  // at 28x28 compute their bias in register tiles of whole 16-lane vectors
  // and one tile of the other 8 on AVX-512; 58 filters (no register tile
  // of 4 or more divides them) in whole vectors and a tile of the rest at
  // both widths.
  // On the kernel, a constant filter is stored packed once
  // (kConvPackedFilter, rows padded to whole vectors) and every map takes
  // the GEMM: the 9x9 map in two row blocks, the maps of one to three row
  // blocks with F split into column chunks too (11x11 stride 2: two of 64;
  // 4x4: four; 14x14: two of 128, equal); 40, 24 and 58 filters (the 7x7 map's
  // too, once dot products) through a block of padded rows, 200 on 7x7 in
  // chunks of 64 and one of 8.
  for (const ConstConv &g : std::vector<ConstConv>{{9, 16, 64, 1, 1},
                                                   {11, 8, 128, 3, 2},
                                                   {7, 24, 40, 1, 1},
                                                   {7, 24, 200, 1, 1},
                                                   {28, 144, 24, 1, 1},
                                                   {28, 96, 40, 1, 1},
                                                   {28, 58, 58, 1, 1},
                                                   {28, 24, 58, 3, 1},
                                                   {4, 256, 256, 3, 1},
                                                   {7, 1024, 512, 1, 2},
                                                   {14, 1024, 256, 1, 1},
                                                   {27, 256, 128, 3, 2},
                                                   {14, 576, 96, 1, 1},
                                                   {7, 576, 160, 1, 1}}) {
    int64_t p = g.k / 2, oh = (g.h + 2 * p - g.k) / g.s + 1;
    Case c;
    TensorType x = tt(F, {1, g.h, g.h, g.c}), w = tt(F, {g.f, g.k, g.k, g.c}), b = tt(F, {g.f}),
               o = tt(F, {1, oh, oh, g.f});
    c.name = "conv2d_const_filter_" + shapeToString(x.shape) + "_f" + std::to_string(g.f) + "_k" +
             std::to_string(g.k) + "_s" + std::to_string(g.s);
    c.args = {x, b};
    c.results = {o};
    ref::Vec filter;
    std::string pad = std::to_string(p);
    c.body = zeroConst("zp", F) + constant("w", {g.f, g.k, g.k, g.c}, filter) +
             "  %r0 = \"tosa.conv2d\"(%a0, %w, %a1, %zp, %zp) <{acc_type = f32, pad = array<i64: " + pad + ", " +
             pad + ", " + pad + ", " + pad + ">, stride = array<i64: " + std::to_string(g.s) + ", " +
             std::to_string(g.s) + ">, dilation = array<i64: 1, 1>}> : (" + mt(x) + ", " + mt(w) + ", " + mt(b) +
             ", tensor<1xf32>, tensor<1xf32>) -> " + mt(o) + "\n";
    c.ref = [g, p, x, w, filter](const std::vector<Values> &in) {
      const int64_t pads[4] = {p, p, p, p}, st[2] = {g.s, g.s}, dl[2] = {1, 1};
      ref::Dims os;
      ref::Vec y = ref::conv2d(ref::Vec(in[0].begin(), in[0].end()), ref::Dims(x.shape.begin(), x.shape.end()),
                               filter, ref::Dims(w.shape.begin(), w.shape.end()), ref::Vec(in[1].begin(), in[1].end()),
                               pads, st, dl, os);
      return std::vector<Values>{Values(y.begin(), y.end())};
    };
    c.ranges = {{-1, 1}, {-1, 1}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    c.panels = g.c >= 256;
    c.paddedRows = g.f % 64 == 0 && !c.panels;
    cs.push_back(c);
  }
  // Rows no vector width divides (33, 100, 197: ViT's tokens) take whole
  // vectors, then the rest after them.
  for (int64_t n : {1, 7, 16, 33, 64, 100, 197, 1000}) {
    Case c = reduce("reduce_sum", F, {3, n}, 1, [](double a, double b) { return a + b; }, 0);
    c.name = "reduce_sum_3x" + std::to_string(n);
    c.rtol = 1e-5;
    c.atol = 1e-5;
    cs.push_back(c);
  }
  // f64 rows and columns (layer norms exporters compute in double): vectors
  // of half as many lanes.
  for (auto [shape, axis] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{3, 16}, 1}, {{3, 100}, 1}, {{2, 768}, 1}, {{4, 48}, 0}}) {
    Case c = reduce("reduce_sum", DType::f64, shape, axis, [](double a, double b) { return a + b; }, 0);
    c.name = "reduce_sum_f64_" + shapeToString(shape) + "_axis" + std::to_string(axis);
    c.rtol = 1e-12;
    c.atol = 1e-12;
    cs.push_back(c);
  }
  // Reductions over an outer axis with the innermost parallel (vectors
  // across it, kiln-cpu-strategy): a global pool's H and W, columns.
  for (auto [shape, axis] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{1, 7, 7, 64}, 1}, {{1, 7, 7, 64}, 2}, {{4, 48}, 0}, {{3, 5, 40}, 1}}) {
    Case c = reduce("reduce_sum", F, shape, axis, [](double a, double b) { return a + b; }, 0);
    c.name = "reduce_sum_" + shapeToString(shape) + "_axis" + std::to_string(axis);
    c.rtol = 1e-5;
    c.atol = 1e-5;
    cs.push_back(c);
    Case m = reduce("reduce_max", F, shape, axis, [](double a, double b) { return std::max(a, b); }, -INFINITY);
    m.name = "reduce_max_" + shapeToString(shape) + "_axis" + std::to_string(axis);
    cs.push_back(m);
  }
  for (int64_t n : {24, 96, 197, 1000}) {  // rows split into vector partials (kiln-cpu-strategy)
    Case c = reduce("reduce_max", F, {5, n}, 1, [](double a, double b) { return std::max(a, b); }, -INFINITY);
    c.name = "reduce_max_5x" + std::to_string(n);
    cs.push_back(c);
  }
  return cs;
}

std::string buildFunction(const Case &c) {
  std::string sig, res, rets, retTypes;
  for (size_t i = 0; i < c.args.size(); ++i)
    sig += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " + mt(c.args[i]);
  for (size_t i = 0; i < c.results.size(); ++i) {
    res += (i ? ", " : "") + mt(c.results[i]);
    rets += (i ? ", " : "") + std::string("%r") + std::to_string(i);
  }
  return "func.func @main(" + sig + ") -> (" + res + ") {\n" + c.body + "  return " + rets + " : " +
         res + "\n}\n";
}

// gtest prints a case by name, not as bytes.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class TosaOp : public ::testing::TestWithParam<Case> {};

/// A runtime placing every op that has a kernel on it (no disk cache).
Runtime &kernelRuntime() {
  static std::unique_ptr<Runtime> rt = [] {
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.placement.modes["*"] = ops::OpMode::kKernel;
    return llvm::cantFail(Runtime::create(o));
  }();
  return *rt;
}

/// Runs `c` on `rt`; checks results against the reference; returns the placement.
std::string runCase(Runtime &rt, const Case &c) {
  std::string text = buildFunction(c);
  auto module = KILN_TAKE(rt.loadModule(text, c.name + ".mlir"));
  if (!module) return "";
  std::vector<Tensor> inputs;
  std::vector<Values> refInputs;
  for (size_t i = 0; i < c.args.size(); ++i) {
    auto range = i < c.ranges.size() ? c.ranges[i] : std::pair<double, double>{-2, 2};
    inputs.push_back(makeInput(c.args[i], range, unsigned(1000 + i), c.positiveOnly));
    refInputs.push_back(test::asDoubles(inputs.back()));
  }
  auto outputs = KILN_TAKE(module->call("main", inputs));
  EXPECT_EQ(outputs.size(), c.results.size()) << text;
  if (outputs.size() != c.results.size()) return "";
  std::vector<Values> want = c.ref(refInputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(outputs[i].type(), c.results[i]) << text;
    EXPECT_TRUE(test::allClose(test::asDoubles(outputs[i]), want[i], c.rtol, c.atol))
        << "result " << i << " of\n" << text;
  }
  std::vector<TensorType> types;
  for (const Tensor &t : inputs) types.push_back(t.type());
  auto fn = KILN_TAKE(module->compile("main", types));
  if (!fn) return "";
  // Which form a conv took (Winograd reads its stored filter back).
  bool winograd = false;
  for (const auto &step : fn->plan.steps)
    for (const std::string &op : step.ops) winograd |= op == "tosa.custom:kiln.winograd_filter";
  // Whether a weight is stored with padded rows (a step reads a weight
  // through a slice; no case slices a weight otherwise).
  // And whether a conv filter is stored in panels (a 5-D weight).
  bool padded = false, panels = false;
  for (const auto &step : fn->plan.steps)
    for (int id : step.inputs) {
      if (fn->plan.values[id].kind != lowering::PlanValue::kWeight) continue;
      padded |= llvm::is_contained(step.ops, "tosa.slice");
      panels |= fn->plan.values[id].type.shape.size() == 5;
      // (A matmul's B [1, K, N] in panels: [N/w, K, w].)
      panels |= llvm::is_contained(step.ops, "tosa.matmul") && fn->plan.values[id].type.shape.size() == 3 &&
                fn->plan.values[id].type.shape[0] > 1;
    }
  // Whether a step's temporaries live in scratch memory the executable
  // plans (kiln-scratch-buffers; Winograd's transformed input and products).
  bool scratch = false;
  for (const StepDesc &step : fn->executable->steps()) scratch |= step.scratch >= 0;
  return fn->placementSummary() + (winograd ? " [winograd]" : "") + (padded ? " [padded rows]" : "") +
         (panels ? " [panels]" : "") + (scratch ? " [scratch]" : "");
}

}  // namespace

// Differential: the same case through the handwritten kernels (every op that
// has one) must also match the reference, hence the JIT result.
TEST_P(TosaOp, KernelMatchesReference) {
  const Case &c = GetParam();
  std::string placement = runCase(kernelRuntime(), c);
  std::string op = c.name.substr(0, c.name.find('_'));
  RecordProperty("placement", placement);
  if (std::getenv("KILN_TEST_PRINT_PLACEMENT")) std::printf("%-40s %s\n", c.name.c_str(), placement.c_str());
  if (kernels::registry().lookup("tosa." + c.name.substr(0, c.name.rfind('_'))) ||
      kernels::registry().lookup("tosa." + op))
    SUCCEED() << placement;
}

// Kernels write every element of their outputs: each case through the
// kernels twice, its tensor memory filled with a different byte each time
// (0xff: NaN in every float type; 0x5a), gives the same bytes and the
// reference's values.
TEST_P(TosaOp, KernelOutputsDoNotDependOnTheMemoryTheyGet) {
  const Case &c = GetParam();
  std::vector<std::vector<std::string>> bytes;
  for (int poison : {0xff, 0x5a}) {
    setTensorMemoryPoison(poison);
    std::string text = buildFunction(c);
    auto module = KILN_TAKE(kernelRuntime().loadModule(text, c.name + ".mlir"));
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.args.size(); ++i) {
      auto range = i < c.ranges.size() ? c.ranges[i] : std::pair<double, double>{-2, 2};
      inputs.push_back(makeInput(c.args[i], range, unsigned(1000 + i), c.positiveOnly));
    }
    std::vector<Tensor> outputs;
    if (module) {
      auto out = KILN_TAKE(module->call("main", inputs));
      outputs = out;
    }
    setTensorMemoryPoison(-1);
    bytes.emplace_back();
    for (const Tensor &t : outputs)
      bytes.back().emplace_back(static_cast<const char *>(t.rawData()), t.byteSize());
  }
  EXPECT_EQ(bytes[0], bytes[1]) << c.name << ": a kernel left output memory unwritten";
}

TEST_P(TosaOp, JitMatchesReference) {
  // Default placement: every lowerable op runs as JIT code.
  std::string placement = runCase(test::sharedRuntime(), GetParam());
  EXPECT_NE(placement.find(" 0 handwritten"), std::string::npos) << placement;
  EXPECT_EQ(placement.find("[winograd]") != std::string::npos,
            GetParam().name.rfind("conv2d_winograd_", 0) == 0) << placement;
  if (placement.find("[winograd]") != std::string::npos) {
    EXPECT_NE(placement.find("[scratch]"), std::string::npos) << placement;
  }
  EXPECT_EQ(placement.find("[padded rows]") != std::string::npos, GetParam().paddedRows) << placement;
  EXPECT_EQ(placement.find("[panels]") != std::string::npos, GetParam().panels) << placement;
}

// The same cases through the narrower vector strategies: AVX2 (256 bits) and
// SSE (128 bits) code runs on any x86-64 host, so an AVX-512 host tests all
// three widths.
TEST_P(TosaOp, JitNarrowVectorsMatchReference) {
  for (int bits : {256, 128}) {
    static std::map<int, std::unique_ptr<Runtime>> runtimes;
    static std::mutex mu;
    Runtime *rt;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto &slot = runtimes[bits];
      if (!slot) {
        RuntimeOptions o;
        o.cacheMode = CacheMode::kOff;
        o.maxVectorBits = bits;
        o.placement.measure = false;  // generated code is what is checked
        slot = llvm::cantFail(Runtime::create(o));
      }
      rt = slot.get();
    }
    SCOPED_TRACE(std::to_string(bits) + "-bit vectors");
    std::string placement = runCase(*rt, GetParam());
    EXPECT_EQ(placement.find("[winograd]") != std::string::npos,
              GetParam().name.rfind("conv2d_winograd_", 0) == 0) << placement;
    EXPECT_EQ(placement.find("[padded rows]") != std::string::npos, GetParam().paddedRows) << placement;
    EXPECT_EQ(placement.find("[panels]") != std::string::npos, GetParam().panels) << placement;
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, TosaOp, ::testing::ValuesIn(sweepCases()),
                         [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Tosa, TosaOp, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

// The op table drives coverage: every op it declares (but constants,
// terminators and custom ops) has at least one case here.
TEST(OpTable, EveryDeclaredOpHasACoverageCase) {
  std::string bodies;
  for (const Case &c : allCases()) bodies += c.body;
  for (const ops::OpSpec &s : ops::opTable()) {
    if (s.name == "tosa.const" || s.name == "tosa.const_shape" || s.name == "tosa.yield" || s.name == "tosa.custom")
      continue;
    bool used = bodies.find(s.name + " ") != std::string::npos || bodies.find("\"" + s.name + "\"") != std::string::npos;
    EXPECT_TRUE(used) << s.name << " is declared in ops/Ops.def but no op-coverage case uses it";
  }
}

// The fuzzer's seed corpus (tests/fuzz/corpus): every case as a model file.
// Regenerate with
//   KILN_WRITE_CORPUS=tests/fuzz/corpus ./build/tests/kiln_op_tests --gtest_filter=OpCorpus.*
TEST(OpCorpus, WritesEveryCaseWhenAsked) {
  const char *dir = std::getenv("KILN_WRITE_CORPUS");
  if (!dir || !*dir) GTEST_SKIP() << "set KILN_WRITE_CORPUS=DIR to write the fuzzer's seed corpus";
  int written = 0;
  for (const Case &c : allCases()) {
    std::ofstream os(std::string(dir) + "/" + c.name + ".mlir");
    ASSERT_TRUE(os.good()) << dir;
    os << "// " << c.name << " (tests/e2e/OpCoverageTest.cpp)\n" << buildFunction(c);
    ++written;
  }
  EXPECT_GT(written, 100);
}
