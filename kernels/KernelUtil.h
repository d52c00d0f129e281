// Helpers shared by the kernel families: dtype dispatch, broadcasting,
// strides, and parallel loops over the runtime's executor.
#pragma once

#include "kernels/KernelRegistry.h"
#include "runtime/Error.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace kiln::kernels::util {

/// Calls f(T{}) for the C++ type of `t` (the dtype table's compute type);
/// i1 maps to bool (stored as uint8_t). False for f16, bf16.
template <typename F> [[nodiscard]] bool dispatch(DType t, F &&f) { return visitComputeType(t, std::forward<F>(f)); }

/// Storage type: bool is stored as uint8_t.
template <typename T> using Store = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

inline llvm::Error fail(const llvm::Twine &msg) { return makeError(Status{ErrorCode::kInvalidArgument, msg.str(), {}}); }
/// A compute function reached with a dtype that has no compute type (f16,
/// bf16 are storage only): an error, never an output left unwritten. Shape
/// functions refuse such dtypes first; this is the backstop.
inline llvm::Error noComputeType(DType t) {
  return makeError(Status{ErrorCode::kInternal,
                          std::string("kernel reached with ") + std::string(dtypeName(t)) + ", which it cannot compute", {}});
}

/// Kernels implement TOSA's default NaN handling, nan_mode = PROPAGATE (a
/// NaN operand makes the result NaN; argmax picks the first NaN), as the
/// generated code does. An op asking for IGNORE gets no kernel (the
/// shape function fails), so placement keeps it in generated code.
inline llvm::Error propagatesNaN(const AttrMap &attrs, const llvm::Twine &op) {
  if (!attrs.has("nan_mode")) return llvm::Error::success();
  auto mode = attrs.getString("nan_mode");
  if (!mode) {
    llvm::consumeError(mode.takeError());
    return llvm::Error::success();
  }
  if (llvm::StringRef(*mode).contains("IGNORE"))
    return fail(op + ": no kernel for nan_mode IGNORE (generated code handles it)");
  return llvm::Error::success();
}
/// max/min that propagate NaN (TOSA's PROPAGATE), for any element type.
template <typename T> inline T maxPropagatingNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename T> inline T minPropagatingNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

inline std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// TOSA broadcasting: equal ranks, each dim equal or 1.
inline llvm::Expected<Shape> broadcast(llvm::ArrayRef<TensorType> ts) {
  Shape out = ts[0].shape;
  for (const TensorType &t : ts) {
    if (t.shape.size() != out.size())
      return fail("operands have ranks " + llvm::Twine(out.size()) + " and " + llvm::Twine(t.shape.size()) +
                  " (TOSA broadcasting needs equal ranks)");
    for (size_t d = 0; d < out.size(); ++d) {
      if (t.shape[d] == out[d] || t.shape[d] == 1) continue;
      if (out[d] == 1) {
        out[d] = t.shape[d];
        continue;
      }
      return fail("dimension " + llvm::Twine(d) + " is " + llvm::Twine(out[d]) + " in one operand and " +
                  llvm::Twine(t.shape[d]) + " in another");
    }
  }
  return out;
}

/// Strides of `in` read as `out`'s shape (0 on broadcast dims).
inline std::vector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out) {
  auto s = rowMajorStrides(in);
  for (size_t d = 0; d < out.size(); ++d)
    if (in[d] == 1 && out[d] != 1) s[d] = 0;
  return s;
}

/// Offset in an input for output element i (given broadcast strides).
inline int64_t offsetOf(int64_t i, llvm::ArrayRef<int64_t> outShape, llvm::ArrayRef<int64_t> strides) {
  int64_t off = 0;
  for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
    int64_t idx = i % outShape[d];
    i /= outShape[d];
    off += idx * strides[d];
  }
  return off;
}

/// Runs body(begin, end) over [0, n) on the executor for large n.
template <typename F> void parallel(HostExecutor &ex, int64_t n, int64_t grain, F &&body) {
  if (n <= grain) {
    body(int64_t(0), n);
    return;
  }
  ex.parallelFor(n, grain, [&](int64_t b, int64_t e) { body(b, e); });
}

/// TOSA float -> integer: round half to even, saturate; NaN saturates to
/// the largest value, as MLIR's tosa-to-linalg lowering does (its upper
/// bound compares unordered-or-greater), so kernels and generated code agree.
template <typename T> T saturatingRound(double v) {
  if (std::isnan(v)) return std::numeric_limits<T>::max();
  double r = std::nearbyint(v);
  if (r <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (r >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(r);
}

inline llvm::Error expectArity(const char *op, llvm::ArrayRef<TensorType> in, size_t n) {
  if (in.size() != n)
    return fail(llvm::Twine(op) + " takes " + llvm::Twine(n) + " operands, got " + llvm::Twine(in.size()));
  return llvm::Error::success();
}

/// Integer +, -, * wrap around (two's complement), as generated code's
/// arith ops do; signed overflow in C++ would be undefined. Narrow types
/// compute in `unsigned` (an unsigned short product promotes to int).
template <typename T, bool Narrow = (sizeof(T) < sizeof(unsigned)) || !std::is_integral_v<T>>
struct WrapUnsignedOf {
  using type = unsigned;
};
template <typename T> struct WrapUnsignedOf<T, false> {
  using type = std::make_unsigned_t<T>;
};
template <typename T> using WrapUnsigned = typename WrapUnsignedOf<T>::type;
template <typename T> T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) return T(WrapUnsigned<T>(a) + WrapUnsigned<T>(b));
  else return a + b;
}
template <typename T> T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return T(WrapUnsigned<T>(a) - WrapUnsigned<T>(b));
  else return a - b;
}
template <typename T> T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return T(WrapUnsigned<T>(a) * WrapUnsigned<T>(b));
  else return a * b;
}

}  // namespace kiln::kernels::util
