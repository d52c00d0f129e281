// Data movement: transpose, reshape, slice, pad, concat, reverse, tile, gather.
// Element-size generic (bytes are moved, any dtype); innermost contiguous
// runs are copied with memcpy.
#include "kernels/KernelUtil.h"

#include <algorithm>

namespace kiln::kernels {
namespace {
using namespace util;

/// Calls f(outIndex, multiIndex) for every element of `shape` in [b, e).
template <typename F> void forEachIndex(llvm::ArrayRef<int64_t> shape, int64_t b, int64_t e, F &&f) {
  if (b >= e) return;  // nothing to visit (and an empty shape has a 0 to divide by)
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t rem = b;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
  }
  for (int64_t i = b; i < e; ++i) {
    f(i, idx);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// --- transpose ----------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> transposeShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.transpose", in, 1)) return std::move(e);
  auto perms = attrs.getInts("perms");
  if (!perms) return perms.takeError();
  if (perms->size() != in[0].shape.size()) return fail("tosa.transpose: perms has the wrong rank");
  TensorType out = in[0];
  std::vector<bool> seen(perms->size());
  for (size_t d = 0; d < perms->size(); ++d) {
    int64_t p = (*perms)[d];
    if (p < 0 || p >= int64_t(perms->size()) || seen[p]) return fail("tosa.transpose: perms is not a permutation");
    seen[p] = true;
    out.shape[d] = in[0].shape[p];
  }
  return std::vector<TensorType>{out};
}
/// One strided run of a transpose: y[j] = x[j * stride], typed.
template <typename T> void stridedRun(const char *x, char *y, int64_t n, int64_t stride) {
  const T *xs = reinterpret_cast<const T *>(x);
  T *ys = reinterpret_cast<T *>(y);
  for (int64_t j = 0; j < n; ++j) ys[j] = xs[j * stride];
}

/// Calls f(T{}) with T the unsigned integer of `bytes` bytes; false (and no
/// call) where no such type exists (bytes other than 1, 2, 4 or 8).
template <typename F> bool withWordOf(size_t bytes, F &&f) {
  switch (bytes) {
  case 1: f(uint8_t{}); return true;
  case 2: f(uint16_t{}); return true;
  case 4: f(uint32_t{}); return true;
  case 8: f(uint64_t{}); return true;
  default: return false;
  }
}

/// y[a * B + b] = x[a + b * S] for a < A, b < B: B input streams read in
/// order, the output written in order.
template <typename T> void shortRowsBlock(const char *x, char *y, int64_t A, int64_t B, int64_t S) {
  const T *xs = reinterpret_cast<const T *>(x);
  T *ys = reinterpret_cast<T *>(y);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) ys[a * B + b] = xs[a + b * S];
}

/// Output rows shorter than this whose dimension before them is the input's
/// innermost take shortRowsBlock: NCHW -> NHWC of an image (rows of 3
/// channels) cost a row's index arithmetic per 3 elements (1x3x224x224, the
/// first step of a CNN's kernel plan: median 0.26 -> 0.12 ms, kiln profile
/// --serial on MobileNetV3-small, --compile-policy kernels-only).
constexpr int64_t kShortRow = 16;

/// Output rows (every dimension but the last) split over the workers; each
/// row is one run along the output's last dimension: a memcpy where that
/// dimension is the input's innermost too, else a typed strided copy. The
/// row index carries from row to row (no per-element index arithmetic).
llvm::Error transposeCompute(const KernelArgs &a) {
  auto perms = *a.attrs.getInts("perms");
  const TensorType &o = a.outputTypes[0];
  auto is = rowMajorStrides(a.inputTypes[0].shape);
  size_t es = dtypeSize(o.dtype);
  const char *x = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  const size_t rank = o.shape.size();
  if (rank == 0 || o.numElements() == 0) {
    if (o.numElements() == 1) std::memcpy(y, x, es);
    return llvm::Error::success();
  }
  const int64_t inner = o.shape[rank - 1], innerStride = is[perms[rank - 1]];
  const int64_t rows = o.numElements() / inner;
  if (rank >= 2 && innerStride != 1 && inner < kShortRow && is[perms[rank - 2]] == 1 &&
      withWordOf(es, [](auto) {})) {
    // Blocks of output [A, inner] (A: the input's innermost dimension),
    // in chunks of A for the workers.
    const int64_t A = o.shape[rank - 2], prefixes = rows / A;
    constexpr int64_t kChunk = 1024;
    const int64_t chunks = (A + kChunk - 1) / kChunk;
    parallel(a.executor, prefixes * chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t item = b; item < e; ++item) {
        int64_t p = item / chunks, a0 = (item % chunks) * kChunk, n = std::min(kChunk, A - a0);
        int64_t off = a0;  // the input's offset of output [p..., a0, 0]
        for (int64_t d = int64_t(rank) - 3, r = p; d >= 0; --d) {
          off += (r % o.shape[d]) * is[perms[d]];
          r /= o.shape[d];
        }
        const char *src = x + off * int64_t(es);
        char *dst = y + (p * A + a0) * inner * int64_t(es);
        withWordOf(es, [&](auto word) { shortRowsBlock<decltype(word)>(src, dst, n, inner, innerStride); });
      }
    });
    return llvm::Error::success();
  }
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1));
  parallel(a.executor, rows, grain, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(rank - 1);
    int64_t r = b, off = 0;
    for (size_t d = rank - 1; d-- > 0;) {
      idx[d] = r % o.shape[d];
      r /= o.shape[d];
      off += idx[d] * is[perms[d]];
    }
    for (int64_t row = b; row < e; ++row) {
      const char *src = x + off * int64_t(es);
      char *dst = y + row * inner * int64_t(es);
      if (innerStride == 1) std::memcpy(dst, src, size_t(inner) * es);
      else if (!withWordOf(es, [&](auto word) { stridedRun<decltype(word)>(src, dst, inner, innerStride); }))
        for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * int64_t(es), src + j * innerStride * int64_t(es), es);
      // Next row: carry the index.
      for (size_t d = rank - 1; d-- > 0;) {
        off += is[perms[d]];
        if (++idx[d] < o.shape[d]) break;
        off -= idx[d] * is[perms[d]];
        idx[d] = 0;
      }
    }
  });
  return llvm::Error::success();
}

// --- reshape / identity copy ----------------------------------------------------
llvm::Expected<std::vector<TensorType>> reshapeShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.reshape", in, 1)) return std::move(e);
  auto shape = attrs.getInts("shape");
  if (!shape) return shape.takeError();
  Shape s(shape->begin(), shape->end());
  int64_t known = 1, inferred = -1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == -1) {
      if (inferred >= 0) return fail("tosa.reshape: more than one -1 in the new shape");
      inferred = int64_t(d);
    } else if (s[d] < 0) {
      return fail("tosa.reshape: dimension " + llvm::Twine(d) + " of the new shape is " + llvm::Twine(s[d]));
    } else if (__builtin_mul_overflow(known, s[d], &known)) {
      return fail("tosa.reshape: the new shape has more elements than 64 bits can count");
    }
  }
  if (inferred >= 0) s[inferred] = known ? in[0].numElements() / known : 0;
  if (numElements(s) != in[0].numElements())
    return fail("tosa.reshape: " + shapeToString(in[0].shape) + " has " + llvm::Twine(in[0].numElements()) +
                " elements, " + shapeToString(s) + " has " + llvm::Twine(numElements(s)));
  return std::vector<TensorType>{TensorType{in[0].dtype, s}};
}
llvm::Error copyCompute(const KernelArgs &a) {
  std::memcpy(a.outputs[0], a.inputs[0], a.outputTypes[0].byteSize());
  return llvm::Error::success();
}

// --- slice ---------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> sliceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.slice", in, 1)) return std::move(e);
  auto start = attrs.getInts("start");
  auto size = attrs.getInts("size");
  if (!start) return start.takeError();
  if (!size) return size.takeError();
  if (start->size() != in[0].shape.size() || size->size() != in[0].shape.size())
    return fail("tosa.slice: start/size rank differs from the input's");
  TensorType out = in[0];
  for (size_t d = 0; d < size->size(); ++d) {
    int64_t sz = (*size)[d] == -1 ? in[0].shape[d] - (*start)[d] : (*size)[d];
    if ((*start)[d] < 0 || sz < 0 || (*start)[d] + sz > in[0].shape[d])
      return fail("tosa.slice: [" + llvm::Twine((*start)[d]) + ", +" + llvm::Twine(sz) + ") is outside dim " +
                  llvm::Twine(d) + " of size " + llvm::Twine(in[0].shape[d]));
    out.shape[d] = sz;
  }
  return std::vector<TensorType>{out};
}
llvm::Error sliceCompute(const KernelArgs &a) {
  auto start = *a.attrs.getInts("start");
  const TensorType &o = a.outputTypes[0];
  auto is = rowMajorStrides(a.inputTypes[0].shape);
  size_t es = dtypeSize(o.dtype);
  const char *x = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  // Rows of the innermost dimension are contiguous in the input (unit
  // strides): one copy per row, the row index counted like an odometer.
  size_t rank = o.shape.size();
  if (rank == 0 || o.numElements() == 0) {
    if (o.numElements()) std::memcpy(y, x, es);
    return llvm::Error::success();
  }
  int64_t inner = o.shape.back(), rows = o.numElements() / inner;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += (idx[d] + start[d]) * is[d];
    std::memcpy(y + r * inner * es, x + off * es, size_t(inner) * es);
    for (size_t d = rank - 1; d-- > 0;) {  // the next row
      if (++idx[d] < o.shape[d]) break;
      idx[d] = 0;
    }
  }
  return llvm::Error::success();
}

// --- pad -----------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> padShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.pad", in, 1)) return std::move(e);
  auto pad = attrs.getInts("padding");
  if (!pad) return pad.takeError();
  if (pad->size() != 2 * in[0].shape.size()) return fail("tosa.pad: padding needs 2 values per dim");
  if (!isFloat(in[0].dtype) && in[0].dtype != DType::i32 && in[0].dtype != DType::i8 && in[0].dtype != DType::i64)
    return fail("no tosa.pad kernel for " + std::string(dtypeName(in[0].dtype)));
  TensorType out = in[0];
  for (size_t d = 0; d < out.shape.size(); ++d) {
    int64_t lo = (*pad)[2 * d], hi = (*pad)[2 * d + 1];
    if (lo < 0 || hi < 0) return fail("tosa.pad: padding must be >= 0");
    if (__builtin_add_overflow(out.shape[d], lo, &out.shape[d]) || __builtin_add_overflow(out.shape[d], hi, &out.shape[d]))
      return fail("tosa.pad: the padded shape overflows 64 bits");
  }
  if (auto err = checkAllocatable(out.byteSize(), "tosa.pad's result tensor<" + out.str() + ">")) return std::move(err);
  return std::vector<TensorType>{out};
}
llvm::Error padCompute(const KernelArgs &a) {
  // Data movement by element size, so every dtype the shape function takes
  // (f16 and bf16 too, which have no compute type) is written in full.
  auto pad = *a.attrs.getInts("padding");
  double value = a.attrs.getFloatOr("pad_const", 0);
  const TensorType &o = a.outputTypes[0], &t = a.inputTypes[0];
  auto is = rowMajorStrides(t.shape);
  size_t es = dtypeSize(o.dtype);
  char fill[8] = {};
  switch (o.dtype) {
  case DType::f16: {
    uint16_t h = floatToHalf(float(value));
    std::memcpy(fill, &h, 2);
    break;
  }
  case DType::bf16: {
    uint16_t h = floatToBf16(float(value));
    std::memcpy(fill, &h, 2);
    break;
  }
  default:
    if (!dispatch(o.dtype, [&](auto tag) {
          using S = Store<decltype(tag)>;
          S v = S(value);
          std::memcpy(fill, &v, sizeof(S));
        }))
      return noComputeType(o.dtype);
  }
  const char *x = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  const bool zeroFill = std::all_of(fill, fill + es, [](char c) { return c == 0; });
  auto fillRun = [&](char *to, int64_t n) {
    if (zeroFill) std::memset(to, 0, size_t(n) * es);
    else
      for (int64_t j = 0; j < n; ++j) std::memcpy(to + j * es, fill, es);
  };
  if (o.shape.empty()) {  // a scalar: nothing to pad
    std::memcpy(y, x, es);
    return llvm::Error::success();
  }
  // Output rows (every dimension but the last) split over the workers: a
  // row outside the input is all fill, one inside is fill, one memcpy of
  // the input's row, fill. The row index carries from row to row.
  const size_t rank = o.shape.size();
  const int64_t last = o.shape.back(), lo = pad[2 * (rank - 1)], inner = t.shape.back();
  const int64_t rows = last == 0 ? 0 : o.numElements() / last;
  llvm::ArrayRef<int64_t> outer = llvm::ArrayRef<int64_t>(o.shape).drop_back();
  parallel(a.executor, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(last, 1)), [&](int64_t b, int64_t e) {
    forEachIndex(outer, b, e, [&](int64_t row, const std::vector<int64_t> &idx) {
      char *yr = y + row * last * int64_t(es);
      int64_t off = 0;
      for (size_t d = 0; d + 1 < rank; ++d) {
        int64_t src = idx[d] - pad[2 * d];
        if (src < 0 || src >= t.shape[d]) {
          fillRun(yr, last);
          return;
        }
        off += src * is[d];
      }
      fillRun(yr, lo);
      if (inner) std::memcpy(yr + lo * int64_t(es), x + off * int64_t(es), size_t(inner) * es);
      fillRun(yr + (lo + inner) * int64_t(es), last - lo - inner);
    });
  });
  return llvm::Error::success();
}

// --- concat ----------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> concatShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (in.empty()) return fail("tosa.concat needs operands");
  auto axis = attrs.getInt("axis");
  if (!axis) return axis.takeError();
  if (*axis < 0 || *axis >= int64_t(in[0].shape.size())) return fail("tosa.concat: axis out of range");
  TensorType out = in[0];
  out.shape[*axis] = 0;
  for (const TensorType &t : in) {
    if (t.dtype != in[0].dtype || t.shape.size() != in[0].shape.size())
      return fail("tosa.concat: operands differ in dtype or rank");
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (int64_t(d) != *axis && t.shape[d] != in[0].shape[d])
        return fail("tosa.concat: operands differ in dim " + llvm::Twine(d));
    out.shape[*axis] += t.shape[*axis];
  }
  return std::vector<TensorType>{out};
}
llvm::Error concatCompute(const KernelArgs &a) {
  int64_t axis = *a.attrs.getInt("axis");
  const TensorType &o = a.outputTypes[0];
  size_t es = dtypeSize(o.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < int64_t(o.shape.size()); ++d) {
    if (d < axis) outer *= o.shape[d];
    if (d > axis) inner *= o.shape[d];
  }
  char *y = static_cast<char *>(a.outputs[0]);
  int64_t rowBytes = o.shape[axis] * inner * int64_t(es);
  int64_t at = 0;
  for (size_t k = 0; k < a.inputs.size(); ++k) {
    int64_t chunk = a.inputTypes[k].shape[axis] * inner * int64_t(es);
    const char *x = static_cast<const char *>(a.inputs[k]);
    for (int64_t r = 0; r < outer; ++r) std::memcpy(y + r * rowBytes + at, x + r * chunk, size_t(chunk));
    at += chunk;
  }
  return llvm::Error::success();
}

// --- reverse ---------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> reverseShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.reverse", in, 1)) return std::move(e);
  auto axis = attrs.getInt("axis");
  if (!axis) return axis.takeError();
  if (*axis < 0 || *axis >= int64_t(in[0].shape.size())) return fail("tosa.reverse: axis out of range");
  return std::vector<TensorType>{in[0]};
}
llvm::Error reverseCompute(const KernelArgs &a) {
  int64_t axis = *a.attrs.getInt("axis");
  const TensorType &o = a.outputTypes[0];
  auto s = rowMajorStrides(o.shape);
  size_t es = dtypeSize(o.dtype);
  const char *x = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  forEachIndex(o.shape, 0, o.numElements(), [&](int64_t i, const std::vector<int64_t> &idx) {
    int64_t off = i + (o.shape[axis] - 1 - 2 * idx[axis]) * s[axis];
    std::memcpy(y + i * es, x + off * es, es);
  });
  return llvm::Error::success();
}

// --- tile ------------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> tileShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.tile", in, 1)) return std::move(e);
  auto m = attrs.getInts("multiples");
  if (!m) return m.takeError();
  if (m->size() != in[0].shape.size()) return fail("tosa.tile: multiples has the wrong rank");
  TensorType out = in[0];
  for (size_t d = 0; d < m->size(); ++d) {
    if ((*m)[d] < 1) return fail("tosa.tile: multiples must be >= 1");
    if (__builtin_mul_overflow(out.shape[d], (*m)[d], &out.shape[d]))
      return fail("tosa.tile: the tiled shape overflows 64 bits");
  }
  if (auto err = checkAllocatable(out.byteSize(), "tosa.tile's result tensor<" + out.str() + ">")) return std::move(err);
  return std::vector<TensorType>{out};
}
llvm::Error tileCompute(const KernelArgs &a) {
  const TensorType &o = a.outputTypes[0], &t = a.inputTypes[0];
  auto is = rowMajorStrides(t.shape);
  size_t es = dtypeSize(o.dtype);
  const char *x = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  forEachIndex(o.shape, 0, o.numElements(), [&](int64_t i, const std::vector<int64_t> &idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (idx[d] % t.shape[d]) * is[d];
    std::memcpy(y + i * es, x + off * es, es);
  });
  return llvm::Error::success();
}

// --- gather ------------------------------------------------------------------------
llvm::Expected<std::vector<TensorType>> gatherShape(llvm::ArrayRef<TensorType> in, const AttrMap &) {
  if (auto e = expectArity("tosa.gather", in, 2)) return std::move(e);
  if (in[0].shape.size() != 3 || in[1].shape.size() != 2 || in[1].shape[0] != in[0].shape[0])
    return fail("tosa.gather: values must be [N,K,C] and indices [N,W]");
  if (in[1].dtype != DType::i32 && in[1].dtype != DType::i64) return fail("tosa.gather: indices must be i32/i64");
  return std::vector<TensorType>{TensorType{in[0].dtype, {in[0].shape[0], in[1].shape[1], in[0].shape[2]}}};
}
llvm::Error gatherCompute(const KernelArgs &a) {
  int64_t N = a.inputTypes[0].shape[0], K = a.inputTypes[0].shape[1], C = a.inputTypes[0].shape[2];
  int64_t W = a.inputTypes[1].shape[1];
  size_t row = size_t(C) * dtypeSize(a.inputTypes[0].dtype);
  const char *v = static_cast<const char *>(a.inputs[0]);
  char *y = static_cast<char *>(a.outputs[0]);
  bool i64 = a.inputTypes[1].dtype == DType::i64;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t w = 0; w < W; ++w) {
      int64_t k = i64 ? static_cast<const int64_t *>(a.inputs[1])[n * W + w]
                      : static_cast<const int32_t *>(a.inputs[1])[n * W + w];
      if (k < 0 || k >= K)
        return fail("tosa.gather: index " + llvm::Twine(k) + " at [" + llvm::Twine(n) + ", " + llvm::Twine(w) +
                    "] is outside [0, " + llvm::Twine(K) + ")");
      std::memcpy(y + (n * W + w) * row, v + (n * K + k) * row, row);
    }
  return llvm::Error::success();
}

}  // namespace

void registerDataMovementKernels(KernelRegistry &r) {
  llvm::cantFail(r.add({"tosa.transpose", "cpu", &transposeShape, &transposeCompute}));
  llvm::cantFail(r.add({"tosa.reshape", "cpu", &reshapeShape, &copyCompute}));
  llvm::cantFail(r.add({"tosa.slice", "cpu", &sliceShape, &sliceCompute}));
  llvm::cantFail(r.add({"tosa.pad", "cpu", &padShape, &padCompute}));
  llvm::cantFail(r.add({"tosa.concat", "cpu", &concatShape, &concatCompute}));
  llvm::cantFail(r.add({"tosa.reverse", "cpu", &reverseShape, &reverseCompute}));
  llvm::cantFail(r.add({"tosa.tile", "cpu", &tileShape, &tileCompute}));
  llvm::cantFail(r.add({"tosa.gather", "cpu", &gatherShape, &gatherCompute}));
}

}  // namespace kiln::kernels
