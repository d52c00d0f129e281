#include "runtime/MachinePeak.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln {
namespace {

/// This thread's CPU time in seconds: a measurement is not skewed by other
/// processes taking the core away (a busy machine would otherwise record a
/// low peak, and the profiler caches it).
double threadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

#if defined(__x86_64__)
template <int Chains>
__attribute__((target("avx512f"))) float fmaLoop512(int64_t iterations) {
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
__attribute__((target("avx2,fma"))) float fmaLoop256(int64_t iterations) {
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
#endif

}  // namespace

double measureFmaPeakGflops(int maxVectorBits) {
#if defined(__x86_64__)
  bool wide = __builtin_cpu_supports("avx512f") && (maxVectorBits == 0 || maxVectorBits >= 512);
  if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
  const int lanes = wide ? 16 : 8;
  constexpr int chains = 12;  // more independent FMAs than latency x pipes
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int64_t iterations = 2'000'000;
    double t0 = threadSeconds();
    volatile float sink = wide ? fmaLoop512<chains>(iterations) : fmaLoop256<chains>(iterations);
    (void)sink;
    best = std::max(best, 2.0 * lanes * chains * double(iterations) / (threadSeconds() - t0) / 1e9);
  }
  return best;
#else
  (void)maxVectorBits;
  return 0;
#endif
}

double measureMemoryBandwidthGBs() {
  const size_t bytes = size_t(64) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = threadSeconds();
    std::memcpy(rep % 2 ? a.data() : b.data(), rep % 2 ? b.data() : a.data(), bytes);
    best = std::max(best, 2.0 * double(bytes) / (threadSeconds() - t0) / 1e9);
  }
  volatile char sink = a[bytes / 2] + b[bytes / 3];
  (void)sink;
  return best;
}

}  // namespace kiln
