// The Winograd matrices (lowering/cpu/Winograd.h) against the direct conv, in
// double: one tile of F(m x m, 3 x 3) equals the 3x3 correlation, the
// filter transform's inverse recovers the filter, and the tile choice keeps
// few-tile maps direct.
#include "lowering/cpu/Winograd.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln::lowering;

namespace {

double value(int i) { return std::sin(0.61 * i + 0.3); }

class WinogradTile : public ::testing::TestWithParam<int> {};

TEST_P(WinogradTile, OneTileEqualsTheDirectConv) {
  const int m = GetParam();
  winograd::Matrices mx = winograd::matrices(m);
  const int a = mx.a;
  ASSERT_EQ(a, m + 2);
  // One channel in, one out: filter g (3x3), tile d (a x a).
  float g[9];
  for (int i = 0; i < 9; ++i) g[i] = float(value(i));
  std::vector<float> u(a * a);  // [a, a, 1, 1]
  winograd::transformFilter(g, 1, 1, m, u.data());
  std::vector<double> d(a * a);
  for (int i = 0; i < a * a; ++i) d[i] = value(100 + i);
  // V = B^T d B, M = U .* V, Y = A^T M A.
  std::vector<double> t(a * a, 0), v(a * a, 0), s(m * a, 0);
  for (int k = 0; k < a; ++k)
    for (int j = 0; j < a; ++j)
      for (int i = 0; i < a; ++i) t[k * a + j] += mx.bt[k * a + i] * d[i * a + j];
  for (int k = 0; k < a; ++k)
    for (int l = 0; l < a; ++l)
      for (int j = 0; j < a; ++j) v[k * a + l] += t[k * a + j] * mx.bt[l * a + j];
  for (int i = 0; i < a * a; ++i) v[i] *= u[i];
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < a; ++l)
      for (int k = 0; k < a; ++k) s[i * a + l] += mx.at[i * a + k] * v[k * a + l];
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      double y = 0, want = 0;
      for (int l = 0; l < a; ++l) y += s[i * a + l] * mx.at[j * a + l];
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) want += double(g[kh * 3 + kw]) * d[(i + kh) * a + j + kw];
      EXPECT_NEAR(y, want, 1e-5) << "output (" << i << ", " << j << ") of F(" << m << ", 3)";
    }
}

TEST_P(WinogradTile, InverseRecoversTheFilter) {
  const int m = GetParam();
  const int a = winograd::matrices(m).a;
  const int64_t f = 2, c = 3;
  std::vector<float> g(f * 9 * c);
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(value(int(i)));
  std::vector<float> u(a * a * c * f);
  winograd::transformFilter(g.data(), f, c, m, u.data());
  std::vector<double> p = winograd::filterInverse(m);
  for (int64_t fi = 0; fi < f; ++fi)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw)
        for (int64_t ci = 0; ci < c; ++ci) {
          double back = 0;
          for (int x = 0; x < a; ++x)
            for (int y = 0; y < a; ++y) back += p[kh * a + x] * p[kw * a + y] * u[((x * a + y) * c + ci) * f + fi];
          EXPECT_NEAR(back, g[((fi * 3 + kh) * 3 + kw) * c + ci], 1e-5);
        }
}

INSTANTIATE_TEST_SUITE_P(F, WinogradTile, ::testing::Values(2, 4));

TEST(Winograd, TileChoice) {
  EXPECT_EQ(winograd::tileFor(1, 56, 56), 4);  // ResNet-50's stage 1: 196 tiles
  EXPECT_EQ(winograd::tileFor(1, 28, 28), 4);  // 49 tiles
  EXPECT_EQ(winograd::tileFor(1, 14, 14), 2);  // F(4x4) would cut 31% of its tiles away
  EXPECT_EQ(winograd::tileFor(1, 7, 7), 0);    // 16 tiles: the stored filter costs more than it saves
  EXPECT_EQ(winograd::tileFor(1, 30, 30), 4);  // 64 tiles, 14% of them past the edge
  // A batch's tiles together: F(2x2) on odd maps from 128 tiles on.
  EXPECT_EQ(winograd::tileFor(8, 7, 7), 2);   // 128 tiles, 31% past the edges
  EXPECT_EQ(winograd::tileFor(4, 7, 7), 0);   // 64
  EXPECT_EQ(winograd::tileFor(8, 9, 9), 2);   // 200, 23% past the edges
  EXPECT_EQ(winograd::tileFor(2, 9, 9), 0);   // 50
  EXPECT_EQ(winograd::tileFor(8, 5, 5), 0);   // 44% past the edges
  EXPECT_EQ(winograd::tileFor(8, 14, 14), 2); // not F(4x4): 31% of its tiles cut away
  EXPECT_EQ(winograd::tileFor(-1, 7, 7), 0);  // a dynamic batch counts as 1
  EXPECT_EQ(winograd::matrices(3).a, 0);
}

}  // namespace
