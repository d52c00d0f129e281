#include "kernels/VectorKernels.h"

#include <algorithm>

namespace kiln::kernels {
namespace {

/// Eight rows at a time into y, which stays in L1 while the rows stream
/// past (four at a time read cold weights ~10% slower).
inline __attribute__((always_inline)) void sumRowsBody(const float *__restrict a, const float *__restrict b,
                                                       float *__restrict y, int64_t rows, int64_t w) {
  std::fill(y, y + w, 0.0f);
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float a0 = a[r], a1 = a[r + 1], a2 = a[r + 2], a3 = a[r + 3];
    const float a4 = a[r + 4], a5 = a[r + 5], a6 = a[r + 6], a7 = a[r + 7];
    const float *b0 = b + r * w, *b1 = b0 + w, *b2 = b1 + w, *b3 = b2 + w;
    const float *b4 = b3 + w, *b5 = b4 + w, *b6 = b5 + w, *b7 = b6 + w;
    for (int64_t j = 0; j < w; ++j)
      y[j] += (a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j]) + (a4 * b4[j] + a5 * b5[j] + a6 * b6[j] + a7 * b7[j]);
  }
  for (; r < rows; ++r) {
    const float ar = a[r], *br = b + r * w;
    for (int64_t j = 0; j < w; ++j) y[j] += ar * br[j];
  }
}

__attribute__((target("avx512f,avx512vl,avx2,fma"))) void sumRows512(const float *a, const float *b, float *y,
                                                                    int64_t rows, int64_t w) {
  sumRowsBody(a, b, y, rows, w);
}
__attribute__((target("avx2,fma"))) void sumRows256(const float *a, const float *b, float *y, int64_t rows,
                                                     int64_t w) {
  sumRowsBody(a, b, y, rows, w);
}
void sumRows128(const float *a, const float *b, float *y, int64_t rows, int64_t w) { sumRowsBody(a, b, y, rows, w); }

}  // namespace

SumRowsFn sumRowsFor(int vectorBits) {
  if (vectorBits == 512)  // every feature sumRows512 is built for
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
                   __builtin_cpu_supports("fma")
               ? &sumRows512
               : nullptr;
  if (vectorBits == 256) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &sumRows256 : nullptr;
  if (vectorBits == 128) return &sumRows128;
  return nullptr;
}

SumRowsFn sumRows() {
  static const SumRowsFn widest = [] {
    for (int bits : {512, 256})
      if (SumRowsFn f = sumRowsFor(bits)) return f;
    return &sumRows128;
  }();
  return widest;
}

}  // namespace kiln::kernels
