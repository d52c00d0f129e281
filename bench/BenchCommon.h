// Helpers shared by kiln's benchmarks.
#pragma once

#include "api/Kiln.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::bench {

/// A runtime without the disk cache (so first calls really compile), with
/// optional per-op placement ("*=kernel", ...).
inline std::unique_ptr<Runtime> makeRuntime(const char *opModes = "", int threads = 0) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.threads = threads;
  if (*opModes) o.placement = llvm::cantFail(ops::parseOpModes(opModes));
  return llvm::cantFail(Runtime::create(o));
}

/// One such runtime per benchmark binary.
inline Runtime &sharedRuntime() {
  static std::unique_ptr<Runtime> rt = makeRuntime();
  return *rt;
}

#if defined(__x86_64__)
namespace detail {
template <int Chains>
__attribute__((target("avx512f"))) inline float fmaLoop512(int64_t iterations) {
  __m512 acc[Chains];
  for (int j = 0; j < Chains; ++j) acc[j] = _mm512_set1_ps(float(j));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int j = 0; j < Chains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  __m512 sum = acc[0];
  for (int j = 1; j < Chains; ++j) sum = _mm512_add_ps(sum, acc[j]);
  return _mm512_reduce_add_ps(sum);
}
template <int Chains>
__attribute__((target("avx2,fma"))) inline float fmaLoop256(int64_t iterations) {
  __m256 acc[Chains];
  for (int j = 0; j < Chains; ++j) acc[j] = _mm256_set1_ps(float(j));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int j = 0; j < Chains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  __m256 sum = acc[0];
  for (int j = 1; j < Chains; ++j) sum = _mm256_add_ps(sum, acc[j]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0] + lanes[7];
}
}  // namespace detail

/// One core's fp32 FMA peak in GFLOP/s, measured with register-resident FMA
/// chains on the widest vectors the host has (at most `maxVectorBits`, 0 =
/// no cap); 0 when the host has neither AVX-512 nor AVX2+FMA.
inline double measureFmaPeakGflops(int maxVectorBits = 0) {
  bool wide = __builtin_cpu_supports("avx512f") && (maxVectorBits == 0 || maxVectorBits >= 512);
  if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
  const int lanes = wide ? 16 : 8;
  const int chains = 12;  // more independent FMAs than latency x pipes
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int64_t iterations = 2'000'000;
    auto t0 = std::chrono::steady_clock::now();
    volatile float sink = wide ? detail::fmaLoop512<chains>(iterations) : detail::fmaLoop256<chains>(iterations);
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * lanes * chains * double(iterations) / s / 1e9);
  }
  return best;
}
#else
inline double measureFmaPeakGflops(int = 0) { return 0; }
#endif

}  // namespace kiln::bench
