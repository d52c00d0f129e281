// Attention, softmax(Q Kᵀ) x V, as the exporters write it: differential
// tests of the fused form (kiln-outline-clusters puts both matmuls in one
// cluster, kiln-cpu-strategy runs them as one loop over blocks of query
// rows: lowering/cpu/strategy/Attention.cpp) against the unfused JIT code
// (attention=off), the handwritten kernels and a double-precision
// reference, at every vector width, for row counts that the row blocks
// divide and that they do not (ViT's 197 tokens).
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

}  // namespace
