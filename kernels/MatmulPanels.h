// Weights in the order the f32 GEMM kernels read them.
// tosa.matmul's f32 GEMM reads B ([N, C, W]) in column panels of up to
// kMatmulPanel columns, each copied into a contiguous C x cols block per
// call. Where B is a weight, a plan stores it in that panel order once
// (packMatmulB) and marks the step with kMatmulPackedB: the kernel reads the
// panels in place, and calls no longer copy B (BERT's 340 MB of matmul
// weights per call, which made short sequences weight-copy-bound).
#pragma once

#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace kiln::kernels {

constexpr int64_t kMatmulPanel = 64;
/// Step attribute (integer 1): input 1 is in packMatmulB's order.
constexpr const char *kMatmulPackedB = "kiln.packed_b";

/// Whether tosa.matmul on these inputs ([N,H,C] x [N,C,W]) runs the panel
/// GEMM, and so can read a packed B: f32, H > 1, W a multiple of 16.
bool matmulReadsPanels(llvm::ArrayRef<TensorType> inputs);

/// B ([N, C, W], row-major) in panel order: for each batch n, for each panel
/// of columns j0 .. j0+cols (cols = min(kMatmulPanel, W - j0)), the C x cols
/// block row-major, at n*C*W + j0*C. As many elements as B.
void packMatmulB(const float *b, int64_t N, int64_t C, int64_t W, float *out);

/// tosa.conv2d's f32 kernel reads its filter ([F, KH, KW, C]) as a GEMM's B,
/// [KH*KW*C, Fp] row-major with Fp = convPackedFilters(F) (rows padded with
/// zero columns to whole 16-float vectors), packed per call. Where the
/// filter is a weight, a plan stores it in that order once (packConvFilter,
/// the padding zeroed) and marks the step with kConvPackedFilter (integer 1).
constexpr const char *kConvPackedFilter = "kiln.packed_filter";
bool conv2dReadsPackedFilter(llvm::ArrayRef<TensorType> inputs);
/// The packed filter's row length in floats (F rounded up to 16).
inline int64_t convPackedFilters(int64_t F) { return (F + 15) / 16 * 16; }
/// out[q * ld + f] = w[f * patch + q]: the [F, patch] filter as [patch, F]
/// rows `ld` floats apart (ld >= F; the padding columns are not written).
void packConvFilter(const float *w, int64_t F, int64_t patch, float *out, int64_t ld);
inline void packConvFilter(const float *w, int64_t F, int64_t patch, float *out) {
  packConvFilter(w, F, patch, out, F);
}

/// kiln.grouped_conv2d's f32 kernel reads its filter ([G, F, KH, KW, C]) as
/// vectors of several groups' filters (packGroupedFilter at the host's
/// widest vectors) where its groups are narrower than a vector: the
/// packed filter's shape [ceil(G / P), KH, KW, C, lanes], or empty where
/// the kernel reads the filter as it is. A plan stores a weight filter in
/// that order once and marks the step with kGroupedPackedFilter
/// (integer 1).
constexpr const char *kGroupedPackedFilter = "kiln.packed_grouped_filter";
Shape groupedConvPackedShape(const TensorType &filter);

}  // namespace kiln::kernels
