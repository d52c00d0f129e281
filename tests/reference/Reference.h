// Plain scalar C++ reference implementations, written for clarity, not
// speed, to check JIT-compiled (and later handwritten-kernel) results.
// Layouts follow TOSA: NHWC activations, OHWI conv weights, [N,H,C]x[N,C,W] matmul.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace kiln::ref {

using Vec = std::vector<float>;
using Dims = std::vector<int64_t>;

inline int64_t count(const Dims &d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

/// kiln.grouped_conv2d: input [N, H, W, G, C], filter [G, F, KH, KW, C]
/// (group g's F outputs read only its C inputs), output [N, OH, OW, G, F];
/// pad = {top, bottom, left, right}; `bias` none, one value, or G * F.
inline Vec groupedConv2d(const Vec &x, const Dims &xs, const Vec &w, const Dims &ws, const Vec &bias,
                         const int64_t pad[4], const int64_t stride[2], const int64_t dil[2], Dims &outShape) {
  int64_t N = xs[0], H = xs[1], W = xs[2], G = xs[3], C = xs[4];
  int64_t F = ws[1], KH = ws[2], KW = ws[3];
  int64_t OH = (H + pad[0] + pad[1] - (KH - 1) * dil[0] - 1) / stride[0] + 1;
  int64_t OW = (W + pad[2] + pad[3] - (KW - 1) * dil[1] - 1) / stride[1] + 1;
  outShape = {N, OH, OW, G, F};
  Vec y(size_t(N * OH * OW * G * F));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t f = 0; f < F; ++f) {
            double acc = bias.empty() ? 0.0 : bias[bias.size() == 1 ? 0 : g * F + f];
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
                int64_t iw = ow * stride[1] - pad[2] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                for (int64_t c = 0; c < C; ++c)
                  acc += double(x[(((n * H + ih) * W + iw) * G + g) * C + c]) *
                         w[(((g * F + f) * KH + kh) * KW + kw) * C + c];
              }
            y[(((n * OH + oh) * OW + ow) * G + g) * F + f] = float(acc);
          }
  return y;
}

/// Without a bias.
inline Vec groupedConv2d(const Vec &x, const Dims &xs, const Vec &w, const Dims &ws, const int64_t pad[4],
                         const int64_t stride[2], const int64_t dil[2], Dims &outShape) {
  return groupedConv2d(x, xs, w, ws, {}, pad, stride, dil, outShape);
}

/// NHWC conv with OHWI weights (one group of grouped_conv2d); pad = {top,
/// bottom, left, right}.
inline Vec conv2d(const Vec &x, const Dims &xs, const Vec &w, const Dims &ws, const Vec &bias,
                  const int64_t pad[4], const int64_t stride[2], const int64_t dil[2],
                  Dims &outShape) {
  Dims grouped;
  Vec y = groupedConv2d(x, {xs[0], xs[1], xs[2], 1, xs[3]}, w, {1, ws[0], ws[1], ws[2], ws[3]}, bias, pad, stride,
                        dil, grouped);
  outShape = {grouped[0], grouped[1], grouped[2], grouped[4]};
  return y;
}

/// NHWC depthwise conv with HWCM weights (TOSA); output channels C*M.
inline Vec depthwiseConv2d(const Vec &x, const Dims &xs, const Vec &w, const Dims &ws,
                           const Vec &bias, const int64_t pad[4], const int64_t stride[2],
                           const int64_t dil[2], Dims &outShape) {
  int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  int64_t KH = ws[0], KW = ws[1], M = ws[3];
  int64_t OH = (H + pad[0] + pad[1] - (KH - 1) * dil[0] - 1) / stride[0] + 1;
  int64_t OW = (W + pad[2] + pad[3] - (KW - 1) * dil[1] - 1) / stride[1] + 1;
  outShape = {N, OH, OW, C * M};
  Vec y(size_t(N * OH * OW * C * M));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t m = 0; m < M; ++m) {
            double acc = bias[c * M + m];
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
                int64_t iw = ow * stride[1] - pad[2] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(x[((n * H + ih) * W + iw) * C + c]) *
                       w[((kh * KW + kw) * C + c) * M + m];
              }
            y[((n * OH + oh) * OW + ow) * C * M + c * M + m] = float(acc);
          }
  return y;
}

/// [N,H,C] x [N,C,W] -> [N,H,W]
inline Vec matmul(const Vec &a, const Vec &b, int64_t N, int64_t H, int64_t C, int64_t W) {
  Vec y(size_t(N * H * W));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < C; ++k) acc += double(a[(n * H + i) * C + k]) * b[(n * C + k) * W + j];
        y[(n * H + i) * W + j] = float(acc);
      }
  return y;
}

/// NHWC pooling; pad = {top, bottom, left, right}. Average excludes padding (TOSA).
inline Vec pool2d(const Vec &x, const Dims &xs, const int64_t k[2], const int64_t s[2],
                  const int64_t pad[4], bool isMax, Dims &outShape) {
  int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  int64_t OH = (H + pad[0] + pad[1] - k[0]) / s[0] + 1;
  int64_t OW = (W + pad[2] + pad[3] - k[1]) / s[1] + 1;
  outShape = {N, OH, OW, C};
  Vec y(size_t(N * OH * OW * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t cnt = 0;
          for (int64_t kh = 0; kh < k[0]; ++kh)
            for (int64_t kw = 0; kw < k[1]; ++kw) {
              int64_t ih = oh * s[0] - pad[0] + kh, iw = ow * s[1] - pad[2] + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              double v = x[((n * H + ih) * W + iw) * C + c];
              acc = isMax ? std::max(acc, v) : acc + v;
              ++cnt;
            }
          y[((n * OH + oh) * OW + ow) * C + c] = float(isMax ? acc : acc / double(cnt));
        }
  return y;
}

inline Vec map(const Vec &x, const std::function<float(float)> &f) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

/// Row-wise softmax over the last dim of a [rows, cols] matrix.
inline Vec softmax(const Vec &x, int64_t rows, int64_t cols) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[r * cols + c]);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(x[r * cols + c]) - mx);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = float(std::exp(double(x[r * cols + c]) - mx) / sum);
  }
  return y;
}

}  // namespace kiln::ref
