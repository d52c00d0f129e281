// The kernel loops built per vector width (kernels/VectorKernels.h): every
// variant the host can run matches a double-precision reference, at widths
// that leave remainders at every vector length and row counts that leave a
// remainder of the eight-row step.
#include "kernels/MatmulPanels.h"
#include "kernels/VectorKernels.h"
#include "tests/reference/Reference.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

namespace {

TEST(VectorKernels, SumRowsMatchesReferenceAtEveryWidth) {
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    kiln::kernels::SumRowsFn f = kiln::kernels::sumRowsFor(bits);
    if (!f) continue;  // the host has no such vectors
    ++ran;
    for (int64_t rows : {1, 7, 8, 13, 64}) {
      for (int64_t w : {1, 15, 16, 33, 1000}) {
        std::vector<float> a(static_cast<size_t>(rows)), b(static_cast<size_t>(rows * w)),
            y(static_cast<size_t>(w), 123.0f);
        for (int64_t r = 0; r < rows; ++r) a[r] = std::sin(0.37f * float(r + 1));
        for (int64_t i = 0; i < rows * w; ++i) b[i] = std::cos(0.011f * float(i));
        f(a.data(), b.data(), y.data(), rows, w);
        for (int64_t j = 0; j < w; ++j) {
          double want = 0;
          for (int64_t r = 0; r < rows; ++r) want += double(a[r]) * double(b[r * w + j]);
          ASSERT_NEAR(y[j], want, 1e-5 * (1 + std::abs(want)))
              << bits << " bits, " << rows << " rows x " << w << ", column " << j;
        }
      }
    }
  }
  EXPECT_GE(ran, 1);  // the baseline always runs
  EXPECT_EQ(kiln::kernels::sumRowsFor(100), nullptr);
}

// The conv kernel's packed filter ([F, patch] stored as [patch, F] rows ld
// floats apart, transposed in blocks): every element where it belongs for
// sizes that leave partial blocks of filters and of patch positions, and
// the padding columns of a wider ld untouched.
TEST(VectorKernels, PackConvFilterIsTheFiltersTranspose) {
  for (auto [F, patch, ld] : std::vector<std::array<int64_t, 3>>{
           {16, 64, 16}, {20, 70, 32}, {1, 3, 1}, {48, 4608, 48}, {33, 129, 40}}) {
    std::vector<float> w(size_t(F * patch)), out(size_t(patch * ld), -1.0f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i);
    kiln::kernels::packConvFilter(w.data(), F, patch, out.data(), ld);
    for (int64_t q = 0; q < patch; ++q)
      for (int64_t f = 0; f < ld; ++f)
        ASSERT_EQ(out[size_t(q * ld + f)], f < F ? w[size_t(f * patch + q)] : -1.0f)
            << F << " filters x " << patch << " (ld " << ld << "): position " << q << ", filter " << f;
  }
}

// Depthwise rows: channel counts below, at and past the 32-channel block
// (tails), strides, dilations, padding on every side, a scalar bias.
TEST(VectorKernels, DepthwiseRowMatchesReferenceAtEveryWidth) {
  struct Shape {
    int64_t h, w, c, k, s, d, pad;
    bool scalarBias;
  };
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    kiln::kernels::DepthwiseRowFn f = kiln::kernels::depthwiseRowFor(bits);
    if (!f) continue;
    ++ran;
    for (const Shape &g : std::vector<Shape>{{5, 6, 3, 3, 1, 1, 1, false},
                                             {7, 7, 32, 3, 2, 1, 1, false},
                                             {6, 9, 40, 3, 1, 2, 2, true},
                                             {8, 5, 69, 5, 2, 1, 2, false}}) {
      int64_t oh = (g.h + 2 * g.pad - (g.k - 1) * g.d - 1) / g.s + 1;
      int64_t ow = (g.w + 2 * g.pad - (g.k - 1) * g.d - 1) / g.s + 1;
      std::vector<float> x(size_t(g.h * g.w * g.c)), w(size_t(g.k * g.k * g.c)), bias(size_t(g.c)),
          y(size_t(oh * ow * g.c), 123.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i + 1));
      for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * float(i));
      for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * float(i);
      for (int64_t r = 0; r < oh; ++r)
        f(kiln::kernels::DepthwiseRow{x.data(), w.data(), bias.data(), y.data() + r * ow * g.c, g.scalarBias, g.h,
                                      g.w, g.c, g.k, g.k, ow, r, g.s, g.s, g.pad, g.pad, g.d, g.d});
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q)
          for (int64_t c = 0; c < g.c; ++c) {
            double want = g.scalarBias ? bias[0] : bias[size_t(c)];
            for (int64_t kh = 0; kh < g.k; ++kh)
              for (int64_t kw = 0; kw < g.k; ++kw) {
                int64_t ih = r * g.s - g.pad + kh * g.d, iw = q * g.s - g.pad + kw * g.d;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                want += double(x[size_t((ih * g.w + iw) * g.c + c)]) * double(w[size_t((kh * g.k + kw) * g.c + c)]);
              }
            ASSERT_NEAR(y[size_t((r * ow + q) * g.c + c)], want, 1e-5 * (1 + std::abs(want)))
                << bits << " bits, " << g.h << "x" << g.w << "x" << g.c << " k" << g.k << " s" << g.s << " d" << g.d
                << ", output (" << r << ", " << q << ", " << c << ")";
          }
    }
  }
  EXPECT_GE(ran, 1);
  EXPECT_EQ(kiln::kernels::depthwiseRowFor(100), nullptr);
}

// Grouped conv rows (several narrow groups per vector): RegNet's groups of
// 8 (a last block the groups do not fill, tiles of 14 and 7 columns and
// the rest, padding on every side), stride 2, groups of 4 and of 2 with
// fewer channels than filters, windows the permute reuse does not take
// (5 wide, dilation 2); the output's other bytes untouched.
TEST(VectorKernels, GroupedRowMatchesReferenceAtEveryWidth) {
  struct Shape {
    int64_t h, w, g, c, f, k, s, d, pad;
  };
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    kiln::kernels::GroupedRowFn fn = kiln::kernels::groupedRowFor(bits);
    if (!fn) continue;
    ++ran;
    int shapes = 0;
    for (const Shape &g : std::vector<Shape>{{6, 30, 13, 8, 8, 3, 1, 1, 1},
                                             {9, 31, 5, 8, 8, 3, 2, 1, 1},
                                             {7, 9, 8, 4, 4, 3, 1, 1, 1},
                                             {5, 17, 12, 1, 2, 3, 1, 1, 0},
                                             {8, 11, 6, 8, 8, 5, 1, 1, 2},
                                             {8, 12, 7, 4, 4, 3, 1, 2, 2}}) {
      const int64_t lanes = kiln::kernels::groupedRowLanes(bits, g.g, g.f, g.c);
      if (!lanes) continue;
      ++shapes;
      const int64_t oh = (g.h + 2 * g.pad - (g.k - 1) * g.d - 1) / g.s + 1;
      const int64_t ow = (g.w + 2 * g.pad - (g.k - 1) * g.d - 1) / g.s + 1;
      const int64_t P = lanes / g.f, guard = 16;
      std::vector<float> x(size_t(g.h * g.w * g.g * g.c)), w(size_t(g.g * g.f * g.k * g.k * g.c)),
          wp(size_t((g.g + P - 1) / P * g.k * g.k * g.c * lanes), -1.0f), y(size_t(oh * ow * g.g * g.f + guard), 123.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i + 1));
      for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * float(i));
      kiln::kernels::packGroupedFilter(w.data(), g.g, g.f, g.k, g.k, g.c, lanes, wp.data());
      for (int64_t r = 0; r < oh; ++r)
        fn(kiln::kernels::GroupedRow{x.data(), wp.data(), y.data() + r * ow * g.g * g.f, g.h, g.w, g.g, g.c, g.f, g.k,
                                     g.k, ow, r, g.s, g.s, g.pad, g.pad, g.d, g.d});
      const int64_t pads[4] = {g.pad, g.pad, g.pad, g.pad}, st[2] = {g.s, g.s}, dl[2] = {g.d, g.d};
      kiln::ref::Dims os;
      const kiln::ref::Vec want = kiln::ref::groupedConv2d(x, {1, g.h, g.w, g.g, g.c}, w, {g.g, g.f, g.k, g.k, g.c},
                                                           pads, st, dl, os);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5 * (1 + std::abs(want[i])))
            << bits << " bits, " << g.h << "x" << g.w << " " << g.g << " groups of " << g.c << " -> " << g.f << " k"
            << g.k << " s" << g.s << " d" << g.d << ", output element " << i << " of [" << oh << ", " << ow << ", "
            << g.g << ", " << g.f << "]";
      for (int64_t i = 0; i < guard; ++i) ASSERT_EQ(y[y.size() - 1 - size_t(i)], 123.0f) << "written past the output";
    }
    EXPECT_GE(shapes, 3) << bits << " bits";
  }
  EXPECT_GE(ran, 1);
  EXPECT_EQ(kiln::kernels::groupedRowFor(100), nullptr);
  // Groups it cannot pack: wider than a vector, more channels per vector
  // than it holds, fewer channels in all than one vector.
  EXPECT_EQ(kiln::kernels::groupedRowLanes(256, 4, 16, 16), 0);
  EXPECT_EQ(kiln::kernels::groupedRowLanes(512, 4, 8, 16), 0);
  EXPECT_EQ(kiln::kernels::groupedRowLanes(512, 1, 8, 8), 0);
  EXPECT_EQ(kiln::kernels::groupedRowLanes(512, 13, 8, 8), 16);
}

// Dot products: row and column counts around the 4 x 4 tiles, k around
// every vector length, accumulating into y and not.
TEST(VectorKernels, DotProductsMatchReferenceAtEveryWidth) {
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    kiln::kernels::DotProductsFn f = kiln::kernels::dotProductsFor(bits);
    if (!f) continue;
    ++ran;
    for (int64_t m : {1, 4, 7})
      for (int64_t n : {1, 4, 9})
        for (int64_t k : {1, 15, 16, 33, 147})
          for (bool accumulate : {false, true}) {
            int64_t lda = k + 3, ldb = k + 1, ldy = n + 2;
            std::vector<float> a(size_t(m * lda)), b(size_t(n * ldb)), y(size_t(m * ldy), 0.5f);
            for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * float(i + 1));
            for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.013f * float(i));
            f(a.data(), lda, b.data(), ldb, y.data(), ldy, m, n, k, accumulate);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < ldy; ++j) {
                double want = j < n ? (accumulate ? 0.5 : 0.0) : 0.5;  // columns past n untouched
                for (int64_t q = 0; j < n && q < k; ++q) want += double(a[size_t(i * lda + q)]) * double(b[size_t(j * ldb + q)]);
                ASSERT_NEAR(y[size_t(i * ldy + j)], want, 1e-5 * (1 + std::abs(want)))
                    << bits << " bits, m " << m << " n " << n << " k " << k << (accumulate ? " accumulating" : "")
                    << ", element (" << i << ", " << j << ")";
              }
          }
  }
  EXPECT_GE(ran, 1);
  EXPECT_EQ(kiln::kernels::dotProductsFor(100), nullptr);
}

TEST(VectorKernels, WidestIsOneTheHostRuns) {
  kiln::kernels::SumRowsFn widest = kiln::kernels::sumRows();
  ASSERT_NE(widest, nullptr);
  bool known = false;
  for (int bits : {512, 256, 128}) known |= kiln::kernels::sumRowsFor(bits) == widest;
  EXPECT_TRUE(known);
  if (kiln::kernels::sumRowsFor(512)) {
    EXPECT_EQ(widest, kiln::kernels::sumRowsFor(512));
  }
}

}  // namespace

namespace {

// exp and sigmoid against libm in double: within a few ulp over the whole
// range where exp is finite and normal, 0 / +inf / NaN at and past the
// ends, at lengths that leave every vector remainder; in place as well.
TEST(VectorKernels, ExpAndSigmoidMatchLibmAtEveryWidth) {
  using kiln::kernels::VectorUnary;
  int ran = 0;
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-8f, -1e-8f, 88.72f, 88.73f, -87.33f, -87.34f, -103.0f, 1000.0f, -1000.0f,
                  __builtin_inff(), -__builtin_inff(), __builtin_nanf("")})
    x.push_back(v);
  for (int bits : {512, 256, 128}) {
    for (VectorUnary op : {VectorUnary::kExp, VectorUnary::kSigmoid}) {
      kiln::kernels::UnaryFn f = kiln::kernels::unaryFor(op, bits);
      if (!f) continue;
      ++ran;
      for (size_t n : {x.size(), size_t(1), size_t(7), size_t(15), size_t(17)}) {
        std::vector<float> y(n, 7.0f);
        f(x.data(), y.data(), int64_t(n));
        for (size_t i = 0; i < n; ++i) {
          double v = x[i];
          double want = op == VectorUnary::kExp ? std::exp(v) : 1.0 / (1.0 + std::exp(-v));
          SCOPED_TRACE(testing::Message() << bits << " bits, op " << int(op) << ", x = " << x[i]);
          if (std::isnan(v)) {
            EXPECT_TRUE(std::isnan(y[i]));
          } else if (want > 3.40282346e38) {
            EXPECT_EQ(y[i], __builtin_inff());
          } else if (want < 1.2e-38) {  // below the normal range: 0 (or the denormal)
            EXPECT_LE(y[i], 1.2e-38f);
            EXPECT_GE(y[i], 0.0f);
          } else {
            EXPECT_NEAR(y[i], want, 4e-7 * want);
          }
        }
      }
      std::vector<float> inPlace(x);
      f(inPlace.data(), inPlace.data(), int64_t(inPlace.size()));
      std::vector<float> y(x.size());
      f(x.data(), y.data(), int64_t(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        if (!std::isnan(x[i])) {
          EXPECT_EQ(inPlace[i], y[i]);
        }
      }
    }
  }
  EXPECT_GE(ran, 2);  // the baseline always runs
  EXPECT_EQ(kiln::kernels::unaryFor(VectorUnary::kExp, 100), nullptr);
}

}  // namespace

namespace {

// The packed-B GEMM: shapes that leave row tails of every tile height (6,
// 4, 1 rows at AVX-512) and column blocks of 4, 2 and 1 vectors, and
// column tails of one vector and of less than one (padded), no k (zeros),
// short k and k of several blocks (whole and partial ones, at every width);
// every column the padding covers is written (zeros where B is zero).
TEST(VectorKernels, GemmMatchesReferenceAtEveryWidth) {
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    kiln::kernels::GemmFn f = kiln::kernels::gemmFor(bits);
    if (!f) continue;
    ++ran;
    for (int64_t m : {1, 3, 4, 8, 10, 13, 56}) {
      for (int64_t n : {1, 8, 16, 20, 32, 48, 64, 100}) {
        for (int64_t k : {0, 1, 7, 64, 300, 1000}) {
          int64_t np = (n + 15) / 16 * 16;
          std::vector<float> a(size_t(m * k)), b(size_t(k * np), 0.0f), y(size_t(m * np), 99.0f);
          for (int64_t i = 0; i < m * k; ++i) a[size_t(i)] = std::sin(0.13f * float(i + 1));
          for (int64_t q = 0; q < k; ++q)
            for (int64_t j = 0; j < n; ++j) b[size_t(q * np + j)] = std::cos(0.07f * float(q * n + j));
          f(a.data(), k, b.data(), np, y.data(), np, m, n, k);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int64_t q = 0; q < k; ++q) want += double(a[size_t(i * k + q)]) * double(b[size_t(q * np + j)]);
              ASSERT_NEAR(y[size_t(i * np + j)], want, 1e-4 * (1 + std::abs(want)))
                  << bits << " bits, " << m << "x" << n << "x" << k << " at " << i << "," << j;
            }
        }
      }
    }
  }
  EXPECT_GE(ran, 1);
  EXPECT_EQ(kiln::kernels::gemmFor(100), nullptr);
}

}  // namespace

namespace {

TEST(VectorKernels, ClampKeepsNaNAtEveryWidth) {
  int ran = 0;
  std::vector<float> x;
  for (int i = 0; i < 77; ++i) x.push_back(float(i - 38) * 0.25f);
  x[5] = __builtin_nanf("");
  x[40] = __builtin_inff();
  x[41] = -__builtin_inff();
  for (int bits : {512, 256, 128}) {
    kiln::kernels::ClampFn f = kiln::kernels::clampFor(bits);
    if (!f) continue;
    ++ran;
    std::vector<float> y(x.size());
    f(x.data(), y.data(), int64_t(x.size()), 0.0f, 6.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << bits;
      } else {
        EXPECT_EQ(y[i], std::min(std::max(x[i], 0.0f), 6.0f)) << bits << " at " << i;
      }
    }
  }
  EXPECT_GE(ran, 1);
}

}  // namespace

namespace {

// erf and tanh against libm: a few ulp (absolute near 0, where both are x),
// +-1 past the clamps, NaN kept.
TEST(VectorKernels, ErfAndTanhMatchLibmAtEveryWidth) {
  using kiln::kernels::VectorUnary;
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, 1e-6f, -1e-6f, 3e-4f, 5e-4f, 1e-3f, 3.99f, 4.0f, 4.01f, 7.9f, 8.0f, 100.0f, -100.0f,
                  __builtin_inff(), -__builtin_inff(), __builtin_nanf("")})
    x.push_back(v);
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    for (VectorUnary op : {VectorUnary::kErf, VectorUnary::kTanh}) {
      kiln::kernels::UnaryFn f = kiln::kernels::unaryFor(op, bits);
      if (!f) continue;
      ++ran;
      std::vector<float> y(x.size());
      f(x.data(), y.data(), int64_t(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        double v = x[i], want = op == VectorUnary::kErf ? std::erf(v) : std::tanh(v);
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(y[i])) << bits;
          continue;
        }
        EXPECT_NEAR(y[i], want, 4e-7 * std::abs(want) + 1e-8)
            << bits << " bits, " << (op == VectorUnary::kErf ? "erf" : "tanh") << "(" << x[i] << ")";
      }
    }
  }
  EXPECT_GE(ran, 2);
}

}  // namespace

namespace {

// Reductions over rows (the axis innermost) and columns (an axis with
// elements after it): widths below, at and past each unrolled step (4
// vectors of 16, 8, 4 floats), sums against a double reference, max and
// min exactly, and a NaN anywhere in a row or column makes its result NaN.
TEST(VectorKernels, ReductionsMatchReferenceAtEveryWidth) {
  using kiln::kernels::VectorReduce;
  int ran = 0;
  for (int bits : {512, 256, 128}) {
    for (VectorReduce op : {VectorReduce::kSum, VectorReduce::kMax, VectorReduce::kMin}) {
      kiln::kernels::ReduceRowsFn rowsFn = kiln::kernels::reduceRowsFor(op, bits);
      kiln::kernels::ReduceColumnsFn columnsFn = kiln::kernels::reduceColumnsFor(op, bits);
      if (!rowsFn || !columnsFn) continue;
      ++ran;
      auto reference = [&](auto at, int64_t n) {
        double acc = op == VectorReduce::kSum ? 0.0 : double(at(0));
        bool nan = false;
        for (int64_t i = 0; i < n; ++i) {
          double v = at(i);
          nan |= std::isnan(v);
          acc = op == VectorReduce::kSum ? acc + v : op == VectorReduce::kMax ? std::max(acc, v) : std::min(acc, v);
        }
        return nan ? double(__builtin_nanf("")) : acc;
      };
      auto check = [&](float got, double want, const char *what, int64_t n, int64_t i) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << bits << " bits, op " << int(op) << ", " << what << " " << n << " at " << i;
        } else if (op == VectorReduce::kSum) {
          EXPECT_NEAR(got, want, 1e-5 * (1 + std::abs(want))) << bits << " bits, " << what << " " << n << " at " << i;
        } else {
          EXPECT_EQ(got, float(want)) << bits << " bits, op " << int(op) << ", " << what << " " << n << " at " << i;
        }
      };
      for (int64_t w : {1, 3, 15, 16, 17, 63, 64, 65, 129, 300, 1000}) {
        const int64_t rows = 5;
        std::vector<float> x(size_t(rows * w));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i + 1)) * 3.0f;
        if (w > 2) x[size_t(2 * w + w / 2)] = __builtin_nanf("");  // row 2
        std::vector<float> y(size_t(rows), 99.0f);
        rowsFn(x.data(), y.data(), rows, w);
        for (int64_t r = 0; r < rows; ++r)
          check(y[size_t(r)], reference([&](int64_t q) { return x[size_t(r * w + q)]; }, w), "row of", w, r);
        // The same data as [w, rows x ...] columns: axis w, stride 'cols'.
        for (int64_t cols : {1, 5, 16, 37}) {
          std::vector<float> xc(size_t(w * cols));
          for (size_t i = 0; i < xc.size(); ++i) xc[i] = std::cos(0.29f * float(i + 1)) * 2.0f;
          if (w > 2) xc[size_t((w / 2) * cols + cols - 1)] = __builtin_nanf("");  // the last column
          std::vector<float> yc(size_t(cols), 99.0f);
          columnsFn(xc.data(), cols, yc.data(), cols, w);
          for (int64_t j = 0; j < cols; ++j)
            check(yc[size_t(j)], reference([&](int64_t k) { return xc[size_t(k * cols + j)]; }, w), "axis", w, j);
        }
      }
    }
  }
  EXPECT_GE(ran, 3);
}

}  // namespace
