//===- VectorKernels.h - kernel loops compiled for each vector width -------===//
//
// The rest of kiln_kernels is built for the baseline x86-64 (SSE2) and
// leaves vectors to Eigen. Loops here are compiled once per vector width
// (AVX-512, AVX2 + FMA, baseline) and picked at run time from the host's
// features, so the kernel uses the widest vectors the host has; a narrower
// variant can be asked for (tests run every variant the host supports).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace kiln::kernels {

/// y[0, w) = sum over r < rows of a[r] * b[r * w, r * w + w): a run of a
/// matrix's rows (row-major, w floats each) weighted by a vector's elements,
/// the inner loop of a vector x matrix product. b and y must not overlap.
using SumRowsFn = void (*)(const float *a, const float *b, float *y, int64_t rows, int64_t w);

/// The variant for `vectorBits` (512, 256, or 128 for the baseline), or
/// null when the host cannot run it.
SumRowsFn sumRowsFor(int vectorBits);
/// The variant for the widest vectors the host has.
SumRowsFn sumRows();

/// y[i * ldy + j] = (accumulate ? y[i * ldy + j] : 0) + the dot product of
/// a[i * lda, + k) and b[j * ldb, + k) for i < m, j < n: A times B
/// transposed, both row-major along k (an im2col row block times a conv's
/// [F, KH*KW*C] filter; a matmul's rows times a transposed weight).
using DotProductsFn = void (*)(const float *a, int64_t lda, const float *b, int64_t ldb, float *y, int64_t ldy,
                               int64_t m, int64_t n, int64_t k, bool accumulate);
DotProductsFn dotProductsFor(int vectorBits);
DotProductsFn dotProducts();

/// One output row (image n, output row oh) of a depthwise conv with one
/// filter per channel, NHWC f32: y[ow][c] = bias[c] (or bias[0]) + the sum
/// over the window of x[ih][iw][c] * w[kh][kw][c]. `x` points at image n,
/// `y` at the row; positions outside the image are zero padding.
struct DepthwiseRow {
  const float *x, *w, *bias;
  float *y;
  bool biasScalar;
  int64_t H, W, C, KH, KW, OW, oh;
  int64_t sh, sw, pt, pl, dh, dw;
};
using DepthwiseRowFn = void (*)(const DepthwiseRow &row);
DepthwiseRowFn depthwiseRowFor(int vectorBits);
DepthwiseRowFn depthwiseRow();

/// y[i * ldy + j] = the sum over q < k of a[i * lda + q] * b[q * ldb + j],
/// for i < m and j < n rounded up to the width's vector length (16 floats
/// at most): A times a B packed [k, n] row-major with its columns padded
/// to a multiple of 16 (zeros), into a Y whose rows have that room too.
/// Register tiles of rows x up to four vectors of columns, each row's A element
/// broadcast against B's vectors (outer products: one FMA per load of A
/// and B's vectors reused by every row of the tile).
using GemmFn = void (*)(const float *a, int64_t lda, const float *b, int64_t ldb, float *y, int64_t ldy, int64_t m,
                        int64_t n, int64_t k);
GemmFn gemmFor(int vectorBits);
GemmFn gemm();

/// One output row (image n, row oh) of a grouped conv whose groups are
/// narrower than a vector (RegNet's and ResNeXt's 8 or 4 filters per
/// group): input x [H][W][G][C] (image n), y the row [OW][G][F], the filter
/// packed by packGroupedFilter. One vector holds P = lanes / F groups' F
/// filters each (lane p * F + f), so the FMAs run at full width where one
/// group per vector would fill half of it; the input a lane needs
/// (channel c of its group) comes from one load of the P groups' channels
/// and a permute, reused for every filter tap it meets along the row
/// (stride 1 and 2, 3-wide windows; other windows one permute per FMA).
/// Positions outside the image are zero padding.
struct GroupedRow {
  const float *x, *w;
  float *y;
  int64_t H, W, G, C, F, KH, KW, OW, oh;
  int64_t sh, sw, pt, pl, dh, dw;
  /// Only the vectors of groups [block0, block1) (P groups each); block1 0:
  /// to the last.
  int64_t block0 = 0, block1 = 0;
};
using GroupedRowFn = void (*)(const GroupedRow &row);
/// The variant for `vectorBits`, or null when the host cannot run it.
GroupedRowFn groupedRowFor(int vectorBits);
/// The widest vectors the host runs (512, 256 or 128 bits): the width the
/// kernels without a ...For(bits) choice use.
int hostVectorBits();
/// Lanes of `vectorBits` vectors whose groups a row of a grouped conv with
/// G groups of F filters and C channels can pack (lanes % F == 0, the
/// groups of a vector have at most a vector of channels, and a pixel's
/// G x C channels fill at least one); 0 when it cannot.
int64_t groupedRowLanes(int vectorBits, int64_t G, int64_t F, int64_t C);
/// filter [G][F][KH][KW][C] -> [ceil(G / P)][KH][KW][C][lanes] with
/// P = lanes / F (lane p * F + f: group gp * P + p, filter f; zeros past G).
void packGroupedFilter(const float *w, int64_t G, int64_t F, int64_t KH, int64_t KW, int64_t C, int64_t lanes,
                       float *out);

/// y[i] = f(x[i]) for i < n, f32, with a polynomial exp (Cephes' degree-6
/// minimax on [-ln2/2, ln2/2] after the split into 2^k: within 2 ulp of
/// libm's expf on [-87.3, 88.7], 0 below, +inf above; NaN stays NaN):
/// what the elementwise kernels run for tosa.exp and tosa.sigmoid
/// (1 / (1 + exp(-x))) instead of a libm call per element. x and y may be
/// the same array.
/// tosa.erf and tosa.tanh by the rational approximations XLA and Eigen use
/// for f32 (a few ulp).
enum class VectorUnary { kExp, kSigmoid, kErf, kTanh };
using UnaryFn = void (*)(const float *x, float *y, int64_t n);
UnaryFn unaryFor(VectorUnary op, int vectorBits);
UnaryFn unary(VectorUnary op);

/// y[i] = x[i] clamped to [lo, hi] for i < n, f32; NaN stays NaN (TOSA's
/// clamp). x and y may be the same array.
using ClampFn = void (*)(const float *x, float *y, int64_t n, float lo, float hi);
ClampFn clampFor(int vectorBits);
ClampFn clamp();

/// f32 reductions of tosa.reduce_sum / reduce_max / reduce_min: sums
/// accumulate in double (as the scalar kernel does), max and min propagate
/// NaN. Rows: y[r] = reduce over q < w of x[r * w + q], r < rows (the axis
/// innermost: LayerNorm's and softmax's). Columns: y[j] = reduce over
/// k < axis of x[k * stride + j], j < cols (an axis with elements after it).
enum class VectorReduce { kSum, kMax, kMin };
using ReduceRowsFn = void (*)(const float *x, float *y, int64_t rows, int64_t w);
using ReduceColumnsFn = void (*)(const float *x, int64_t stride, float *y, int64_t cols, int64_t axis);
ReduceRowsFn reduceRowsFor(VectorReduce op, int vectorBits);
ReduceRowsFn reduceRows(VectorReduce op);
ReduceColumnsFn reduceColumnsFor(VectorReduce op, int vectorBits);
ReduceColumnsFn reduceColumns(VectorReduce op);

}  // namespace kiln::kernels
