// Row-wise fusion (lowering/cpu/strategy/RowFusion.cpp), differential
// tests against the handwritten kernels and a double-precision reference
// at every vector width.
//
// Layer norms, RMS norms and softmaxes as the exporters write them: the
// chain in blocks of rows, for widths that leave vector remainders.
//
// Attention, softmax(Q Kᵀ) x V, as the exporters write it: the fused form (kiln-outline-clusters puts both matmuls in one
// cluster, kiln-cpu-strategy runs them as one loop over blocks of query
// rows) against the unfused JIT code (attention=off) and the kernels, for
// row counts that the row blocks divide and that they do not (ViT's 197
// tokens).
#include "jit/Compiler.h"
#include "tests/TestRuntime.h"

#include "runtime/Executable.h"

#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <map>
#include <mutex>

using namespace kiln;

namespace {

/// One attention: B heads of M queries over N keys, D wide (E for V).
struct Attention {
  std::string name;
  int64_t B, M, N, D, E;
  /// torch-mlir's form: the scores reshaped to [1, B, M, N] for the scale,
  /// an additive [1, 1, M, N] mask and the softmax; else all of it 3-D with
  /// no mask (the ONNX route).
  bool torch = true;
  /// torch's safe softmax: rows whose max is -inf give zeros (a select).
  bool safe = false;
};

std::string shape(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) s += std::to_string(d) + "x";
  return s + "f32";
}

std::string attentionMlir(const Attention &a) {
  const int64_t B = a.B, M = a.M, N = a.N, D = a.D, E = a.E;
  std::string t3 = "tensor<" + shape({B, M, N}) + ">", t4 = "tensor<" + shape({1, B, M, N}) + ">",
              r4 = "tensor<" + shape({1, B, M, 1}) + ">";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @main(%q: tensor<" << shape({B, M, D}) << ">, %kt: tensor<" << shape({B, D, N})
     << ">, %v: tensor<" << shape({B, N, E}) << ">, %mask: tensor<" << shape({1, 1, M, N}) << ">) -> tensor<"
     << shape({1, M, B * E}) << "> {\n";
  os << "  %z = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
     << "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
     << "  %s = tosa.matmul %q, %kt, %z, %z : (tensor<" << shape({B, M, D}) << ">, tensor<" << shape({B, D, N})
     << ">, tensor<1xf32>, tensor<1xf32>) -> " << t3 << "\n";
  std::string p;  // the probabilities, [B, M, N]
  if (a.torch) {
    os << "  %sh4 = tosa.const_shape {values = dense<[1, " << B << ", " << M << ", " << N
       << "]> : tensor<4xindex>} : () -> !tosa.shape<4>\n"
       << "  %sh3 = tosa.const_shape {values = dense<[" << B << ", " << M << ", " << N
       << "]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
       << "  %scale = \"tosa.const\"() <{values = dense<0.125> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>\n"
       << "  %s4 = tosa.reshape %s, %sh4 : (" << t3 << ", !tosa.shape<4>) -> " << t4 << "\n"
       << "  %sc = tosa.mul %s4, %scale, %shift : (" << t4 << ", tensor<1x1x1x1xf32>, tensor<1xi8>) -> " << t4 << "\n"
       << "  %m = tosa.add %sc, %mask : (" << t4 << ", tensor<" << shape({1, 1, M, N}) << ">) -> " << t4 << "\n"
       << "  %mx = tosa.reduce_max %m {axis = 3 : i32} : (" << t4 << ") -> " << r4 << "\n"
       << "  %d = tosa.sub %m, %mx : (" << t4 << ", " << r4 << ") -> " << t4 << "\n"
       << "  %e = tosa.exp %d : (" << t4 << ") -> " << t4 << "\n"
       << "  %sum = tosa.reduce_sum %e {axis = 3 : i32} : (" << t4 << ") -> " << r4 << "\n"
       << "  %rs = tosa.reciprocal %sum : (" << r4 << ") -> " << r4 << "\n"
       << "  %p4 = tosa.mul %e, %rs, %shift : (" << t4 << ", " << r4 << ", tensor<1xi8>) -> " << t4 << "\n";
    std::string last = "%p4";
    if (a.safe) {
      os << "  %ninf = \"tosa.const\"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> "
            "tensor<1x1x1x1xf32>\n"
         << "  %zeros = \"tosa.const\"() <{values = dense<0.0> : " << t4 << "}> : () -> " << t4 << "\n"
         << "  %dead = tosa.equal %mx, %ninf : (" << r4 << ", tensor<1x1x1x1xf32>) -> tensor<1x" << B << "x" << M
         << "x1xi1>\n"
         << "  %ps = tosa.select %dead, %zeros, %p4 : (tensor<1x" << B << "x" << M << "x1xi1>, " << t4 << ", " << t4
         << ") -> " << t4 << "\n";
      last = "%ps";
    }
    os << "  %p = tosa.reshape " << last << ", %sh3 : (" << t4 << ", !tosa.shape<3>) -> " << t3 << "\n";
  } else {
    std::string r3 = "tensor<" + shape({B, M, 1}) + ">";
    os << "  %scale = \"tosa.const\"() <{values = dense<0.125> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
       << "  %sc = tosa.mul %s, %scale, %shift : (" << t3 << ", tensor<1x1x1xf32>, tensor<1xi8>) -> " << t3 << "\n"
       << "  %mx = tosa.reduce_max %sc {axis = 2 : i32} : (" << t3 << ") -> " << r3 << "\n"
       << "  %d = tosa.sub %sc, %mx : (" << t3 << ", " << r3 << ") -> " << t3 << "\n"
       << "  %e = tosa.exp %d : (" << t3 << ") -> " << t3 << "\n"
       << "  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (" << t3 << ") -> " << r3 << "\n"
       << "  %rs = tosa.reciprocal %sum : (" << r3 << ") -> " << r3 << "\n"
       << "  %p = tosa.mul %e, %rs, %shift : (" << t3 << ", " << r3 << ", tensor<1xi8>) -> " << t3 << "\n";
  }
  std::string o3 = "tensor<" + shape({B, M, E}) + ">", o4 = "tensor<" + shape({1, B, M, E}) + ">",
              ot = "tensor<" + shape({1, M, B, E}) + ">";
  os << "  %o = tosa.matmul %p, %v, %z, %z : (" << t3 << ", tensor<" << shape({B, N, E})
     << ">, tensor<1xf32>, tensor<1xf32>) -> " << o3 << "\n"
     << "  %osh = tosa.const_shape {values = dense<[1, " << B << ", " << M << ", " << E
     << "]> : tensor<4xindex>} : () -> !tosa.shape<4>\n"
     << "  %o4 = tosa.reshape %o, %osh : (" << o3 << ", !tosa.shape<4>) -> " << o4 << "\n"
     << "  %ot = tosa.transpose %o4 {perms = array<i32: 0, 2, 1, 3>} : (" << o4 << ") -> " << ot << "\n"
     << "  %rsh = tosa.const_shape {values = dense<[1, " << M << ", " << B * E
     << "]> : tensor<3xindex>} : () -> !tosa.shape<3>\n"
     << "  %r = tosa.reshape %ot, %rsh : (" << ot << ", !tosa.shape<3>) -> tensor<" << shape({1, M, B * E}) << ">\n"
     << "  return %r : tensor<" << shape({1, M, B * E}) << ">\n}\n";
  return s;
}

/// The inputs: Q, Kᵀ and V in [-1, 1]; a causal mask (0 on and below the
/// diagonal, -10000 above, as BERT-style exports add it), all -inf in the
/// last query row where the softmax is safe (that row's output is 0).
std::vector<Tensor> inputs(const Attention &a) {
  std::vector<Tensor> in = {test::randomTensor({a.B, a.M, a.D}, 11), test::randomTensor({a.B, a.D, a.N}, 12),
                            test::randomTensor({a.B, a.N, a.E}, 13)};
  Tensor mask = test::randomTensor({1, 1, a.M, a.N}, 14);
  float *m = static_cast<float *>(mask.rawData());
  for (int64_t i = 0; i < a.M; ++i)
    for (int64_t j = 0; j < a.N; ++j)
      m[i * a.N + j] = a.safe && i == a.M - 1 ? -INFINITY : j <= i ? 0.0f : -10000.0f;
  in.push_back(mask);
  return in;
}

/// softmax(Q Kᵀ / 8 + mask) V in doubles, as [1, M, B * E].
std::vector<double> reference(const Attention &a, const std::vector<Tensor> &in) {
  std::vector<double> q = test::asDoubles(in[0]), kt = test::asDoubles(in[1]), v = test::asDoubles(in[2]),
                      mask = test::asDoubles(in[3]);
  std::vector<double> out(size_t(a.M * a.B * a.E), 0.0), row(size_t(a.N));
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t i = 0; i < a.M; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < a.N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < a.D; ++k) s += q[(b * a.M + i) * a.D + k] * kt[(b * a.D + k) * a.N + j];
        row[j] = s * 0.125 + (a.torch ? mask[i * a.N + j] : 0.0);
        mx = std::max(mx, row[j]);
      }
      if (std::isinf(mx) && mx < 0) continue;  // safe softmax: zeros
      double sum = 0;
      for (int64_t j = 0; j < a.N; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (int64_t e = 0; e < a.E; ++e) {
        double o = 0;
        for (int64_t j = 0; j < a.N; ++j) o += row[j] / sum * v[(b * a.N + j) * a.E + e];
        out[(i * a.B + b) * a.E + e] = o;
      }
    }
  return out;
}

Runtime &runtimeFor(const std::string &modes, int bits) {
  static std::map<std::pair<std::string, int>, std::unique_ptr<Runtime>> runtimes;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto &slot = runtimes[{modes, bits}];
  if (!slot) {
    RuntimeOptions o;
    o.cacheMode = CacheMode::kOff;
    o.maxVectorBits = bits;
    o.placement = llvm::cantFail(ops::parseOpModes(modes));
    o.placement.measure = false;
    slot = llvm::cantFail(Runtime::create(o));
  }
  return *slot;
}

/// Runs `a` on the runtime with `modes` at `bits`; checks the result
/// against the reference; returns how many steps run both matmuls (and
/// where one does, its strategy in `strategy`).
int runAttention(const Attention &a, const std::string &modes, int bits, std::string *strategy = nullptr) {
  SCOPED_TRACE(modes + " at " + std::to_string(bits) + " bits");
  Runtime &rt = runtimeFor(modes, bits);
  std::string text = attentionMlir(a);
  auto module = KILN_TAKE(rt.loadModule(text, a.name + ".mlir"));
  if (!module) return -1;
  std::vector<Tensor> in = inputs(a);
  auto out = KILN_TAKE(module->call("main", in));
  EXPECT_EQ(out.size(), 1u) << text;
  if (out.size() != 1) return -1;
  EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), reference(a, in), 1e-4, 1e-5)) << text;
  std::vector<TensorType> types;
  for (const Tensor &t : in) types.push_back(t.type());
  auto fn = KILN_TAKE(module->compile("main", types));
  if (!fn) return -1;
  int fused = 0;
  for (const StepDesc &step : fn->executable->steps())
    if (llvm::StringRef(step.ops).count("tosa.matmul") == 2) {
      ++fused;
      if (strategy) *strategy = step.strategy;
    }
  return fused;
}

class AttentionCase : public ::testing::TestWithParam<Attention> {};

// Fused by default, at every vector width the host runs: one step, whose
// two matmuls run on one thread each (no batch of heads left in one) inside
// the loop over heads and row blocks.
TEST_P(AttentionCase, FusedMatchesReference) {
  for (int bits : {0, 256, 128}) {
    std::string strategy;
    EXPECT_EQ(runAttention(GetParam(), "", bits, &strategy), 1);
    // (Two matmuls per part: the row blocks' and, where they do not divide
    // the rows, the rest's.)
    size_t oneThread = llvm::StringRef(strategy).count("one thread");
    EXPECT_TRUE(oneThread == 2 || oneThread == 4) << bits << " bits: " << strategy;
    EXPECT_EQ(llvm::StringRef(strategy).count(" x matmul"), 0u) << bits << " bits: " << strategy;
    if (getenv("KILN_TEST_PRINT_STRATEGY")) std::printf("%s %d: %s\n", GetParam().name.c_str(), bits, strategy.c_str());
  }
}

// The same attention as two kernels (attention=off) and on the handwritten
// kernels.
TEST_P(AttentionCase, UnfusedAndKernelsMatchReference) {
  EXPECT_EQ(runAttention(GetParam(), "attention=off", 0), 0);
  EXPECT_EQ(runAttention(GetParam(), "*=kernel", 0), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionCase,
    ::testing::Values(Attention{"heads4_seq64", 4, 64, 64, 32, 32},        // row blocks divide the rows
                      Attention{"heads3_seq37", 3, 37, 37, 16, 16},        // no row block divides 37
                      Attention{"heads2_q50_k40", 2, 50, 40, 24, 8},       // queries != keys, narrow V
                      Attention{"heads1_seq64", 1, 64, 64, 32, 32},        // one head: row blocks for the threads
                      Attention{"heads2_seq197_safe", 2, 197, 197, 64, 64, true, true},  // ViT's
                      Attention{"onnx_heads4_seq48", 4, 48, 48, 16, 16, false}),
    [](const ::testing::TestParamInfo<Attention> &info) { return info.param.name; });

/// A row chain: a norm or softmax over the last dimension of [1, S, C].
struct RowChain {
  std::string name;
  int64_t S, C;
  enum Kind { kLayerNormF64, kRmsNorm, kSoftmax } kind;
};

std::string rowChainMlir(const RowChain &c) {
  std::string t = "tensor<" + shape({1, c.S, c.C}) + ">", r = "tensor<" + shape({1, c.S, 1}) + ">",
              t64 = "tensor<1x" + std::to_string(c.S) + "x" + std::to_string(c.C) + "xf64>",
              r64 = "tensor<1x" + std::to_string(c.S) + "x1xf64>", g = "tensor<" + shape({1, 1, c.C}) + ">";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @main(%x: " << t << ", %res: " << t << ", %g: " << g << ", %b: " << g << ") -> " << t << " {\n"
     << "  %shift = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n"
     << "  %inv = \"tosa.const\"() <{values = dense<" << 1.0 / double(c.C)
     << "> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
     << "  %eps = \"tosa.const\"() <{values = dense<1.0E-5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>\n"
     << "  %s = tosa.add %x, %res : (" << t << ", " << t << ") -> " << t << "\n";
  switch (c.kind) {
  case RowChain::kLayerNormF64:  // BERT's, as torch-mlir exports it
    os << "  %inv64 = \"tosa.const\"() <{values = dense<" << 1.0 / double(c.C)
       << "> : tensor<1x1x1xf64>}> : () -> tensor<1x1x1xf64>\n"
       << "  %s64 = tosa.cast %s : (" << t << ") -> " << t64 << "\n"
       << "  %sum64 = tosa.reduce_sum %s64 {axis = 2 : i32} : (" << t64 << ") -> " << r64 << "\n"
       << "  %mean64 = tosa.mul %sum64, %inv64, %shift : (" << r64 << ", tensor<1x1x1xf64>, tensor<1xi8>) -> " << r64
       << "\n"
       << "  %d64 = tosa.sub %s64, %mean64 : (" << t64 << ", " << r64 << ") -> " << t64 << "\n"
       << "  %sq = tosa.mul %d64, %d64, %shift : (" << t64 << ", " << t64 << ", tensor<1xi8>) -> " << t64 << "\n"
       << "  %ssq = tosa.reduce_sum %sq {axis = 2 : i32} : (" << t64 << ") -> " << r64 << "\n"
       << "  %var64 = tosa.mul %ssq, %inv64, %shift : (" << r64 << ", tensor<1x1x1xf64>, tensor<1xi8>) -> " << r64
       << "\n"
       << "  %var = tosa.cast %var64 : (" << r64 << ") -> " << r << "\n"
       << "  %sum = tosa.reduce_sum %s {axis = 2 : i32} : (" << t << ") -> " << r << "\n"
       << "  %mean = tosa.mul %sum, %inv, %shift : (" << r << ", tensor<1x1x1xf32>, tensor<1xi8>) -> " << r << "\n"
       << "  %ve = tosa.add %var, %eps : (" << r << ", tensor<1x1x1xf32>) -> " << r << "\n"
       << "  %rs = tosa.rsqrt %ve : (" << r << ") -> " << r << "\n"
       << "  %d = tosa.sub %s, %mean : (" << t << ", " << r << ") -> " << t << "\n"
       << "  %n = tosa.mul %d, %rs, %shift : (" << t << ", " << r << ", tensor<1xi8>) -> " << t << "\n"
       << "  %ng = tosa.mul %n, %g, %shift : (" << t << ", " << g << ", tensor<1xi8>) -> " << t << "\n"
       << "  %y = tosa.add %ng, %b : (" << t << ", " << g << ") -> " << t << "\n";
    break;
  case RowChain::kRmsNorm:  // T5's
    os << "  %sq = tosa.mul %s, %s, %shift : (" << t << ", " << t << ", tensor<1xi8>) -> " << t << "\n"
       << "  %ss = tosa.reduce_sum %sq {axis = 2 : i32} : (" << t << ") -> " << r << "\n"
       << "  %ms = tosa.mul %ss, %inv, %shift : (" << r << ", tensor<1x1x1xf32>, tensor<1xi8>) -> " << r << "\n"
       << "  %e = tosa.add %ms, %eps : (" << r << ", tensor<1x1x1xf32>) -> " << r << "\n"
       << "  %rs = tosa.rsqrt %e : (" << r << ") -> " << r << "\n"
       << "  %n = tosa.mul %s, %rs, %shift : (" << t << ", " << r << ", tensor<1xi8>) -> " << t << "\n"
       << "  %y = tosa.mul %n, %g, %shift : (" << t << ", " << g << ", tensor<1xi8>) -> " << t << "\n";
    break;
  case RowChain::kSoftmax:
    os << "  %mx = tosa.reduce_max %s {axis = 2 : i32} : (" << t << ") -> " << r << "\n"
       << "  %d = tosa.sub %s, %mx : (" << t << ", " << r << ") -> " << t << "\n"
       << "  %e = tosa.exp %d : (" << t << ") -> " << t << "\n"
       << "  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (" << t << ") -> " << r << "\n"
       << "  %rs = tosa.reciprocal %sum : (" << r << ") -> " << r << "\n"
       << "  %y = tosa.mul %e, %rs, %shift : (" << t << ", " << r << ", tensor<1xi8>) -> " << t << "\n";
    break;
  }
  os << "  return %y : " << t << "\n}\n";
  return s;
}

std::vector<double> rowChainReference(const RowChain &c, const std::vector<Tensor> &in) {
  std::vector<double> x = test::asDoubles(in[0]), res = test::asDoubles(in[1]), g = test::asDoubles(in[2]),
                      b = test::asDoubles(in[3]);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < c.S; ++i) {
    std::vector<double> s(size_t(c.C));
    for (int64_t j = 0; j < c.C; ++j) s[j] = x[i * c.C + j] + res[i * c.C + j];
    double mean = 0, sq = 0, mx = -INFINITY, sum = 0;
    for (double v : s) mean += v / double(c.C), sq += v * v / double(c.C), mx = std::max(mx, v);
    double var = 0;
    for (double v : s) var += (v - mean) * (v - mean) / double(c.C);
    for (double v : s) sum += std::exp(v - mx);
    for (int64_t j = 0; j < c.C; ++j) {
      double &o = out[i * c.C + j];
      if (c.kind == RowChain::kLayerNormF64) o = (s[j] - mean) / std::sqrt(var + 1e-5) * g[j] + b[j];
      else if (c.kind == RowChain::kRmsNorm) o = s[j] / std::sqrt(sq + 1e-5) * g[j];
      else o = std::exp(s[j] - mx) / sum;
    }
  }
  return out;
}

class RowChainCase : public ::testing::TestWithParam<RowChain> {};

// Blocked and fused by default at every vector width, and on the kernels.
TEST_P(RowChainCase, MatchesReference) {
  const RowChain &c = GetParam();
  std::string text = rowChainMlir(c);
  for (auto [modes, bits] : {std::pair<std::string, int>{"", 0}, {"", 256}, {"", 128}, {"*=kernel", 0}}) {
    SCOPED_TRACE(modes + " at " + std::to_string(bits) + " bits");
    auto module = KILN_TAKE(runtimeFor(modes, bits).loadModule(text, c.name + ".mlir"));
    if (!module) continue;
    std::vector<Tensor> in = {test::randomTensor({1, c.S, c.C}, 21), test::randomTensor({1, c.S, c.C}, 22),
                              test::randomTensor({1, 1, c.C}, 23), test::randomTensor({1, 1, c.C}, 24)};
    auto out = KILN_TAKE(module->call("main", in));
    ASSERT_EQ(out.size(), 1u) << text;
    EXPECT_TRUE(test::allClose(test::asDoubles(out[0]), rowChainReference(c, in), 1e-4, 1e-5)) << text;
    std::vector<TensorType> types;
    for (const Tensor &t : in) types.push_back(t.type());
    auto fn = KILN_TAKE(module->compile("main", types));
    if (!fn || !modes.empty()) continue;
    std::string strategies;
    for (const StepDesc &step : fn->executable->steps()) strategies += step.strategy + "\n";
    EXPECT_NE(strategies.find("row chain in blocks of"), std::string::npos) << strategies;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowChainCase,
                         ::testing::Values(RowChain{"layer_norm_f64_36x100", 36, 100, RowChain::kLayerNormF64},
                                           RowChain{"layer_norm_f64_256x384", 256, 384, RowChain::kLayerNormF64},
                                           RowChain{"rms_norm_64x128", 64, 128, RowChain::kRmsNorm},
                                           RowChain{"softmax_50x77", 50, 77, RowChain::kSoftmax}),
                         [](const ::testing::TestParamInfo<RowChain> &info) { return info.param.name; });

}  // namespace
