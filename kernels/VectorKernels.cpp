#include "kernels/VectorKernels.h"

#include <algorithm>
#include <cstdint>
#include <limits>

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

/// Channels in blocks of 32 accumulators kept in registers across the
/// window (two AVX-512 or four AVX2 vectors), the rest one at a time.
inline __attribute__((always_inline)) void depthwiseRowBody(const DepthwiseRow &d) {
  constexpr int64_t kBlock = 32;
  const int64_t ih0 = d.oh * d.sh - d.pt;
  for (int64_t ow = 0; ow < d.OW; ++ow) {
    const int64_t iw0 = ow * d.sw - d.pl;
    float *__restrict out = d.y + ow * d.C;
    auto window = [&](int64_t c, int64_t width, auto &&accumulate) {
      for (int64_t kh = 0; kh < d.KH; ++kh) {
        const int64_t ih = ih0 + kh * d.dh;
        if (ih < 0 || ih >= d.H) continue;
        for (int64_t kw = 0; kw < d.KW; ++kw) {
          const int64_t iw = iw0 + kw * d.dw;
          if (iw < 0 || iw >= d.W) continue;
          accumulate(d.x + (ih * d.W + iw) * d.C + c, d.w + (kh * d.KW + kw) * d.C + c, width);
        }
      }
    };
    int64_t c = 0;
    for (; c + kBlock <= d.C; c += kBlock) {
      float acc[kBlock];
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = d.biasScalar ? d.bias[0] : d.bias[c + j];
      window(c, kBlock, [&](const float *__restrict xp, const float *__restrict wp, int64_t) {
        for (int64_t j = 0; j < kBlock; ++j) acc[j] += xp[j] * wp[j];
      });
      for (int64_t j = 0; j < kBlock; ++j) out[c + j] = acc[j];
    }
    if (c == d.C) continue;
    for (int64_t j = c; j < d.C; ++j) out[j] = d.biasScalar ? d.bias[0] : d.bias[j];
    window(c, d.C - c, [&](const float *__restrict xp, const float *__restrict wp, int64_t width) {
      for (int64_t j = 0; j < width; ++j) out[c + j] += xp[j] * wp[j];
    });
  }
}

__attribute__((target("avx512f,avx512vl,avx2,fma"))) void depthwiseRow512(const DepthwiseRow &d) {
  depthwiseRowBody(d);
}
__attribute__((target("avx2,fma"))) void depthwiseRow256(const DepthwiseRow &d) { depthwiseRowBody(d); }
void depthwiseRow128(const DepthwiseRow &d) { depthwiseRowBody(d); }

/// Tiles of 4 rows of A x 4 rows of B: 16 vector accumulators along k
/// (8 loads per 16 FMAs), summed across their lanes once at the end; the
/// k remainder and the edge tiles one element at a time. Rows of B outer,
/// so that a tile's 4 rows of B stay in L1 while every row of A passes.
/// (No lambdas: they would not carry the callers' target features.)
#define KILN_LOAD(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));
/// One dot product of the edges (rows or columns past the 4 x 4 tiles).
template <typename Vec, int V>
inline __attribute__((always_inline)) void dotOne(const float *ai, const float *bj, int64_t k, float *out,
                                                  bool accumulate) {
  const int64_t kv = k / V * V;
  Vec acc = Vec{};
  for (int64_t q = 0; q < kv; q += V) {
    Vec x, w;
    KILN_LOAD(x, ai + q);
    KILN_LOAD(w, bj + q);
    acc += x * w;
  }
  float v = 0;
  for (int l = 0; l < V; ++l) v += acc[l];
  for (int64_t q = kv; q < k; ++q) v += ai[q] * bj[q];
  *out = accumulate ? *out + v : v;
}

template <typename Vec, int V>
inline __attribute__((always_inline)) void dotProductsBody(const float *a, int64_t lda, const float *b, int64_t ldb,
                                                           float *y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                                                           bool accumulate) {
  const int64_t kv = k / V * V;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *br[4] = {b + j * ldb, b + (j + 1) * ldb, b + (j + 2) * ldb, b + (j + 3) * ldb};
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      const float *ar[4] = {a + i * lda, a + (i + 1) * lda, a + (i + 2) * lda, a + (i + 3) * lda};
      Vec c[4][4];
      for (int r = 0; r < 4; ++r)
        for (int t = 0; t < 4; ++t) c[r][t] = Vec{} ;
      for (int64_t q = 0; q < kv; q += V) {
        Vec x[4], w[4];
        for (int r = 0; r < 4; ++r) KILN_LOAD(x[r], ar[r] + q);
        for (int t = 0; t < 4; ++t) KILN_LOAD(w[t], br[t] + q);
        for (int r = 0; r < 4; ++r)
          for (int t = 0; t < 4; ++t) c[r][t] += x[r] * w[t];
      }
      for (int r = 0; r < 4; ++r)
        for (int t = 0; t < 4; ++t) {
          float v = 0;
          for (int l = 0; l < V; ++l) v += c[r][t][l];
          for (int64_t q = kv; q < k; ++q) v += ar[r][q] * br[t][q];
          float &out = y[(i + r) * ldy + j + t];
          out = accumulate ? out + v : v;
        }
    }
    for (; i < m; ++i)
      for (int t = 0; t < 4; ++t) dotOne<Vec, V>(a + i * lda, br[t], k, y + i * ldy + j + t, accumulate);
  }
  for (; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) dotOne<Vec, V>(a + i * lda, b + j * ldb, k, y + i * ldy + j, accumulate);
}
#undef KILN_LOAD

__attribute__((target("avx512f,avx512vl,avx2,fma"))) void dotProducts512(const float *a, int64_t lda, const float *b,
                                                                        int64_t ldb, float *y, int64_t ldy, int64_t m,
                                                                        int64_t n, int64_t k, bool accumulate) {
  dotProductsBody<Floats16, 16>(a, lda, b, ldb, y, ldy, m, n, k, accumulate);
}
__attribute__((target("avx2,fma"))) void dotProducts256(const float *a, int64_t lda, const float *b, int64_t ldb,
                                                         float *y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                                                         bool accumulate) {
  dotProductsBody<Floats8, 8>(a, lda, b, ldb, y, ldy, m, n, k, accumulate);
}
void dotProducts128(const float *a, int64_t lda, const float *b, int64_t ldb, float *y, int64_t ldy, int64_t m,
                    int64_t n, int64_t k, bool accumulate) {
  dotProductsBody<Floats4, 4>(a, lda, b, ldb, y, ldy, m, n, k, accumulate);
}

typedef int32_t Ints16 __attribute__((vector_size(64)));
typedef int32_t Ints8 __attribute__((vector_size(32)));
typedef int32_t Ints4 __attribute__((vector_size(16)));

typedef float Floats2 __attribute__((vector_size(8)));
typedef double Doubles8 __attribute__((vector_size(64)));
typedef double Doubles4 __attribute__((vector_size(32)));
typedef double Doubles2 __attribute__((vector_size(16)));

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx2,fma")
namespace w512 {
#include "kernels/VectorUnary.inc"
#include "kernels/VectorReduce.inc"
}  // namespace w512
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace w256 {
#include "kernels/VectorUnary.inc"
#include "kernels/VectorReduce.inc"
}  // namespace w256
#pragma GCC pop_options
namespace w128 {
#include "kernels/VectorUnary.inc"
#include "kernels/VectorReduce.inc"
}  // namespace w128

#define KILN_UNARY_VARIANTS(NAME, OP)                                                                  \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void NAME##512(const float *x, float *y, int64_t n) { \
    w512::unaryBody<Floats16, Ints16, 16, OP>(x, y, n);                                                  \
  }                                                                                                      \
  __attribute__((target("avx2,fma"))) void NAME##256(const float *x, float *y, int64_t n) {              \
    w256::unaryBody<Floats8, Ints8, 8, OP>(x, y, n);                                                     \
  }                                                                                                      \
  void NAME##128(const float *x, float *y, int64_t n) { w128::unaryBody<Floats4, Ints4, 4, OP>(x, y, n); }
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void clamp512(const float *x, float *y, int64_t n,
                                                                            float lo, float hi) {
  w512::clampBody<Floats16, 16>(x, y, n, lo, hi);
}
__attribute__((target("avx2,fma"))) void clamp256(const float *x, float *y, int64_t n, float lo, float hi) {
  w256::clampBody<Floats8, 8>(x, y, n, lo, hi);
}
void clamp128(const float *x, float *y, int64_t n, float lo, float hi) { w128::clampBody<Floats4, 4>(x, y, n, lo, hi); }

KILN_UNARY_VARIANTS(expF, VectorUnary::kExp)
KILN_UNARY_VARIANTS(sigmoidF, VectorUnary::kSigmoid)
KILN_UNARY_VARIANTS(erfF, VectorUnary::kErf)
KILN_UNARY_VARIANTS(tanhF, VectorUnary::kTanh)
#undef KILN_UNARY_VARIANTS

/// One register tile of GemmFn: MR rows x NV vectors of columns, the
/// accumulators in registers for one block of k, starting from zero or
/// (`accumulate`) from what an earlier block left in y.
template <typename Vec, int V, int MR, int NV>
inline __attribute__((always_inline)) void gemmTile(const float *a, int64_t lda, const float *b, int64_t ldb, float *y,
                                                    int64_t ldy, int64_t k, bool accumulate) {
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      acc[r][v] = Vec{};
      if (accumulate) __builtin_memcpy(&acc[r][v], y + r * ldy + v * V, sizeof(Vec));
    }
  for (int64_t q = 0; q < k; ++q) {
    Vec bv[NV];
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], b + q * ldb + v * V, sizeof(Vec));
    for (int r = 0; r < MR; ++r) {
      Vec av = Vec{} + a[r * lda + q];
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) __builtin_memcpy(y + r * ldy + v * V, &acc[r][v], sizeof(Vec));
}

/// Bytes of B's panel one block of k spans (kc x NV vectors): it stays in
/// L1 (32 KiB on Zen 4, 48 on Intel's recent cores, beside the rows of A)
/// while every row tile passes, where a panel over the whole k came from
/// L2 for each row tile: a conv's patch of 3x3x512 is a 4608 x 64 panel of
/// 1.2 MB (ResNet-50's layer-3 and -4 convs in the all-kernel plan at
/// 47-65 GFLOP/s a call).
constexpr int64_t kGemmPanelBlockBytes = 16 << 10;

/// Rows 0 .. m of one block of NV vectors of columns, in blocks of k where
/// B is wider than the block: MR-row tiles, then a 4-row tile if the rows
/// left fill one (one row at a time would load B's vectors for NV FMAs
/// each), then single rows.
template <typename Vec, int V, int MR, int NV>
inline __attribute__((always_inline)) void gemmColumns(const float *a, int64_t lda, const float *b, int64_t ldb,
                                                       float *y, int64_t ldy, int64_t m, int64_t k) {
  // (A B of panels, each contiguous k x NV*V as the matmul's are, streams
  // in order from L2 faster whole: BERT-base's all-kernel plan 144-160 ->
  // 171-180 ms in blocks.)
  constexpr int64_t kBlock = kGemmPanelBlockBytes / int64_t(NV * sizeof(Vec));
  const int64_t kc = ldb == NV * V ? std::max<int64_t>(k, 1) : kBlock;
  // At least one block: with k = 0 the tiles still write Y's zeros.
  for (int64_t q = 0; q == 0 || q < k; q += kc) {
    const int64_t kb = std::min(kc, k - q);
    const bool acc = q > 0;
    const float *aq = a + q, *bq = b + q * ldb;
    int64_t i = 0;
    for (; i + MR <= m; i += MR) gemmTile<Vec, V, MR, NV>(aq + i * lda, lda, bq, ldb, y + i * ldy, ldy, kb, acc);
    if constexpr (MR > 4)
      for (; i + 4 <= m; i += 4) gemmTile<Vec, V, 4, NV>(aq + i * lda, lda, bq, ldb, y + i * ldy, ldy, kb, acc);
    for (; i < m; ++i) gemmTile<Vec, V, 1, NV>(aq + i * lda, lda, bq, ldb, y + i * ldy, ldy, kb, acc);
  }
}

/// Column blocks of NV vectors outermost, each in blocks of k (a block's
/// kc x NV*V slice of B stays in L1 while every row tile passes), then a
/// block of 2 and of 1 for the columns left.
template <typename Vec, int V, int MR, int NV>
inline __attribute__((always_inline)) void gemmBody(const float *a, int64_t lda, const float *b, int64_t ldb, float *y,
                                                    int64_t ldy, int64_t m, int64_t n, int64_t k) {
  const int64_t np = (n + V - 1) / V * V;
  int64_t j = 0;
  for (; j + NV * V <= np; j += NV * V) gemmColumns<Vec, V, MR, NV>(a, lda, b + j, ldb, y + j, ldy, m, k);
  if constexpr (NV > 2)
    for (; j + 2 * V <= np; j += 2 * V) gemmColumns<Vec, V, MR, 2>(a, lda, b + j, ldb, y + j, ldy, m, k);
  for (; j < np; j += V) gemmColumns<Vec, V, MR, 1>(a, lda, b + j, ldb, y + j, ldy, m, k);
}

// AVX-512: 6 rows x 4 vectors (64 columns, a whole matmul panel) = 24
// accumulators of 32 registers, 4 loads of B and 6 broadcasts per 24 FMAs:
// 98-117 GFLOP/s a core on Zen 4 for BERT's and ResNet's shapes, where 8
// rows x 2 vectors reached 88-103 (and 50-73 on a conv's B of 256-512
// columns, which 8 x 2 reads twice as often). AVX2 and the baseline: 4 x 2
// = 8 accumulators of 16.
__attribute__((target("avx512f,avx512vl,avx2,fma"))) void gemm512(const float *a, int64_t lda, const float *b,
                                                                 int64_t ldb, float *y, int64_t ldy, int64_t m,
                                                                 int64_t n, int64_t k) {
  gemmBody<Floats16, 16, 6, 4>(a, lda, b, ldb, y, ldy, m, n, k);
}
__attribute__((target("avx2,fma"))) void gemm256(const float *a, int64_t lda, const float *b, int64_t ldb, float *y,
                                                  int64_t ldy, int64_t m, int64_t n, int64_t k) {
  gemmBody<Floats8, 8, 4, 2>(a, lda, b, ldb, y, ldy, m, n, k);
}
void gemm128(const float *a, int64_t lda, const float *b, int64_t ldb, float *y, int64_t ldy, int64_t m, int64_t n,
             int64_t k) {
  gemmBody<Floats4, 4, 4, 2>(a, lda, b, ldb, y, ldy, m, n, k);
}

bool hostRuns(int vectorBits) {
  if (vectorBits == 512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
  if (vectorBits == 256) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return vectorBits == 128;
}

#define KILN_REDUCE_VARIANTS(NAME, OP)                                                                          \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void NAME##Rows512(const float *x, float *y,  \
                                                                                   int64_t rows, int64_t w) {  \
    w512::reduceRowsBody<Floats16, 16, Floats8, Doubles8, OP>(x, y, rows, w);                                          \
  }                                                                                                              \
  __attribute__((target("avx2,fma"))) void NAME##Rows256(const float *x, float *y, int64_t rows, int64_t w) {     \
    w256::reduceRowsBody<Floats8, 8, Floats4, Doubles4, OP>(x, y, rows, w);                                            \
  }                                                                                                              \
  void NAME##Rows128(const float *x, float *y, int64_t rows, int64_t w) {                                        \
    w128::reduceRowsBody<Floats4, 4, Floats2, Doubles2, OP>(x, y, rows, w);                                            \
  }                                                                                                              \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void NAME##Columns512(                          \
      const float *x, int64_t stride, float *y, int64_t cols, int64_t axis) {                                    \
    w512::reduceColumnsBody<Floats16, 16, Floats8, Doubles8, OP>(x, stride, y, cols, axis);                            \
  }                                                                                                              \
  __attribute__((target("avx2,fma"))) void NAME##Columns256(const float *x, int64_t stride, float *y,             \
                                                            int64_t cols, int64_t axis) {                        \
    w256::reduceColumnsBody<Floats8, 8, Floats4, Doubles4, OP>(x, stride, y, cols, axis);                              \
  }                                                                                                              \
  void NAME##Columns128(const float *x, int64_t stride, float *y, int64_t cols, int64_t axis) {                  \
    w128::reduceColumnsBody<Floats4, 4, Floats2, Doubles2, OP>(x, stride, y, cols, axis);                              \
  }
KILN_REDUCE_VARIANTS(reduceSum, VectorReduce::kSum)
KILN_REDUCE_VARIANTS(reduceMax, VectorReduce::kMax)
KILN_REDUCE_VARIANTS(reduceMin, VectorReduce::kMin)
#undef KILN_REDUCE_VARIANTS

/// Stores R (or `rc`) output columns `ldo` floats apart, `nout` floats each
/// (Full: V).
template <typename Vec, int V, int R, bool Full>
inline __attribute__((always_inline)) void groupedStore(const Vec *acc, int64_t rc, float *out, int64_t ldo,
                                                       int64_t nout) {
#pragma GCC unroll 64
  for (int r = 0; r < R; ++r) {
    if (r >= rc) break;
    if (Full) __builtin_memcpy(out + r * ldo, &acc[r], sizeof(Vec));
    else
      for (int64_t l = 0; l < nout; ++l) out[r * ldo + l] = acc[r][l];
  }
}

/// R output columns from ow0 of one group block, a window KW_ wide at
/// stride SW_ (dilation 1): each input column the tile reads is loaded and
/// permuted once per channel and used for every tap that meets it (3
/// taps at stride 1: one permute per 3 FMAs). Checked: some of those
/// columns may lie outside the image.
template <typename Vec, typename IVec, int V, int R, int KW_, int SW_, bool Full, bool Checked>
inline __attribute__((always_inline)) void groupedTileReuse(const GroupedRow &d, const float *wg, IVec base,
                                                           int64_t off, int64_t ow0, float *out, int64_t ldo,
                                                           int64_t nout) {
  constexpr int Q = (R - 1) * SW_ + KW_;
  Vec acc[R];
#pragma GCC unroll 64
  for (int r = 0; r < R; ++r) acc[r] = Vec{};
  const int64_t iw0 = ow0 * SW_ - d.pl, pix = d.G * d.C;
  for (int64_t kh = 0; kh < d.KH; ++kh) {
    const int64_t ih = d.oh * d.sh - d.pt + kh * d.dh;
    if (ih < 0 || ih >= d.H) continue;
    const float *xr = d.x + (ih * d.W + iw0) * pix + off;
    const float *wk = wg + kh * KW_ * d.C * V;
    for (int64_t c = 0; c < d.C; ++c) {
      const IVec idx = base + int32_t(c);
      Vec wv[KW_];
#pragma GCC unroll 64
      for (int kw = 0; kw < KW_; ++kw) __builtin_memcpy(&wv[kw], wk + (kw * d.C + c) * V, sizeof(Vec));
#pragma GCC unroll 64
      for (int q = 0; q < Q; ++q) {
        if (Checked && (iw0 + q < 0 || iw0 + q >= d.W)) continue;
        Vec v;
        __builtin_memcpy(&v, xr + q * pix, sizeof v);
        v = __builtin_shuffle(v, idx);
#pragma GCC unroll 64
        for (int kw = 0; kw < KW_; ++kw) {
          const int t = q - kw;
          if (t >= 0 && t % SW_ == 0 && t / SW_ < R) acc[t / SW_] += v * wv[kw];
        }
      }
    }
  }
  groupedStore<Vec, V, R, Full>(acc, R, out, ldo, nout);
}

/// Up to R output columns (`rc`) from ow0 of one group block, any window,
/// stride and dilation: one permute per FMA.
template <typename Vec, typename IVec, int V, int R, bool Full>
inline __attribute__((always_inline)) void groupedTileAny(const GroupedRow &d, const float *wg, IVec base,
                                                         int64_t off, int64_t ow0, int64_t rc, float *out,
                                                         int64_t ldo, int64_t nout) {
  Vec acc[R];
#pragma GCC unroll 64
  for (int r = 0; r < R; ++r) acc[r] = Vec{};
  const int64_t pix = d.G * d.C;
  for (int64_t kh = 0; kh < d.KH; ++kh) {
    const int64_t ih = d.oh * d.sh - d.pt + kh * d.dh;
    if (ih < 0 || ih >= d.H) continue;
    const float *xr = d.x + ih * d.W * pix + off;
    for (int64_t kw = 0; kw < d.KW; ++kw) {
      const float *wk = wg + (kh * d.KW + kw) * d.C * V;
      for (int64_t c = 0; c < d.C; ++c) {
        const IVec idx = base + int32_t(c);
        Vec wv;
        __builtin_memcpy(&wv, wk + c * V, sizeof wv);
#pragma GCC unroll 64
        for (int r = 0; r < R; ++r) {
          if (r >= rc) break;
          const int64_t iw = (ow0 + r) * d.sw - d.pl + kw * d.dw;
          if (iw < 0 || iw >= d.W) continue;
          Vec v;
          __builtin_memcpy(&v, xr + iw * pix, sizeof v);
          acc[r] += __builtin_shuffle(v, idx) * wv;
        }
      }
    }
  }
  groupedStore<Vec, V, R, Full>(acc, rc, out, ldo, nout);
}

/// One group block's row, a 3-wide window at stride SW_, from output
/// column `ow` on: tiles of R output columns, then R / 2; tiles whose
/// input columns all lie inside the image without bounds checks.
template <typename Vec, typename IVec, int V, int R, int SW_, bool Full>
inline __attribute__((always_inline)) void groupedReuseRow(const GroupedRow &d, const float *wg, IVec base,
                                                          int64_t off, float *yo, int64_t nout, int64_t &ow) {
  constexpr int KW = 3;
  const int64_t ldo = d.G * d.F;
  auto inside = [&](int64_t o, int64_t r) { return o * SW_ - d.pl >= 0 && (o + r - 1) * SW_ - d.pl + KW - 1 < d.W; };
  for (; ow + R <= d.OW; ow += R)
    if (inside(ow, R))
      groupedTileReuse<Vec, IVec, V, R, KW, SW_, Full, false>(d, wg, base, off, ow, yo + ow * ldo, ldo, nout);
    else
      groupedTileReuse<Vec, IVec, V, R, KW, SW_, Full, true>(d, wg, base, off, ow, yo + ow * ldo, ldo, nout);
  for (; ow + R / 2 <= d.OW; ow += R / 2)
    groupedTileReuse<Vec, IVec, V, R / 2, KW, SW_, Full, true>(d, wg, base, off, ow, yo + ow * ldo, ldo, nout);
}

/// One group block's row: the 3-wide windows at stride 1 or 2 in
/// groupedReuseRow's tiles, the rest (other windows, the last columns) in
/// groupedTileAny's.
template <typename Vec, typename IVec, int V, int R, bool Full>
inline __attribute__((always_inline)) void groupedBlockRow(const GroupedRow &d, const float *wg, IVec base,
                                                          int64_t off, float *yo, int64_t nout) {
  int64_t ow = 0;
  if (d.KW == 3 && d.dw == 1 && d.sw == 1) groupedReuseRow<Vec, IVec, V, R, 1, Full>(d, wg, base, off, yo, nout, ow);
  else if (d.KW == 3 && d.dw == 1 && d.sw == 2) groupedReuseRow<Vec, IVec, V, R, 2, Full>(d, wg, base, off, yo, nout, ow);
  const int64_t ldo = d.G * d.F;
  for (; ow < d.OW; ow += R)
    groupedTileAny<Vec, IVec, V, R, Full>(d, wg, base, off, ow, std::min<int64_t>(R, d.OW - ow), yo + ow * ldo, ldo,
                                          nout);
}

/// GroupedRow (VectorKernels.h) in vectors of V floats, tiles of R output
/// columns. Every load is a whole vector inside the pixel's G x C
/// channels: the last block, when the groups do not fill it, loads the
/// pixel's last V channels and shifts its permutes to match (lanes of the
/// groups past G read other groups' channels against zero weights and are
/// not stored).
template <typename Vec, typename IVec, int V, int R>
inline __attribute__((always_inline)) void groupedRowBody(const GroupedRow &d) {
  const int64_t P = V / d.F, blocks = d.block1 > 0 ? d.block1 : (d.G + P - 1) / P, pix = d.G * d.C;
  for (int64_t gb = d.block0; gb < blocks; ++gb) {
    const int64_t groups = std::min(P, d.G - gb * P);
    const int64_t off = std::min(gb * P * d.C, pix - V), nout = groups * d.F;
    IVec base;
    for (int l = 0; l < V; ++l) base[l] = int32_t(l / d.F * d.C + gb * P * d.C - off);
    const float *wg = d.w + gb * d.KH * d.KW * d.C * V;
    float *yo = d.y + gb * P * d.F;
    if (nout == V) groupedBlockRow<Vec, IVec, V, R, true>(d, wg, base, off, yo, nout);
    else groupedBlockRow<Vec, IVec, V, R, false>(d, wg, base, off, yo, nout);
  }
}

__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void groupedRow512(const GroupedRow &d) {
  groupedRowBody<Floats16, Ints16, 16, 14>(d);
}
__attribute__((target("avx2,fma"))) void groupedRow256(const GroupedRow &d) {
  groupedRowBody<Floats8, Ints8, 8, 7>(d);
}
void groupedRow128(const GroupedRow &d) { groupedRowBody<Floats4, Ints4, 4, 7>(d); }

/// The widest of 512, 256 and 128 the host runs.
int hostWidest() { return hostRuns(512) ? 512 : hostRuns(256) ? 256 : 128; }

/// The variant built for `vectorBits` (one of the three), or null when the
/// host cannot run it or there is no such width.
template <typename Fn> Fn variantFor(int vectorBits, Fn v512, Fn v256, Fn v128) {
  if (!hostRuns(vectorBits)) return nullptr;
  return vectorBits == 512 ? v512 : vectorBits == 256 ? v256 : v128;
}

}  // namespace

DotProductsFn dotProductsFor(int vectorBits) {
  return variantFor(vectorBits, &dotProducts512, &dotProducts256, &dotProducts128);
}

DotProductsFn dotProducts() {
  static const DotProductsFn widest = dotProductsFor(hostWidest());
  return widest;
}

DepthwiseRowFn depthwiseRowFor(int vectorBits) {
  return variantFor(vectorBits, &depthwiseRow512, &depthwiseRow256, &depthwiseRow128);
}

DepthwiseRowFn depthwiseRow() {
  static const DepthwiseRowFn widest = depthwiseRowFor(hostWidest());
  return widest;
}

int hostVectorBits() { return hostWidest(); }

GroupedRowFn groupedRowFor(int vectorBits) {
  return variantFor(vectorBits, &groupedRow512, &groupedRow256, &groupedRow128);
}

int64_t groupedRowLanes(int vectorBits, int64_t G, int64_t F, int64_t C) {
  const int64_t lanes = vectorBits / 32;
  if (F <= 0 || C <= 0 || lanes % F || lanes / F * C > lanes || G * C < lanes) return 0;
  return lanes;
}

void packGroupedFilter(const float *w, int64_t G, int64_t F, int64_t KH, int64_t KW, int64_t C, int64_t lanes,
                       float *out) {
  const int64_t P = lanes / F, blocks = (G + P - 1) / P;
  std::fill(out, out + blocks * KH * KW * C * lanes, 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t c = 0; c < C; ++c)
            out[((((g / P) * KH + kh) * KW + kw) * C + c) * lanes + (g % P) * F + f] =
                w[(((g * F + f) * KH + kh) * KW + kw) * C + c];
}

ClampFn clampFor(int vectorBits) { return variantFor(vectorBits, &clamp512, &clamp256, &clamp128); }

ClampFn clamp() {
  static const ClampFn widest = clampFor(hostWidest());
  return widest;
}

GemmFn gemmFor(int vectorBits) { return variantFor(vectorBits, &gemm512, &gemm256, &gemm128); }

GemmFn gemm() {
  static const GemmFn widest = gemmFor(hostWidest());
  return widest;
}

UnaryFn unaryFor(VectorUnary op, int vectorBits) {
  switch (op) {
  case VectorUnary::kExp: return variantFor(vectorBits, &expF512, &expF256, &expF128);
  case VectorUnary::kSigmoid: return variantFor(vectorBits, &sigmoidF512, &sigmoidF256, &sigmoidF128);
  case VectorUnary::kErf: return variantFor(vectorBits, &erfF512, &erfF256, &erfF128);
  case VectorUnary::kTanh: return variantFor(vectorBits, &tanhF512, &tanhF256, &tanhF128);
  }
  return nullptr;
}

UnaryFn unary(VectorUnary op) {
  static const UnaryFn widest[] = {unaryFor(VectorUnary::kExp, hostWidest()),
                                   unaryFor(VectorUnary::kSigmoid, hostWidest()),
                                   unaryFor(VectorUnary::kErf, hostWidest()),
                                   unaryFor(VectorUnary::kTanh, hostWidest())};
  return widest[int(op)];
}

SumRowsFn sumRowsFor(int vectorBits) { return variantFor(vectorBits, &sumRows512, &sumRows256, &sumRows128); }

SumRowsFn sumRows() {
  static const SumRowsFn widest = sumRowsFor(hostWidest());
  return widest;
}

ReduceRowsFn reduceRowsFor(VectorReduce op, int vectorBits) {
  switch (op) {
  case VectorReduce::kSum: return variantFor(vectorBits, &reduceSumRows512, &reduceSumRows256, &reduceSumRows128);
  case VectorReduce::kMax: return variantFor(vectorBits, &reduceMaxRows512, &reduceMaxRows256, &reduceMaxRows128);
  case VectorReduce::kMin: return variantFor(vectorBits, &reduceMinRows512, &reduceMinRows256, &reduceMinRows128);
  }
  return nullptr;
}

ReduceRowsFn reduceRows(VectorReduce op) {
  static const ReduceRowsFn widest[] = {reduceRowsFor(VectorReduce::kSum, hostWidest()),
                                        reduceRowsFor(VectorReduce::kMax, hostWidest()),
                                        reduceRowsFor(VectorReduce::kMin, hostWidest())};
  return widest[int(op)];
}

ReduceColumnsFn reduceColumnsFor(VectorReduce op, int vectorBits) {
  switch (op) {
  case VectorReduce::kSum: return variantFor(vectorBits, &reduceSumColumns512, &reduceSumColumns256, &reduceSumColumns128);
  case VectorReduce::kMax: return variantFor(vectorBits, &reduceMaxColumns512, &reduceMaxColumns256, &reduceMaxColumns128);
  case VectorReduce::kMin: return variantFor(vectorBits, &reduceMinColumns512, &reduceMinColumns256, &reduceMinColumns128);
  }
  return nullptr;
}

ReduceColumnsFn reduceColumns(VectorReduce op) {
  static const ReduceColumnsFn widest[] = {reduceColumnsFor(VectorReduce::kSum, hostWidest()),
                                           reduceColumnsFor(VectorReduce::kMax, hostWidest()),
                                           reduceColumnsFor(VectorReduce::kMin, hostWidest())};
  return widest[int(op)];
}

}  // namespace kiln::kernels
