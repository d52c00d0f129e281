//===- Winograd.cpp - F(m x m, 3 x 3) transform matrices -------------------===//
#include "lowering/cpu/Winograd.h"

#include <cmath>

namespace kiln::lowering::winograd {
namespace {

// F(2, 3): points 0, 1, -1, inf.
constexpr double kBT2[16] = {1, 0, -1, 0,  //
                             0, 1, 1, 0,   //
                             0, -1, 1, 0,  //
                             0, 1, 0, -1};
constexpr double kG2[12] = {1, 0, 0,           //
                            0.5, 0.5, 0.5,     //
                            0.5, -0.5, 0.5,    //
                            0, 0, 1};
constexpr double kAT2[8] = {1, 1, 1, 0,  //
                            0, 1, -1, -1};

// F(4, 3): points 0, 1, -1, 2, -2, inf.
constexpr double kBT4[36] = {4, 0, -5, 0, 1, 0,    //
                             0, -4, -4, 1, 1, 0,   //
                             0, 4, -4, -1, 1, 0,   //
                             0, -2, -1, 2, 1, 0,   //
                             0, 2, -1, -2, 1, 0,   //
                             0, 4, 0, -5, 0, 1};
constexpr double kG4[18] = {1.0 / 4, 0, 0,                   //
                            -1.0 / 6, -1.0 / 6, -1.0 / 6,    //
                            -1.0 / 6, 1.0 / 6, -1.0 / 6,     //
                            1.0 / 24, 1.0 / 12, 1.0 / 6,     //
                            1.0 / 24, -1.0 / 12, 1.0 / 6,    //
                            0, 0, 1};
constexpr double kAT4[24] = {1, 1, 1, 1, 1, 0,    //
                             0, 1, -1, 2, -2, 0,  //
                             0, 1, 1, 4, 4, 0,    //
                             0, 1, -1, 8, -8, 1};

}  // namespace

Matrices matrices(int m) {
  if (m == 2) return {2, 4, kBT2, kG2, kAT2};
  if (m == 4) return {4, 6, kBT4, kG4, kAT4};
  return {};
}

int tileFor(int64_t n, int64_t oh, int64_t ow) {
  for (int m : {4, 2}) {
    int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m;
    double waste = double(th * m * tw * m) / double(oh * ow);
    if (th * tw >= kMinTiles && waste <= 1.15) return m;
    if (m == 2 && n > 0 && n * th * tw >= kMinBatchTiles && waste <= 1.35) return m;
  }
  return 0;
}

void transformFilter(const float *fhwc, int64_t f, int64_t c, int m, float *u) {
  Matrices mx = matrices(m);
  const int a = mx.a;
  for (int64_t fi = 0; fi < f; ++fi)
    for (int64_t ci = 0; ci < c; ++ci) {
      double g[3][3], t[8][3];
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) g[kh][kw] = fhwc[((fi * 3 + kh) * 3 + kw) * c + ci];
      for (int x = 0; x < a; ++x)  // t = G g
        for (int kw = 0; kw < 3; ++kw)
          t[x][kw] = mx.g[x * 3] * g[0][kw] + mx.g[x * 3 + 1] * g[1][kw] + mx.g[x * 3 + 2] * g[2][kw];
      for (int x = 0; x < a; ++x)  // U = t G^T
        for (int y = 0; y < a; ++y)
          u[size_t(((x * a + y) * c + ci) * f + fi)] =
              float(t[x][0] * mx.g[y * 3] + t[x][1] * mx.g[y * 3 + 1] + t[x][2] * mx.g[y * 3 + 2]);
    }
}

std::vector<double> filterInverse(int m) {
  Matrices mx = matrices(m);
  const int a = mx.a;
  // P = (G^T G)^-1 G^T.
  double gtg[3][3] = {};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int x = 0; x < a; ++x) gtg[i][j] += mx.g[x * 3 + i] * mx.g[x * 3 + j];
  double det = gtg[0][0] * (gtg[1][1] * gtg[2][2] - gtg[1][2] * gtg[2][1]) -
               gtg[0][1] * (gtg[1][0] * gtg[2][2] - gtg[1][2] * gtg[2][0]) +
               gtg[0][2] * (gtg[1][0] * gtg[2][1] - gtg[1][1] * gtg[2][0]);
  double inv[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      // Cofactor of (j, i), divided by the determinant.
      int r0 = (j + 1) % 3, r1 = (j + 2) % 3, c0 = (i + 1) % 3, c1 = (i + 2) % 3;
      inv[i][j] = (gtg[r0][c0] * gtg[r1][c1] - gtg[r0][c1] * gtg[r1][c0]) / det;
    }
  std::vector<double> p(size_t(3 * a), 0.0);
  for (int i = 0; i < 3; ++i)
    for (int x = 0; x < a; ++x)
      for (int k = 0; k < 3; ++k) p[size_t(i * a + x)] += inv[i][k] * mx.g[x * 3 + k];
  return p;
}

}  // namespace kiln::lowering::winograd
