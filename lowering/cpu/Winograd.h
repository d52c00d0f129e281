// Winograd minimal filtering for 3x3 stride-1 convolutions, F(m x m, 3 x 3)
// with m = 2 or 4 (a = m + 2 input points per tile side; Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016):
//
//   Y (m x m tile) = A^T [ (G g G^T) .* (B^T d B) ] A
//
// g is a 3x3 filter, d an a x a input tile (tiles overlap by 2). The filter
// side U = G g G^T is computed once, when the weights are hoisted
// (HoistConstants), and stored [a, a, C, F]; the input and output sides run
// per call as vector code around one batched matmul over the a*a points
// (WinogradConv). F(4x4) does 36 multiplies per 16 outputs against 144 for
// the direct conv (4x fewer); F(2x2) 16 per 4 (2.25x fewer) with a smaller
// stored filter, for maps with fewer tiles. The matrices are the usual ones
// (points 0, +-1, +-2, inf for F(4,3); 0, +-1, inf for F(2,3)).
//
// Thread-safety: constants and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace kiln::lowering::winograd {

/// Transform matrices of F(m x m, 3 x 3), row-major doubles.
struct Matrices {
  int m = 0, a = 0;
  const double *bt = nullptr;  // a x a   (B^T)
  const double *g = nullptr;   // a x 3   (G)
  const double *at = nullptr;  // m x a   (A^T)
};

/// F(m, 3) for m = 2 or 4; {} otherwise.
Matrices matrices(int m);

/// The tile size kiln uses for a 3x3 stride-1 conv with a batch of n
/// OH x OW outputs (n <= 0: a dynamic batch, taken as 1): the largest m of
/// {4, 2} with at least kMinTiles tiles per image and at most 15% of each
/// tile wasted at the map's edges, or 0 (direct conv). Few tiles means
/// little reuse of the stored filter (a*a*C*F floats, streamed from memory
/// once per call): below ~32 tiles per image the transformed filter costs
/// more to read than the multiplies it saves (ResNet-50's 7x7 maps stay
/// direct at batch 1).
inline constexpr int64_t kMinTiles = 32;
/// F(2x2) also where the whole batch has at least kMinBatchTiles tiles and
/// at most 35% of them lies past the edges (odd maps: 7x7 31%, 9x9 23%).
/// Measured with cold weights (`kiln profile --serial`, a 256 MiB op
/// beside the conv, medians): 3x3 512->512 on 7x7 at batch 8 11.5-13.9 ->
/// 7.3-7.4 ms, at batch 4 (64 tiles) 5.2-6.1 -> 4.1-4.5; 256->256 on 9x9 at
/// batch 8 (200 tiles) 4.0 -> 3.3; but 256->256 on 7x7 at batch 4 and on
/// 9x9 at batch 2 (50 tiles) 8-19% slower, at batch 8 even.
inline constexpr int64_t kMinBatchTiles = 128;
int tileFor(int64_t n, int64_t oh, int64_t ow);

/// U = G g G^T for every (c, f): `fhwc` holds F x 3 x 3 x C floats, `u`
/// receives a x a x C x F (computed in double, stored as float).
void transformFilter(const float *fhwc, int64_t f, int64_t c, int m, float *u);

/// P (3 x a) with P G = I, row-major: g = P U P^T recovers the filter from
/// its transform (the fallback when the conv does not take the Winograd
/// form).
std::vector<double> filterInverse(int m);

}  // namespace kiln::lowering::winograd
