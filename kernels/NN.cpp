// Matmul, convolutions and pooling (NHWC activations, OHWI conv weights,
// HWCM depthwise weights, as TOSA defines them).
//  - f32 matmul and conv2d use Eigen's GEMM (conv2d through a per-row
//    im2col patch matrix); rows are split over the executor's workers.
//  - i8 matmul / conv2d accumulate in i32 (zero points 0).
#include "kernels/KernelUtil.h"
#include "kernels/MatmulPanels.h"
#include "kernels/VectorKernels.h"

#include <Eigen/Core>

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

namespace kiln::kernels {
namespace {
using namespace util;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

llvm::Error zeroPoints(const AttrMap &attrs, std::initializer_list<const char *> names, const char *op) {
  for (const char *n : names)
    if (attrs.getFloatOr(n, 0) != 0)
      return fail(llvm::Twine(op) + " kernel: only zero points of 0 (" + n + ")");
  return llvm::Error::success();
}

// --- matmul ---------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> matmulShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.matmul", in, 2)) return std::move(e);
  if (auto e = zeroPoints(attrs, {"a_zp", "b_zp"}, "tosa.matmul")) return std::move(e);
  const TensorType &a = in[0], &b = in[1];
  if (a.shape.size() != 3 || b.shape.size() != 3 || a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1])
    return fail("tosa.matmul: need [N,H,C] x [N,C,W], got " + a.str() + " x " + b.str());
  if (a.dtype != b.dtype || (a.dtype != DType::f32 && a.dtype != DType::i8))
    return fail("no tosa.matmul kernel for " + std::string(dtypeName(a.dtype)));
  DType out = a.dtype == DType::f32 ? DType::f32 : DType::i32;
  return std::vector<TensorType>{TensorType{out, {a.shape[0], a.shape[1], b.shape[2]}}};
}

/// y[n] = a[n] (1 x C) * b[n] (C x W), a vector times a matrix (a
/// classifier's weights, read once per call and usually from memory). Each
/// worker takes a run of b's rows, so that it reads one contiguous stretch
/// (rows of a block of columns would be short strided runs, which the
/// prefetchers follow far worse), into its own partial sum; the partials are
/// added at the end. A stretch is at least 256 KiB (less is not worth a
/// task), and there are at most four per worker, so that a worker that
/// starts late still gets an even share.
/// A run is summed by sumRows (VectorKernels.h: the host's widest vectors;
/// Eigen in this baseline build read cold weights at 11-13 GB/s).
void gemv(HostExecutor &ex, const float *a, const float *b, float *y, int64_t N, int64_t C, int64_t W) {
  using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  const SumRowsFn sum = sumRows();
  constexpr int64_t kMinBytes = 256 << 10;
  int64_t parts = std::clamp<int64_t>(C * W * int64_t(sizeof(float)) / kMinBytes, 1,
                                      std::min<int64_t>(4 * ex.numThreads(), C));
  std::vector<float> partial(size_t((parts - 1) * W));
  for (int64_t n = 0; n < N; ++n) {
    const float *an = a + n * C, *bn = b + n * C * W;
    float *yn = y + n * W;
    parallel(ex, parts, 1, [&](int64_t s, int64_t e) {
      for (int64_t p = s; p < e; ++p) {
        int64_t k0 = p * C / parts, k1 = (p + 1) * C / parts;
        sum(an + k0, bn + k0 * W, p == 0 ? yn : partial.data() + (p - 1) * W, k1 - k0, W);
      }
    });
    for (int64_t p = 1; p < parts; ++p)
      Eigen::Map<RowVec>(yn, W) += Eigen::Map<const RowVec>(partial.data() + (p - 1) * W, W);
  }
}

/// Copies columns j0 .. j0+cols of the C x W matrix b into the contiguous
/// C x cols panel out (the order gemmByColumnPanels' GEMM reads).
void copyPanel(const float *b, int64_t C, int64_t W, int64_t j0, int64_t cols, float *out) {
  for (int64_t q = 0; q < C; ++q) std::copy_n(b + q * W + j0, cols, out + q * cols);
}

/// y[n] = a[n] (H x C) * b[n] (C x W), W a multiple of 16, by the
/// outer-product GEMM built per vector width (gemm(); BERT's, GPT-2's and
/// ViT's matmuls, attention's batched ones). Work items are (batch, panel of
/// up to 64 columns): each worker copies its panel of B (C x 64, rows W
/// apart in B) into a contiguous buffer once and runs every row over it,
/// so B is read once per call, in order, and the panel stays in L2 while
/// A's row tiles pass. (Blocks of rows, each over all of B, read a
/// 768 x 3072 weight four times at S=128 and walked it a page per k step:
/// 80 GFLOP/s in a model against 210 alone.)
void gemmByColumnPanels(HostExecutor &ex, const float *a, const float *b, float *y, int64_t N, int64_t H, int64_t C,
                        int64_t W, bool packedB) {
  constexpr int64_t kPanel = kMatmulPanel;
  const GemmFn gemmFn = gemm();
  const int64_t panels = (W + kPanel - 1) / kPanel;
  parallel(ex, N * panels, 1, [&](int64_t s, int64_t e) {
    thread_local std::vector<float> packed;
    for (int64_t item = s; item < e; ++item) {
      int64_t n = item / panels, j0 = (item % panels) * kPanel, cols = std::min<int64_t>(kPanel, W - j0);
      if (packedB) {  // the plan stored B in panel order (packMatmulB)
        gemmFn(a + n * H * C, C, b + n * C * W + j0 * C, cols, y + n * H * W + j0, W, H, cols, C);
        continue;
      }
      packed.resize(size_t(C * cols));
      copyPanel(b + n * C * W, C, W, j0, cols, packed.data());
      gemmFn(a + n * H * C, C, packed.data(), cols, y + n * H * W + j0, W, H, cols, C);
    }
  });
}

llvm::Error matmulCompute(const KernelArgs &k) {
  int64_t N = k.inputTypes[0].shape[0], H = k.inputTypes[0].shape[1], C = k.inputTypes[0].shape[2];
  int64_t W = k.inputTypes[1].shape[2];
  if (k.inputTypes[0].dtype == DType::f32) {
    const float *a = static_cast<const float *>(k.inputs[0]), *b = static_cast<const float *>(k.inputs[1]);
    float *y = static_cast<float *>(k.outputs[0]);
    if (H == 1) {
      gemv(k.executor, a, b, y, N, C, W);
      return llvm::Error::success();
    }
    if (W % 16 == 0) {
      gemmByColumnPanels(k.executor, a, b, y, N, H, C, W, k.attrs.getIntOr(kMatmulPackedB, 0) != 0);
      return llvm::Error::success();
    }
    // Else Eigen's GEMM (built for baseline x86-64) on blocks of 32 rows.
    int64_t blocks = (H + 31) / 32;
    parallel(k.executor, N * blocks, 1, [&](int64_t s, int64_t e) {
      for (int64_t item = s; item < e; ++item) {
        int64_t n = item / blocks, r0 = (item % blocks) * 32, rows = std::min<int64_t>(32, H - r0);
        Eigen::Map<const RowMat> A(a + (n * H + r0) * C, rows, C);
        Eigen::Map<const RowMat> B(b + n * C * W, C, W);
        Eigen::Map<RowMat> Y(y + (n * H + r0) * W, rows, W);
        Y.noalias() = A * B;
      }
    });
    return llvm::Error::success();
  }
  const int8_t *a = static_cast<const int8_t *>(k.inputs[0]), *b = static_cast<const int8_t *>(k.inputs[1]);
  int32_t *y = static_cast<int32_t *>(k.outputs[0]);
  parallel(k.executor, N * H, 8, [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t n = r / H;
      for (int64_t j = 0; j < W; ++j) {
        int32_t acc = 0;
        for (int64_t c = 0; c < C; ++c) acc += int32_t(a[r * C + c]) * int32_t(b[(n * C + c) * W + j]);
        y[r * W + j] = acc;
      }
    }
  });
  return llvm::Error::success();
}

// --- conv2d ---------------------------------------------------------------------
/// Largest pad, kernel size, stride or dilation: with these bounded, window
/// and output-size arithmetic on real tensor sizes stays within int64.
constexpr int64_t kMaxWindow = int64_t(1) << 31;

struct ConvGeometry {
  int64_t N, H, W, C, F, KH, KW, OH, OW;
  int64_t pt, pb, pl, pr, sh, sw, dh, dw;
};

llvm::Expected<ConvGeometry> convGeometry(const char *op, llvm::ArrayRef<TensorType> in,
                                          const AttrMap &attrs, bool depthwise) {
  if (auto e = expectArity(op, in, 3)) return std::move(e);
  auto pad = attrs.getInts("pad");
  auto stride = attrs.getInts("stride");
  auto dil = attrs.getInts("dilation");
  if (!pad) return pad.takeError();
  if (!stride) return stride.takeError();
  if (!dil) return dil.takeError();
  const TensorType &x = in[0], &w = in[1];
  if (x.shape.size() != 4 || w.shape.size() != 4 || pad->size() != 4 || stride->size() != 2 || dil->size() != 2)
    return fail(llvm::Twine(op) + ": need 4-D input and weights, pad[4], stride[2], dilation[2]");
  ConvGeometry g;
  g.N = x.shape[0], g.H = x.shape[1], g.W = x.shape[2], g.C = x.shape[3];
  if (depthwise) {
    g.KH = w.shape[0], g.KW = w.shape[1], g.F = w.shape[2] * w.shape[3];
    if (w.shape[2] != g.C) return fail(llvm::Twine(op) + ": weight channels differ from input channels");
  } else {
    g.F = w.shape[0], g.KH = w.shape[1], g.KW = w.shape[2];
    if (w.shape[3] != g.C) return fail(llvm::Twine(op) + ": weight channels differ from input channels");
  }
  g.pt = (*pad)[0], g.pb = (*pad)[1], g.pl = (*pad)[2], g.pr = (*pad)[3];
  g.sh = (*stride)[0], g.sw = (*stride)[1], g.dh = (*dil)[0], g.dw = (*dil)[1];
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1) return fail(llvm::Twine(op) + ": stride and dilation must be >= 1");
  // Bounded, so that the output size below cannot overflow.
  for (int64_t v : {g.pt, g.pb, g.pl, g.pr})
    if (v < 0 || v > kMaxWindow) return fail(llvm::Twine(op) + ": pad " + llvm::Twine(v) + " out of [0, 2^31]");
  for (int64_t v : {g.sh, g.sw, g.dh, g.dw, g.KH, g.KW})
    if (v > kMaxWindow)
      return fail(llvm::Twine(op) + ": kernel size, stride or dilation " + llvm::Twine(v) + " is over 2^31");
  g.OH = (g.H + g.pt + g.pb - (g.KH - 1) * g.dh - 1) / g.sh + 1;
  g.OW = (g.W + g.pl + g.pr - (g.KW - 1) * g.dw - 1) / g.sw + 1;
  if (g.OH <= 0 || g.OW <= 0) return fail(llvm::Twine(op) + ": the output would be empty");
  if (in[2].numElements() != g.F && in[2].numElements() != 1)
    return fail(llvm::Twine(op) + ": bias has " + llvm::Twine(in[2].numElements()) + " values for " +
                llvm::Twine(g.F) + " output channels");
  return g;
}

llvm::Expected<std::vector<TensorType>> conv2dShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto g = convGeometry("tosa.conv2d", in, attrs, false);
  if (!g) return g.takeError();
  if (auto e = zeroPoints(attrs, {"input_zp", "weight_zp"}, "tosa.conv2d")) return std::move(e);
  DType t = in[0].dtype;
  if (t != in[1].dtype || (t != DType::f32 && t != DType::i8))
    return fail("no tosa.conv2d kernel for " + std::string(dtypeName(t)));
  DType out = t == DType::f32 ? DType::f32 : DType::i32;
  if (in[2].dtype != out) return fail("tosa.conv2d: bias must be " + std::string(dtypeName(out)));
  return std::vector<TensorType>{TensorType{out, {g->N, g->OH, g->OW, g->F}}};
}

/// The im2col row of output pixel (oh, ow): KH*KW runs of C channels,
/// zeros where the window leaves the image. `x` points at the image's
/// first channel to read, whose pixels lie `pixelStride` floats apart (C,
/// or a grouped conv's G*C with `x` at its group's channels).
void im2colPatch(const ConvGeometry &g, const float *x, int64_t pixelStride, int64_t oh, int64_t ow, float *p) {
  const int64_t iw0 = ow * g.sw - g.pl;
  // Taps next to each other in the image (dilation 1, the window's row
  // inside it, pixels C apart) are one run of KW * C floats: a stem's
  // 7x7 window over 3 channels is 7 copies, not 49 of 12 bytes.
  const bool rowRuns = g.dw == 1 && pixelStride == g.C && iw0 >= 0 && iw0 + g.KW <= g.W;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
    if (rowRuns && ih >= 0 && ih < g.H) {
      std::memcpy(p, x + (ih * g.W + iw0) * pixelStride, size_t(g.KW * g.C) * 4);
      p += g.KW * g.C;
      continue;
    }
    for (int64_t kw = 0; kw < g.KW; ++kw, p += g.C) {
      const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
      if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) std::fill(p, p + g.C, 0.0f);
      else std::memcpy(p, x + (ih * g.W + iw) * pixelStride, size_t(g.C) * 4);
    }
  }
}

/// Shortest patch (KH * KW * C) the f32 conv kernel computes as dot
/// products in the host's widest vectors (dotProducts); shorter ones (1x1
/// convs over few channels) spend more in the dot products' lane sums than
/// Eigen's baseline GEMM does in all (MobileNetV2's 16-32 channel 1x1 convs:
/// 38 GFLOP/s as dot products, 49 in Eigen; ResNet-50's convs 72 against 43).
constexpr int64_t kDotMinPatch = 64;
/// Fewest output pixels (N * OH * OW) for the packed-filter GEMM.
constexpr int64_t kPackedMinPixels = 128;

/// A tosa.clamp fused into a conv kernel (kFusedClampMin / kFusedClampMax),
/// applied in place to n floats as the kernel writes them, with the clamp
/// kernel's own vector code (so the same NaN handling); nothing without one.
struct FusedClamp {
  ClampFn fn = nullptr;
  float lo = 0, hi = 0;
  void operator()(float *y, int64_t n) const {
    if (fn) fn(y, y, n, lo, hi);
  }
};
FusedClamp fusedClamp(const AttrMap &attrs) {
  if (!attrs.has(kFusedClampMin) || !attrs.has(kFusedClampMax)) return {};
  return {clamp(), float(attrs.getFloatOr(kFusedClampMin, 0)), float(attrs.getFloatOr(kFusedClampMax, 0))};
}

llvm::Error conv2dCompute(const KernelArgs &k) {
  auto geometry = convGeometry("tosa.conv2d", k.inputTypes, k.attrs, false);
  if (!geometry) return geometry.takeError();
  const ConvGeometry &g = *geometry;
  int64_t patch = g.KH * g.KW * g.C;
  bool biasScalar = k.inputTypes[2].numElements() == 1;
  if (k.inputTypes[0].dtype == DType::f32) {
    const float *x = static_cast<const float *>(k.inputs[0]), *w = static_cast<const float *>(k.inputs[1]);
    const float *bias = static_cast<const float *>(k.inputs[2]);
    float *y = static_cast<float *>(k.outputs[0]);
    const FusedClamp clamp = fusedClamp(k.attrs);
    DotProductsFn dot = dotProducts();  // the host's widest vectors (this file's Eigen is baseline x86-64)
    // With enough output pixels, the filter is packed [patch, Fp] (columns
    // padded to 16) once per call and blocks of output rows (at least 64
    // pixels each, so that the register tiles fill) are outer-product GEMMs
    // (gemm()), which reach several times the dot products' rate and
    // Eigen's baseline GEMM's; the packing costs about 32 / pixels of the
    // conv, so the smallest maps (7x7) keep the dot products. Where the
    // plan stored the filter packed (kConvPackedFilter: a weight) nothing
    // is packed per call (15% of ResNet-50's all-kernel plan did that) and
    // every map takes the GEMM; a map of few row blocks splits F too, so
    // that every worker has some. The GEMM writes whole vectors: straight
    // into Y where F is a multiple of 16, else into a block of Fp-wide rows
    // first, then copied (RegNetY's 104 and 440 filters, whose kernel plan
    // had packed them on every call and run the 7x7 maps' 440 -> 440 as dot
    // products).
    const int64_t Fp = convPackedFilters(g.F);
    const bool prePacked = k.attrs.getIntOr(kConvPackedFilter, 0) != 0;
    const bool packed = prePacked || g.N * g.OH * g.OW >= kPackedMinPixels;
    const int64_t rowsPerBlock = packed ? std::max<int64_t>(1, (64 + g.OW - 1) / g.OW) : 1;
    const int64_t rows = g.N * g.OH, blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
    // Chunks of equal width (whole 64-column panels), enough for 4 items
    // in all: 3 blocks of 14x14 rows with F = 256 had taken chunks of 192
    // and 64 columns, one worker doing 448 of the 768 columns' work
    // (the 3x3 256 -> 256 on 14x14 1.49-1.88 -> 1.28 ms, the 1x1 1024 ->
    // 256 0.66 -> 0.54; ResNet-50's all-kernel plan 50-52 -> 48-49 ms a
    // call, alternating).
    int64_t chunkCols = g.F;
    if (prePacked && blocks < 4 && g.F >= 128) {
      const int64_t chunks = (4 + blocks - 1) / blocks;
      chunkCols = std::max<int64_t>(64, ((g.F + chunks - 1) / chunks + 63) / 64 * 64);
    }
    const int64_t colChunks = (g.F + chunkCols - 1) / chunkCols;
    // Rows of the block's GEMM output where it cannot go straight into Y.
    const bool viaBlock = packed && Fp != g.F;
    const int64_t ldBlock = convPackedFilters(chunkCols);
    std::vector<float> wpCopy;
    const float *wp = prePacked ? w : nullptr;
    GemmFn gemmFn = gemm();
    if (packed && !prePacked) {
      wpCopy.assign(size_t(patch * Fp), 0.0f);
      parallel(k.executor, g.F, 16, [&](int64_t f0, int64_t f1) {
        packConvFilter(w + f0 * patch, f1 - f0, patch, wpCopy.data() + f0, Fp);
      });
      wp = wpCopy.data();
    }
    // The patch matrix: the input itself where a 1x1 conv reads every
    // pixel (stride 1, no padding: its rows are the pixels); else, where
    // several workers share a block's rows (column chunks), the whole
    // map's, made once before the GEMMs (ResNet-50's layer-4 maps were
    // copied four times, once per chunk); else each block's own, made by
    // the worker that computes it.
    const bool direct = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pb == 0 &&
                        g.pl == 0 && g.pr == 0;
    // The patches of output rows r0 .. r1 ([N * OH] rows of OW pixels), from `out` on.
    auto patchRows = [&](int64_t r0, int64_t r1, float *out) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t n = r / g.OH, oh = r % g.OH;
        for (int64_t ow = 0; ow < g.OW; ++ow)
          im2colPatch(g, x + n * g.H * g.W * g.C, g.C, oh, ow, out + ((r - r0) * g.OW + ow) * patch);
      }
    };
    // (Not zeroed first: every element is written before it is read.)
    std::unique_ptr<float[]> shared;
    if (!direct && colChunks > 1) {
      shared.reset(new float[size_t(rows * g.OW * patch)]);
      parallel(k.executor, rows, 1,
               [&](int64_t r0, int64_t r1) { patchRows(r0, r1, shared.get() + r0 * g.OW * patch); });
    }
    parallel(k.executor, blocks * colChunks, 1, [&](int64_t s, int64_t e) {
      std::vector<float> yt(viaBlock ? size_t(rowsPerBlock * g.OW * ldBlock) : 0);
      // im2col of a block of output rows, when it is the worker's to make
      std::unique_ptr<float[]> own(direct || shared ? nullptr : new float[size_t(rowsPerBlock * g.OW * patch)]);
      for (int64_t item = s; item < e; ++item) {
        const int64_t blk = item / colChunks, c0 = (item % colChunks) * chunkCols;
        const int64_t c1 = std::min(g.F, c0 + chunkCols);
        const int64_t r0 = blk * rowsPerBlock, r1 = std::min(rows, r0 + rowsPerBlock), m = (r1 - r0) * g.OW;
        const float *A = direct ? x + r0 * g.OW * g.C : own ? own.get() : shared.get() + r0 * g.OW * patch;
        if (own) patchRows(r0, r1, own.get());
        // Consecutive output rows are consecutive in Y ([N, OH, OW, F]).
        Eigen::Map<RowMat> Y(y + r0 * g.OW * g.F, m, g.F);
        if (viaBlock) {
          // (Columns c0 .. c1 of the padded filter rows; past F, zeros.)
          gemmFn(A, patch, wp + c0, Fp, yt.data(), ldBlock, m, c1 - c0, patch);
          for (int64_t i = 0; i < m; ++i) std::memcpy(&Y(i, c0), yt.data() + i * ldBlock, size_t(c1 - c0) * 4);
        } else if (packed) {
          gemmFn(A, patch, wp + c0, Fp, Y.data() + c0, g.F, m, c1 - c0, patch);
        } else if (patch >= kDotMinPatch)
          dot(A, patch, w, patch, Y.data(), g.F, m, g.F, patch, /*accumulate=*/false);
        else Y.noalias() = Eigen::Map<const RowMat>(A, m, patch) * Eigen::Map<const RowMat>(w, g.F, patch).transpose();
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t f = c0; f < c1; ++f) Y(i, f) += bias[biasScalar ? 0 : f];
          clamp(&Y(i, c0), c1 - c0);
        }
      }
    });
    return llvm::Error::success();
  }
  const int8_t *x = static_cast<const int8_t *>(k.inputs[0]), *w = static_cast<const int8_t *>(k.inputs[1]);
  const int32_t *bias = static_cast<const int32_t *>(k.inputs[2]);
  int32_t *y = static_cast<int32_t *>(k.outputs[0]);
  parallel(k.executor, g.N * g.OH, 1, [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t n = r / g.OH, oh = r % g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow)
        for (int64_t f = 0; f < g.F; ++f) {
          int32_t acc = bias[biasScalar ? 0 : f];
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            int64_t ih = oh * g.sh - g.pt + kh * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              int64_t iw = ow * g.sw - g.pl + kw * g.dw;
              if (iw < 0 || iw >= g.W) continue;
              const int8_t *xp = x + ((n * g.H + ih) * g.W + iw) * g.C;
              const int8_t *wp = w + ((f * g.KH + kh) * g.KW + kw) * g.C;
              for (int64_t c = 0; c < g.C; ++c) acc += int32_t(xp[c]) * int32_t(wp[c]);
            }
          }
          y[(r * g.OW + ow) * g.F + f] = acc;
        }
    }
  });
  return llvm::Error::success();
}

// --- depthwise conv2d ---------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> depthwiseShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto g = convGeometry("tosa.depthwise_conv2d", in, attrs, true);
  if (!g) return g.takeError();
  if (auto e = zeroPoints(attrs, {"input_zp", "weight_zp"}, "tosa.depthwise_conv2d")) return std::move(e);
  if (in[0].dtype != DType::f32 || in[1].dtype != DType::f32 || in[2].dtype != DType::f32)
    return fail("no tosa.depthwise_conv2d kernel for " + std::string(dtypeName(in[0].dtype)));
  return std::vector<TensorType>{TensorType{DType::f32, {g->N, g->OH, g->OW, g->F}}};
}

llvm::Error depthwiseCompute(const KernelArgs &k) {
  auto geometry = convGeometry("tosa.depthwise_conv2d", k.inputTypes, k.attrs, true);
  if (!geometry) return geometry.takeError();
  const ConvGeometry &g = *geometry;
  int64_t M = k.inputTypes[1].shape[3];
  const float *x = static_cast<const float *>(k.inputs[0]), *w = static_cast<const float *>(k.inputs[1]);
  const float *bias = static_cast<const float *>(k.inputs[2]);
  bool biasScalar = k.inputTypes[2].numElements() == 1;
  float *y = static_cast<float *>(k.outputs[0]);
  const FusedClamp clamp = fusedClamp(k.attrs);
  if (M == 1) {  // one filter per channel (every TOSA export of a torch depthwise conv): vectors over channels
    DepthwiseRowFn row = depthwiseRow();
    parallel(k.executor, g.N * g.OH, 1, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        row(DepthwiseRow{x + (r / g.OH) * g.H * g.W * g.C, w, bias, y + r * g.OW * g.F, biasScalar, g.H, g.W, g.C,
                         g.KH, g.KW, g.OW, r % g.OH, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw});
        clamp(y + r * g.OW * g.F, g.OW * g.F);  // the row, still in cache
      }
    });
    return llvm::Error::success();
  }
  parallel(k.executor, g.N * g.OH, 1, [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t n = r / g.OH, oh = r % g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float *out = y + (r * g.OW + ow) * g.F;
        for (int64_t f = 0; f < g.F; ++f) out[f] = bias[biasScalar ? 0 : f];
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          int64_t ih = oh * g.sh - g.pt + kh * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            int64_t iw = ow * g.sw - g.pl + kw * g.dw;
            if (iw < 0 || iw >= g.W) continue;
            const float *xp = x + ((n * g.H + ih) * g.W + iw) * g.C;
            const float *wp = w + (kh * g.KW + kw) * g.C * M;
            for (int64_t c = 0; c < g.C; ++c)
              for (int64_t m = 0; m < M; ++m) out[c * M + m] += xp[c] * wp[c * M + m];
          }
        }
        clamp(out, g.F);
      }
    }
  });
  return llvm::Error::success();
}

// --- grouped conv2d (tosa.custom kiln.grouped_conv2d) ---------------------------
// ResNeXt's and RegNet's grouped convs have no TOSA form; kiln-raise-linalg
// makes them this custom op: input [N, H, W, G, C], filter [G, F, KH, KW, C],
// result [N, OH, OW, G, F] (group g's F outputs read only its C inputs), with
// attributes stride[2] and dilation[2] (ones when absent) and pad[4] (top,
// bottom, left, right; zeros when absent).
struct GroupedGeometry {
  ConvGeometry conv;  // per group: C inputs, F outputs
  int64_t G;
};

llvm::Expected<GroupedGeometry> groupedGeometry(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  constexpr const char *op = "kiln.grouped_conv2d";
  if (auto e = expectArity(op, in, 2)) return std::move(e);
  const TensorType &x = in[0], &w = in[1];
  if (x.dtype != DType::f32 || w.dtype != DType::f32)
    return fail(llvm::Twine("no ") + op + " kernel for " + std::string(dtypeName(x.dtype)) + " x " +
                std::string(dtypeName(w.dtype)));
  if (x.shape.size() != 5 || w.shape.size() != 5)
    return fail(llvm::Twine(op) + ": need input [N, H, W, G, C] and filter [G, F, KH, KW, C], got " + x.str() +
                " and " + w.str());
  if (w.shape[0] != x.shape[3] || w.shape[4] != x.shape[4])
    return fail(llvm::Twine(op) + ": filter " + w.str() + " does not match input " + x.str() +
                " (groups and channels per group)");
  AttrMap conv;
  for (auto [name, absent] : {std::pair<const char *, std::vector<int64_t>>{"pad", {0, 0, 0, 0}},
                              {"stride", {1, 1}}, {"dilation", {1, 1}}}) {
    if (!attrs.has(name)) {
      conv.set(name, absent);
      continue;
    }
    auto v = attrs.getInts(name);
    if (!v) return v.takeError();
    conv.set(name, *v);
  }
  // One group's conv: [N, H, W, C] x [F, KH, KW, C] (a zero-size bias view).
  TensorType x4{DType::f32, {x.shape[0], x.shape[1], x.shape[2], x.shape[4]}};
  TensorType w4{DType::f32, {w.shape[1], w.shape[2], w.shape[3], w.shape[4]}};
  TensorType bias{DType::f32, {w.shape[1]}};
  auto g = convGeometry(op, {x4, w4, bias}, conv, false);
  if (!g) return g.takeError();
  return GroupedGeometry{*g, x.shape[3]};
}

llvm::Expected<std::vector<TensorType>> groupedConvShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  auto g = groupedGeometry(in, attrs);
  if (!g) return g.takeError();
  const ConvGeometry &c = g->conv;
  return std::vector<TensorType>{TensorType{DType::f32, {c.N, c.OH, c.OW, g->G, c.F}}};
}

/// Per output row (image n, row oh) and group: the group's im2col patches of
/// the row [OW, KH*KW*C] times its filter, packed once per call [KH*KW*C, F]
/// (columns padded to 16), by the outer-product GEMM in the host's widest
/// vectors (gemm(): 3x the dot products' rate on RegNet's 8-wide groups),
/// into a row of F (padded) outputs copied to the group's columns of the
/// row's [OW, G, F].
llvm::Error groupedConvCompute(const KernelArgs &k) {
  auto geometry = groupedGeometry(k.inputTypes, k.attrs);
  if (!geometry) return geometry.takeError();
  const ConvGeometry &g = geometry->conv;
  const int64_t G = geometry->G, patch = g.KH * g.KW * g.C, xs = G * g.C, ys = G * g.F;
  const float *x = static_cast<const float *>(k.inputs[0]), *w = static_cast<const float *>(k.inputs[1]);
  float *y = static_cast<float *>(k.outputs[0]);
  if (const Shape packedShape = groupedConvPackedShape(k.inputTypes[1]); !packedShape.empty()) {
    // Groups narrower than a vector: several groups per vector, straight
    // from the input (no patches), rows in parallel; the filter packed
    // once by the plan (kGroupedPackedFilter) or here per call, in the
    // shape groupedConvPackedShape gives both.
    const int64_t blocks = packedShape[0], lanes = packedShape[4];
    std::vector<float> packed;
    const float *wp = w;
    if (k.attrs.getIntOr(kGroupedPackedFilter, 0) == 0) {
      packed.resize(size_t(blocks * patch * lanes));
      packGroupedFilter(w, G, g.F, g.KH, g.KW, g.C, lanes, packed.data());
      wp = packed.data();
    }
    GroupedRowFn row = groupedRowFor(hostVectorBits());
    // Rows in parallel; a map of few rows (RegNet's last stage: 7) split
    // into runs of group vectors too, so that every thread gets a share.
    const int64_t rows = g.N * g.OH;
    const int64_t parts = std::min(blocks, std::max<int64_t>(1, (32 + rows - 1) / rows));
    parallel(k.executor, rows * parts, 1, [&](int64_t s, int64_t e) {
      for (int64_t t = s; t < e; ++t) {
        const int64_t r = t / parts, part = t % parts, n = r / g.OH;
        GroupedRow a{x + n * g.H * g.W * xs, wp, y + r * g.OW * ys, g.H, g.W, G, g.C, g.F, g.KH, g.KW, g.OW,
                     r % g.OH, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw};
        a.block0 = blocks * part / parts;
        a.block1 = blocks * (part + 1) / parts;
        row(a);
      }
    });
    return llvm::Error::success();
  }
  const int64_t Fp = (g.F + 15) / 16 * 16;
  std::vector<float> wp(size_t(G * patch * Fp), 0.0f);
  parallel(k.executor, G, 4, [&](int64_t g0, int64_t g1) {
    for (int64_t grp = g0; grp < g1; ++grp)
      packConvFilter(w + grp * g.F * patch, g.F, patch, wp.data() + grp * patch * Fp, Fp);
  });
  GemmFn gemmFn = gemm();
  parallel(k.executor, g.N * g.OH, 1, [&](int64_t s, int64_t e) {
    std::vector<float> P(size_t(g.OW * patch)), out(size_t(g.OW * Fp));
    for (int64_t r = s; r < e; ++r) {
      const int64_t n = r / g.OH, oh = r % g.OH;
      float *yr = y + r * g.OW * ys;
      for (int64_t grp = 0; grp < G; ++grp) {
        for (int64_t ow = 0; ow < g.OW; ++ow)
          im2colPatch(g, x + n * g.H * g.W * xs + grp * g.C, xs, oh, ow, P.data() + ow * patch);
        gemmFn(P.data(), patch, wp.data() + grp * patch * Fp, Fp, out.data(), Fp, g.OW, g.F, patch);
        for (int64_t ow = 0; ow < g.OW; ++ow)
          std::memcpy(yr + ow * ys + grp * g.F, out.data() + ow * Fp, size_t(g.F) * 4);
      }
    }
  });
  return llvm::Error::success();
}

// --- pooling ----------------------------------------------------------------------
template <bool IsMax>
llvm::Expected<std::vector<TensorType>> poolShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const char *op = IsMax ? "tosa.max_pool2d" : "tosa.avg_pool2d";
  if (auto e = expectArity(op, in, 1)) return std::move(e);
  if (!IsMax)
    if (auto e = zeroPoints(attrs, {"input_zp", "output_zp"}, op)) return std::move(e);
  if (IsMax)
    if (auto e = propagatesNaN(attrs, op)) return std::move(e);
  auto kernel = attrs.getInts("kernel");
  auto stride = attrs.getInts("stride");
  auto pad = attrs.getInts("pad");
  if (!kernel) return kernel.takeError();
  if (!stride) return stride.takeError();
  if (!pad) return pad.takeError();
  if (in[0].shape.size() != 4 || in[0].dtype != DType::f32)
    return fail(llvm::Twine("no ") + op + " kernel for tensor<" + in[0].str() + ">");
  if (kernel->size() != 2 || stride->size() != 2 || pad->size() != 4)
    return fail(llvm::Twine(op) + ": need kernel[2], stride[2] and pad[4]");
  for (int i = 0; i < 2; ++i)
    if ((*kernel)[i] < 1 || (*stride)[i] < 1 || (*kernel)[i] > kMaxWindow || (*stride)[i] > kMaxWindow)
      return fail(llvm::Twine(op) + ": kernel and stride must be in [1, 2^31]");
  for (int i = 0; i < 4; ++i)
    if ((*pad)[i] < 0 || (*pad)[i] >= (*kernel)[i / 2])
      return fail(llvm::Twine(op) + ": pad must be >= 0 and smaller than the kernel");
  int64_t OH = (in[0].shape[1] + (*pad)[0] + (*pad)[1] - (*kernel)[0]) / (*stride)[0] + 1;
  int64_t OW = (in[0].shape[2] + (*pad)[2] + (*pad)[3] - (*kernel)[1]) / (*stride)[1] + 1;
  if (OH <= 0 || OW <= 0) return fail(llvm::Twine(op) + ": the output would be empty");
  return std::vector<TensorType>{TensorType{DType::f32, {in[0].shape[0], OH, OW, in[0].shape[3]}}};
}

template <bool IsMax> llvm::Error poolCompute(const KernelArgs &a) {
  auto kernel = *a.attrs.getInts("kernel");
  auto stride = *a.attrs.getInts("stride");
  auto pad = *a.attrs.getInts("pad");
  const TensorType &t = a.inputTypes[0], &o = a.outputTypes[0];
  int64_t H = t.shape[1], W = t.shape[2], C = t.shape[3], OH = o.shape[1], OW = o.shape[2];
  const float *x = static_cast<const float *>(a.inputs[0]);
  float *y = static_cast<float *>(a.outputs[0]);
  parallel(a.executor, o.shape[0] * OH, 1, [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t n = r / OH, oh = r % OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        float *out = y + (r * OW + ow) * C;
        for (int64_t c = 0; c < C; ++c) out[c] = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
        int64_t count = 0;
        for (int64_t kh = 0; kh < kernel[0]; ++kh) {
          int64_t ih = oh * stride[0] - pad[0] + kh;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < kernel[1]; ++kw) {
            int64_t iw = ow * stride[1] - pad[2] + kw;
            if (iw < 0 || iw >= W) continue;
            ++count;
            const float *xp = x + ((n * H + ih) * W + iw) * C;
            for (int64_t c = 0; c < C; ++c) out[c] = IsMax ? maxPropagatingNaN(out[c], xp[c]) : out[c] + xp[c];
          }
        }
        if (!IsMax)  // TOSA averages over the elements inside the input (padding excluded)
          for (int64_t c = 0; c < C; ++c) out[c] /= float(std::max<int64_t>(count, 1));
      }
    }
  });
  return llvm::Error::success();
}

}  // namespace

bool matmulReadsPanels(llvm::ArrayRef<TensorType> in) {
  return in.size() == 2 && in[0].dtype == DType::f32 && in[1].dtype == DType::f32 && in[0].shape.size() == 3 &&
         in[1].shape.size() == 3 && in[0].shape[1] > 1 && in[1].shape[2] % 16 == 0;
}

void packMatmulB(const float *b, int64_t N, int64_t C, int64_t W, float *out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j0 = 0; j0 < W; j0 += kMatmulPanel)
      copyPanel(b + n * C * W, C, W, j0, std::min<int64_t>(kMatmulPanel, W - j0), out + n * C * W + j0 * C);
}

Shape groupedConvPackedShape(const TensorType &w) {
  if (w.dtype != DType::f32 || w.shape.size() != 5) return {};
  const int64_t G = w.shape[0], F = w.shape[1], C = w.shape[4];
  const int64_t lanes = groupedRowLanes(hostVectorBits(), G, F, C);
  if (!lanes) return {};
  const int64_t P = lanes / F;
  return {(G + P - 1) / P, w.shape[2], w.shape[3], C, lanes};
}

bool conv2dReadsPackedFilter(llvm::ArrayRef<TensorType> in) {
  return in.size() == 3 && in[0].dtype == DType::f32 && in[1].dtype == DType::f32 && in[1].shape.size() == 4;
}

void packConvFilter(const float *w, int64_t F, int64_t patch, float *out, int64_t ld) {
  // A transpose in blocks of 16 filters x 64 patch positions: each output
  // row's 16 floats are one cache line written whole, each filter's 64 one
  // run read in order. (Filter by filter, every write landed on a line of
  // its own, ld floats from the last: ResNet-50's 100 MB of filters took
  // ~0.1 s of its kernel plan's first call.)
  constexpr int64_t kBlockF = 16, kBlockQ = 64;
  for (int64_t f0 = 0; f0 < F; f0 += kBlockF) {
    int64_t f1 = std::min(F, f0 + kBlockF);
    for (int64_t q0 = 0; q0 < patch; q0 += kBlockQ) {
      int64_t q1 = std::min(patch, q0 + kBlockQ);
      for (int64_t q = q0; q < q1; ++q)
        for (int64_t f = f0; f < f1; ++f) out[q * ld + f] = w[f * patch + q];
    }
  }
}

void registerNNKernels(KernelRegistry &r) {
  llvm::cantFail(r.add({"tosa.matmul", "eigen", &matmulShape, &matmulCompute}));
  llvm::cantFail(r.add({"tosa.conv2d", "im2col_eigen", &conv2dShape, &conv2dCompute}));
  llvm::cantFail(r.add({"tosa.depthwise_conv2d", "cpu", &depthwiseShape, &depthwiseCompute}));
  llvm::cantFail(r.add({"tosa.custom:kiln.grouped_conv2d", "cpu", &groupedConvShape, &groupedConvCompute}));
  llvm::cantFail(r.add({"tosa.max_pool2d", "cpu", &poolShape<true>, &poolCompute<true>}));
  llvm::cantFail(r.add({"tosa.avg_pool2d", "cpu", &poolShape<false>, &poolCompute<false>}));
}

}  // namespace kiln::kernels
