// The kernel loops built per vector width (kernels/VectorKernels.h): every
// variant the host can run matches a double-precision reference, at widths
// that leave remainders at every vector length and row counts that leave a
// remainder of the eight-row step.
#include "kernels/VectorKernels.h"

#include <gtest/gtest.h>

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
