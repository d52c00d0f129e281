// JIT-generated code vs handwritten kernel, per op and shape class, side by
// side in one run (issue: kernels and per-op fallback).
//
// Each row compiles a one-op function twice: all-JIT and all-kernel
// placement, times Module::call for both in the same iterations, and reports
// GFLOP/s (compute ops) or GB/s (memory-bound ops) for each and their ratio.
#include "bench/BenchCommon.h"
#include "api/Kiln.h"

#include <benchmark/benchmark.h>

#include <chrono>

using namespace kiln;

namespace {

struct Case {
  const char *name;
  std::string mlir;
  std::vector<TensorType> inputs;
  double flops;  // 0 = memory-bound: report GB/s over inputs + outputs
  double bytes;
};

std::string t(const TensorType &tt) { return "tensor<" + tt.str() + ">"; }

Case unary(const char *op, std::vector<int64_t> shape) {
  TensorType x{DType::f32, Shape(shape.begin(), shape.end())};
  std::string m = "func.func @main(%x: " + t(x) + ") -> " + t(x) + " {\n  %r = " + op + " %x : (" + t(x) +
                  ") -> " + t(x) + "\n  return %r : " + t(x) + "\n}\n";
  return {op, m, {x}, 0, 2.0 * x.byteSize()};
}

Case add(std::vector<int64_t> shape) {
  TensorType x{DType::f32, Shape(shape.begin(), shape.end())};
  std::string m = "func.func @main(%x: " + t(x) + ", %y: " + t(x) + ") -> " + t(x) + " {\n  %r = tosa.add %x, %y : (" +
                  t(x) + ", " + t(x) + ") -> " + t(x) + "\n  return %r : " + t(x) + "\n}\n";
  return {"tosa.add", m, {x, x}, 0, 3.0 * x.byteSize()};
}

Case matmul(int64_t n, int64_t m, int64_t k) {
  TensorType a{DType::f32, {1, m, k}}, b{DType::f32, {1, k, n}}, o{DType::f32, {1, m, n}};
  std::string s = "func.func @main(%a: " + t(a) + ", %b: " + t(b) + ") -> " + t(o) + " {\n" +
                  "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n" +
                  "  %r = tosa.matmul %a, %b, %zp, %zp : (" + t(a) + ", " + t(b) +
                  ", tensor<1xf32>, tensor<1xf32>) -> " + t(o) + "\n  return %r : " + t(o) + "\n}\n";
  return {"tosa.matmul", s, {a, b}, 2.0 * m * n * k, 0};
}

Case conv(int64_t hw, int64_t c, int64_t f, int64_t k) {
  TensorType x{DType::f32, {1, hw, hw, c}}, w{DType::f32, {f, k, k, c}}, b{DType::f32, {f}};
  TensorType o{DType::f32, {1, hw, hw, f}};
  int64_t p = k / 2;
  std::string pad = std::to_string(p);
  std::string s = "func.func @main(%x: " + t(x) + ", %w: " + t(w) + ", %b: " + t(b) + ") -> " + t(o) + " {\n" +
                  "  %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n" +
                  "  %r = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, pad = array<i64: " + pad + ", " + pad +
                  ", " + pad + ", " + pad + ">, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (" + t(x) +
                  ", " + t(w) + ", " + t(b) + ", tensor<1xf32>, tensor<1xf32>) -> " + t(o) + "\n  return %r : " +
                  t(o) + "\n}\n";
  return {"tosa.conv2d", s, {x, w, b}, 2.0 * hw * hw * f * k * k * c, 0};
}

Case reduce(std::vector<int64_t> shape) {
  TensorType x{DType::f32, Shape(shape.begin(), shape.end())};
  TensorType o = x;
  o.shape.back() = 1;
  std::string s = "func.func @main(%x: " + t(x) + ") -> " + t(o) + " {\n  %r = tosa.reduce_sum %x {axis = " +
                  std::to_string(shape.size() - 1) + " : i32} : (" + t(x) + ") -> " + t(o) + "\n  return %r : " +
                  t(o) + "\n}\n";
  return {"tosa.reduce_sum", s, {x}, 0, double(x.byteSize())};
}

const std::vector<Case> &cases() {
  static const std::vector<Case> all = {
      add({1000}), add({1000, 1000}),
      unary("tosa.exp", {1000}), unary("tosa.exp", {1000, 1000}),
      unary("tosa.sigmoid", {1000, 1000}),
      reduce({64, 1000}), reduce({1000, 1000}),
      matmul(64, 64, 64), matmul(256, 256, 256), matmul(512, 512, 512),
      conv(16, 16, 16, 3), conv(56, 64, 64, 3),
  };
  return all;
}

}  // namespace

static void BM_JitVsKernel(benchmark::State &state) {
  const Case &c = cases()[size_t(state.range(0))];
  static auto jitRt = bench::makeRuntime("*=jit");
  static auto kernelRt = bench::makeRuntime("*=kernel");
  auto mj = llvm::cantFail(jitRt->loadModule(c.mlir, "jit"));
  auto mk = llvm::cantFail(kernelRt->loadModule(c.mlir, "kernel"));
  std::vector<Tensor> in;
  for (const TensorType &tt : c.inputs) {
    Tensor x = Tensor::empty(tt.dtype, tt.shape);
    for (int64_t i = 0; i < x.numElements(); ++i) x.data<float>()[i] = float(i % 13) * 0.01f;
    in.push_back(x);
  }
  llvm::cantFail(mj->call("main", in).takeError());
  llvm::cantFail(mk->call("main", in).takeError());
  double tj = 0, tk = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto a = mj->call("main", in);
    auto t1 = std::chrono::steady_clock::now();
    auto b = mk->call("main", in);
    auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    tj += std::chrono::duration<double>(t1 - t0).count();
    tk += std::chrono::duration<double>(t2 - t1).count();
  }
  double n = double(state.iterations());
  bool compute = c.flops > 0;
  double work = compute ? c.flops : c.bytes;
  const char *unit = compute ? "GFLOP/s" : "GB/s";
  state.counters[std::string("jit_") + unit] = work * n / tj / 1e9;
  state.counters[std::string("kernel_") + unit] = work * n / tk / 1e9;
  state.counters["jit_over_kernel"] = tk / tj;
  std::string shape;
  for (const TensorType &tt : c.inputs) shape += (shape.empty() ? "" : ",") + tt.str();
  state.SetLabel(std::string(c.name) + " " + shape);
}
BENCHMARK(BM_JitVsKernel)->DenseRange(0, 11)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
