// Reductions over one axis (TOSA keeps the axis with size 1) and argmax.
// The tensor is viewed as [outer, axis, inner]; outer x inner slices run in
// parallel on the executor.
#include "kernels/KernelUtil.h"
#include "kernels/VectorKernels.h"

#include <algorithm>
#include <limits>

namespace kiln::kernels {
namespace {
using namespace util;

struct Geometry {
  int64_t outer = 1, axis = 1, inner = 1;
};
Geometry geometry(const TensorType &t, int64_t axis) {
  Geometry g;
  for (int64_t d = 0; d < int64_t(t.shape.size()); ++d) {
    if (d < axis) g.outer *= t.shape[d];
    else if (d == axis) g.axis = t.shape[d];
    else g.inner *= t.shape[d];
  }
  return g;
}

enum class Kind { Sum, Prod, Max, Min, All, Any };
template <Kind K> struct Reduce;
#define REDUCE(K, NAME, INIT, STEP)                                                   \
  template <> struct Reduce<K> {                                                      \
    static constexpr const char *op = NAME;                                          \
    template <typename T> static T init() { return INIT; }                           \
    template <typename T> static T step(T acc, T x) { return STEP; }                 \
  };
REDUCE(Kind::Sum, "tosa.reduce_sum", T(0), wrapAdd(acc, x))
REDUCE(Kind::Prod, "tosa.reduce_product", T(1), wrapMul(acc, x))
REDUCE(Kind::Max, "tosa.reduce_max", std::numeric_limits<T>::lowest(), (x > acc || x != x) ? x : acc)
REDUCE(Kind::Min, "tosa.reduce_min", std::numeric_limits<T>::max(), (x < acc || x != x) ? x : acc)
REDUCE(Kind::All, "tosa.reduce_all", T(1), T(acc && x))
REDUCE(Kind::Any, "tosa.reduce_any", T(0), T(acc || x))
#undef REDUCE

template <Kind K>
llvm::Expected<std::vector<TensorType>> reduceShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  const char *op = Reduce<K>::op;
  if (auto e = expectArity(op, in, 1)) return std::move(e);
  if (auto e = propagatesNaN(attrs, op)) return std::move(e);
  auto axis = attrs.getInt("axis");
  if (!axis) return axis.takeError();
  if (*axis < 0 || *axis >= int64_t(in[0].shape.size()))
    return fail(llvm::Twine(op) + ": axis " + llvm::Twine(*axis) + " out of range for rank " +
                llvm::Twine(in[0].shape.size()));
  bool boolean = K == Kind::All || K == Kind::Any;
  DType t = in[0].dtype;
  if (boolean != (t == DType::i1) || t == DType::f16 || t == DType::bf16)
    return fail(llvm::Twine("no ") + op + " kernel for " + std::string(dtypeName(t)));
  TensorType out = in[0];
  out.shape[*axis] = 1;
  return std::vector<TensorType>{out};
}

/// f32 sums, maxima and minima by the host's widest vectors
/// (VectorKernels): the axis innermost (LayerNorm's and softmax's rows) or
/// with elements after it (vectors across those). Where the scalar loop
/// below ran a dependent chain of adds per output: BERT's reduce_max over
/// [12, L, L] 0.36 G elements/s.
template <Kind K> bool reduceF32Vectorized(const KernelArgs &a, const Geometry &g) {
  constexpr bool vectorized = K == Kind::Sum || K == Kind::Max || K == Kind::Min;
  if (!vectorized || a.inputTypes[0].dtype != DType::f32) return false;
  constexpr VectorReduce op = K == Kind::Sum ? VectorReduce::kSum : K == Kind::Max ? VectorReduce::kMax
                                                                                   : VectorReduce::kMin;
  const float *x = static_cast<const float *>(a.inputs[0]);
  float *y = static_cast<float *>(a.outputs[0]);
  if (g.inner == 1) {
    ReduceRowsFn rows = reduceRows(op);
    parallel(a.executor, g.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.axis)),
             [&](int64_t b, int64_t e) { rows(x + b * g.axis, y + b, e - b, g.axis); });
    return true;
  }
  // Blocks of up to 256 of the inner elements, each over the whole axis.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (g.inner + kBlock - 1) / kBlock;
  ReduceColumnsFn columns = reduceColumns(op);
  parallel(a.executor, g.outer * blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      int64_t o = item / blocks, j0 = (item % blocks) * kBlock;
      columns(x + o * g.axis * g.inner + j0, g.inner, y + o * g.inner + j0, std::min(kBlock, g.inner - j0),
              g.axis);
    }
  });
  return true;
}

template <Kind K> llvm::Error reduceCompute(const KernelArgs &a) {
  Geometry g = geometry(a.inputTypes[0], a.attrs.getIntOr("axis", 0));
  if (reduceF32Vectorized<K>(a, g)) return llvm::Error::success();
  if (!dispatch(a.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = Store<T>;
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const S *x = static_cast<const S *>(a.inputs[0]);
    S *y = static_cast<S *>(a.outputs[0]);
    parallel(a.executor, g.outer * g.inner, 256, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        int64_t o = s / g.inner, in = s % g.inner;
        Acc acc = Reduce<K>::template init<Acc>();
        if constexpr (std::is_same_v<T, float>)
          if (K == Kind::Max || K == Kind::Min) acc = Reduce<K>::template init<float>();
        for (int64_t k = 0; k < g.axis; ++k)
          acc = Reduce<K>::template step<Acc>(acc, Acc(T(x[(o * g.axis + k) * g.inner + in])));
        y[s] = S(T(acc));
      }
    });
  }))
    return noComputeType(a.inputTypes[0].dtype);
  return llvm::Error::success();
}

llvm::Expected<std::vector<TensorType>> argmaxShape(llvm::ArrayRef<TensorType> in, const AttrMap &attrs) {
  if (auto e = expectArity("tosa.argmax", in, 1)) return std::move(e);
  if (auto e = propagatesNaN(attrs, "tosa.argmax")) return std::move(e);
  auto axis = attrs.getInt("axis");
  if (!axis) return axis.takeError();
  if (*axis < 0 || *axis >= int64_t(in[0].shape.size())) return fail("tosa.argmax: axis out of range");
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::i32 && in[0].dtype != DType::i8)
    return fail("no tosa.argmax kernel for " + std::string(dtypeName(in[0].dtype)));
  Shape s;
  for (int64_t d = 0; d < int64_t(in[0].shape.size()); ++d)
    if (d != *axis) s.push_back(in[0].shape[d]);
  return std::vector<TensorType>{TensorType{DType::i32, s}};
}

llvm::Error argmaxCompute(const KernelArgs &a) {
  Geometry g = geometry(a.inputTypes[0], a.attrs.getIntOr("axis", 0));
  int32_t *y = static_cast<int32_t *>(a.outputs[0]);
  if (!dispatch(a.inputTypes[0].dtype, [&](auto tag) {
    using S = Store<decltype(tag)>;
    const S *x = static_cast<const S *>(a.inputs[0]);
    parallel(a.executor, g.outer * g.inner, 256, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        int64_t o = s / g.inner, in = s % g.inner, best = 0;
        auto at = [&](int64_t k) { return x[(o * g.axis + k) * g.inner + in]; };
        if (at(0) == at(0))  // nan_mode PROPAGATE: the first NaN is the maximum
          for (int64_t k = 1; k < g.axis; ++k) {
            auto v = at(k);
            if (v != v) {
              best = k;
              break;
            }
            if (v > at(best)) best = k;
          }
        y[s] = int32_t(best);
      }
    });
  }))
    return noComputeType(a.inputTypes[0].dtype);
  return llvm::Error::success();
}

template <Kind K> KernelDef reduce() {
  return {Reduce<K>::op, "cpu", &reduceShape<K>, &reduceCompute<K>};
}

}  // namespace

void registerReductionKernels(KernelRegistry &r) {
  for (KernelDef d : {reduce<Kind::Sum>(), reduce<Kind::Prod>(), reduce<Kind::Max>(),
                      reduce<Kind::Min>(), reduce<Kind::All>(), reduce<Kind::Any>()})
    llvm::cantFail(r.add(d));
  llvm::cantFail(r.add({"tosa.argmax", "cpu", &argmaxShape, &argmaxCompute}));
}

}  // namespace kiln::kernels
