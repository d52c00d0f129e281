// permute(): a row-major array with its dimensions permuted, shared by the
// load-time rewrites that fold transposes of constants (FoldConstants) and
// lay out weights (HoistConstants).
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::lowering {

/// permute() for elements of type T (a fixed-size copy each, where a
/// memcpy of a run-time size was a call per element: ResNet-50's filters
/// took 75 ms of a warm start), and runs of `run` contiguous elements where
/// the innermost dimensions stay innermost.
template <typename T>
inline void permuteAs(const char *inBytes, char *outBytes, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> perm) {
  const T *in = reinterpret_cast<const T *>(inBytes);
  T *out = reinterpret_cast<T *>(outBytes);
  size_t rank = shape.size();
  // Trailing dimensions that stay in place and in order form contiguous runs.
  size_t keep = rank;
  while (keep > 0 && perm[keep - 1] == int64_t(keep - 1)) --keep;
  int64_t run = 1;
  for (size_t d = keep; d < rank; ++d) run *= shape[d];
  std::vector<int64_t> inStride(rank, 1), outShape(keep), idx(keep, 0);
  for (size_t d = rank; d-- > 1;) inStride[d - 1] = inStride[d] * shape[d];
  int64_t total = 1;
  for (size_t i = 0; i < keep; ++i) total *= (outShape[i] = shape[perm[i]]);
  int64_t offset = 0;
  for (int64_t o = 0; o < total; ++o) {
    if (run == 1) out[o] = in[offset];
    else std::memcpy(out + o * run, in + offset, size_t(run) * sizeof(T));
    for (size_t d = keep; d-- > 0;) {
      offset += inStride[perm[d]];
      if (++idx[d] < outShape[d]) break;
      offset -= inStride[perm[d]] * outShape[d];
      idx[d] = 0;
    }
  }
}

/// `shape` and `perm` without their size-1 dimensions (which move no
/// element), renumbered: a 1x1 conv filter's [F, C, 1, 1] -> [F, 1, 1, C]
/// is [F, C] in place.
inline void dropUnitDims(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> perm,
                         llvm::SmallVectorImpl<int64_t> &outShape, llvm::SmallVectorImpl<int64_t> &outPerm) {
  llvm::SmallVector<int64_t> newIndex(shape.size(), -1);
  outShape.clear();
  outPerm.clear();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) {
      newIndex[d] = int64_t(outShape.size());
      outShape.push_back(shape[d]);
    }
  for (int64_t p : perm)
    if (shape[size_t(p)] != 1) outPerm.push_back(newIndex[size_t(p)]);
}

/// Whether permuting `shape` by `perm` leaves the elements where they are
/// (only size-1 dimensions move): a reshape, no copy needed.
inline bool permutationKeepsLayout(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t> s, p;
  dropUnitDims(shape, perm, s, p);
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

/// out = in with its dimensions permuted (out dim i = in dim perm[i]), for
/// row-major arrays of `bytes`-byte elements.
inline void permute(const char *in, char *out, llvm::ArrayRef<int64_t> shapeIn, llvm::ArrayRef<int64_t> permIn,
                    size_t bytes) {
  llvm::SmallVector<int64_t> shape, perm;
  dropUnitDims(shapeIn, permIn, shape, perm);
  switch (bytes) {
  case 1: return permuteAs<uint8_t>(in, out, shape, perm);
  case 2: return permuteAs<uint16_t>(in, out, shape, perm);
  case 4: return permuteAs<uint32_t>(in, out, shape, perm);
  case 8: return permuteAs<uint64_t>(in, out, shape, perm);
  default: break;
  }
  // Other sizes: the last dimension of `bytes`-byte elements as a run of chars.
  llvm::SmallVector<int64_t> byteShape(shape.begin(), shape.end()), bytePerm(perm.begin(), perm.end());
  byteShape.push_back(int64_t(bytes));
  bytePerm.push_back(int64_t(shape.size()));
  permuteAs<char>(in, out, byteShape, bytePerm);
}

}  // namespace kiln::lowering
