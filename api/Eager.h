// Eager execution: ops run one by one as they are called, through a thin
// dispatch path that shares shape functions and kernels with graph mode.
//
//   kiln::eager::Context ctx(runtime);
//   auto y = ctx.relu(ctx.add(ctx.matmul(x, w), b));   // returns at once
//   llvm::Expected<Tensor> v = y.value();               // awaits; errors surface here
//
// Dispatch: (op, attributes, input types) -> a cached entry holding the
// handwritten kernel and its output types (or, in JIT mode, the code of a
// single-op graph). On a hit there is no MLIR, no string building, no lock
// and no heap allocation beyond the output tensor: the entry is found in a
// lock-free table, the output type comes from the entry, and tiny ops whose
// inputs are ready run inline on the caller's thread. Other ops run on the
// executor; their results are AsyncValues.
//
// Capture: kiln::eager::trace(ctx, fn, examples) runs fn on symbolic tensors
// and records the calls as a TOSA graph, compiled like any model (the
// analogue of tf.function).
//
// Thread-safety: a Context may be used from several threads (not while it
// is tracing); EagerTensor is a value type (copies share the result). A
// Context must not outlive its Runtime.
#pragma once

#include "api/Kiln.h"
#include "ops/Attrs.h"
#include "runtime/AsyncValue.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kiln::eager {

class Context;

class EagerTensor {
public:
  EagerTensor() = default;
  /// A ready tensor.
  EagerTensor(Tensor t) : type_(t.type()), ready_(std::move(t)) {}

  /// Known at dispatch (shape functions), before the value is computed.
  const TensorType &type() const { return type_; }
  /// Awaits the value; an error names the op, its operands and their shapes.
  llvm::Expected<Tensor> value() const;
  bool isReady() const { return ready_.valid() || (pending_ && pending_->isAvailable()); }
  bool isError() const { return !error_.message.empty() || (pending_ && pending_->isError()); }
  bool isSymbolic() const { return traceId_ >= 0; }

private:
  friend class Context;
  friend llvm::Expected<struct TracedFunction>
  trace(Context &, const std::function<std::vector<EagerTensor>(Context &, llvm::ArrayRef<EagerTensor>)> &,
        llvm::ArrayRef<TensorType>);
  TensorType type_;
  Tensor ready_;
  AsyncValueRef<Tensor> pending_;
  Status error_;  // a failed dispatch (empty message: none)
  int traceId_ = -1;
};

/// An op name resolved once (e.g. kept by a typed wrapper); cheap to copy.
struct OpHandle {
  struct Impl;
  Impl *impl = nullptr;
};

struct EagerStats {
  uint64_t dispatches = 0, hits = 0, misses = 0, inlineRuns = 0, executorRuns = 0, jitOps = 0;
};

class Context {
public:
  explicit Context(Runtime &runtime);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  /// Resolves an op name (a registered kernel op, e.g. "tosa.add"; also one
  /// whose kernel was registered after this context was made).
  OpHandle op(llvm::StringRef name);
  /// Generic dispatch by name.
  EagerTensor execute(llvm::StringRef op, llvm::ArrayRef<EagerTensor> inputs,
                      const ops::AttrMap &attrs = {});
  EagerTensor execute(OpHandle op, llvm::ArrayRef<EagerTensor> inputs, const ops::AttrMap &attrs = {});

  // Typed ops (TOSA semantics).
  // Ops without attributes, one method per op the op table (ops/Ops.def)
  // marks unary or binary: add, sub, maximum, minimum, pow, intdiv, equal,
  // greater, greaterEqual, bitwise*/logical* ops and shifts; abs, ceil,
  // floor, exp, log, sin, cos, tanh, erf, sigmoid, rsqrt, reciprocal,
  // identity, bitwiseNot, clz, logicalNot.
#define KILN_EAGER_none(METHOD)
#define KILN_EAGER_unary(METHOD) EagerTensor METHOD(const EagerTensor &x);
#define KILN_EAGER_binary(METHOD) EagerTensor METHOD(const EagerTensor &a, const EagerTensor &b);
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) KILN_EAGER_##EAGER(METHOD)
#include "ops/Ops.def"
#undef KILN_OP
#undef KILN_EAGER_none
#undef KILN_EAGER_unary
#undef KILN_EAGER_binary
  // Ops with attributes.
  EagerTensor mul(const EagerTensor &a, const EagerTensor &b);
  EagerTensor relu(const EagerTensor &x);
  EagerTensor clamp(const EagerTensor &x, double lo, double hi);
  /// [N,H,C] x [N,C,W]; rank-2 operands are treated as N = 1.
  EagerTensor matmul(const EagerTensor &a, const EagerTensor &b);
  EagerTensor conv2d(const EagerTensor &x, const EagerTensor &w, const EagerTensor &bias,
                     std::array<int64_t, 4> pad = {0, 0, 0, 0}, std::array<int64_t, 2> stride = {1, 1},
                     std::array<int64_t, 2> dilation = {1, 1});
  EagerTensor maxPool2d(const EagerTensor &x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                        std::array<int64_t, 4> pad = {0, 0, 0, 0});
  EagerTensor reduceSum(const EagerTensor &x, int64_t axis);
  EagerTensor reduceMax(const EagerTensor &x, int64_t axis);
  EagerTensor softmax(const EagerTensor &x, int64_t axis);
  EagerTensor transpose(const EagerTensor &x, std::vector<int64_t> perms);
  EagerTensor reshape(const EagerTensor &x, std::vector<int64_t> shape);

  EagerStats stats() const;
  Runtime &runtime() { return runtime_; }
  /// Ops whose output has at most this many elements run inline when their
  /// inputs are ready.
  void setInlineLimit(int64_t elements) { inlineLimit_ = elements; }

  struct Entry;  // a cached dispatch target (internal)
private:
  struct Trace;
  friend struct Trace;
  friend llvm::Expected<struct TracedFunction>
  trace(Context &, const std::function<std::vector<EagerTensor>(Context &, llvm::ArrayRef<EagerTensor>)> &,
        llvm::ArrayRef<TensorType>);

  using Inputs = llvm::ArrayRef<const EagerTensor *>;  // no copies on the hot path
  EagerTensor dispatch(OpHandle::Impl &op, Inputs inputs, uint64_t attrHash,
                       llvm::function_ref<ops::AttrMap()> makeAttrs);
  EagerTensor record(OpHandle::Impl &op, Inputs inputs, ops::AttrMap attrs);
  Entry *lookup(OpHandle::Impl &op, uint64_t key, Inputs inputs, uint64_t attrHash) const;
  llvm::Expected<Entry *> insert(OpHandle::Impl &op, uint64_t key, Inputs inputs, uint64_t attrHash,
                                 ops::AttrMap attrs);
  EagerTensor fail(llvm::StringRef op, Inputs inputs, Status why) const;

  Runtime &runtime_;
  llvm::StringMap<std::unique_ptr<OpHandle::Impl>> ops_;  // registry ops; kernels registered later join on first use
  std::shared_mutex opsMu_;                               // ops_ (op(): shared; a new op: exclusive)
  std::mutex insertMu_;                                   // misses only
  int64_t inlineLimit_ = 1 << 14;
  struct Counters;
  std::unique_ptr<Counters> counters_;
  Trace *trace_ = nullptr;                                // set while tracing
#define KILN_HANDLE_none(METHOD)
#define KILN_HANDLE_unary(METHOD) OpHandle METHOD##_;
#define KILN_HANDLE_binary(METHOD) OpHandle METHOD##_;
#define KILN_OP(NAME, LOWERS, OPERANDS, ATTRS, EAGER, METHOD) KILN_HANDLE_##EAGER(METHOD)
#include "ops/Ops.def"
#undef KILN_OP
#undef KILN_HANDLE_none
#undef KILN_HANDLE_unary
#undef KILN_HANDLE_binary
  OpHandle mul_, clamp_, matmul_, conv2d_,
      maxPool2d_, reduceSum_, reduceMax_, transpose_, reshape_;
};

/// A captured graph, compiled like any model.
struct TracedFunction {
  std::string mlir;                 // the recorded TOSA graph
  std::unique_ptr<Module> module;   // func @main
  std::vector<TensorType> inputTypes;
  llvm::Expected<std::vector<Tensor>> call(llvm::ArrayRef<Tensor> inputs) const {
    return module->call("main", inputs);
  }
};

/// Runs `fn` on symbolic tensors of `exampleTypes` and records its eager
/// calls as a graph (TOSA MLIR), loaded into `ctx`'s runtime.
llvm::Expected<TracedFunction>
trace(Context &ctx, const std::function<std::vector<EagerTensor>(Context &, llvm::ArrayRef<EagerTensor>)> &fn,
      llvm::ArrayRef<TensorType> exampleTypes);

}  // namespace kiln::eager
