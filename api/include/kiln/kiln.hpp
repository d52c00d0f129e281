// kiln's C++ API: a header-only layer over the C API (kiln/kiln_c.h) that
// needs nothing but the C++17 standard library.
//
//   #include <kiln/kiln.hpp>
//   kiln::Runtime rt;                                        // options: kiln::Options().set("threads", "4")
//   kiln::Module m = rt.load("model.mlir");                  // MLIR text or bytecode
//   kiln::Tensor x = kiln::Tensor::zeros(kiln::DType::f32, {1, 784});
//   std::vector<kiln::Tensor> y = m.call({x});               // JIT-compiles on the first call
//
// Errors are exceptions (kiln::Error: code, message, location), as in ONNX
// Runtime's C++ API: a call either returns its results or throws, so a
// result can never be read without its error having been seen, and the
// happy path of a program stays free of checks. Programs that prefer error
// values use the C API directly.
//
// Objects are move-only owners of C handles, except Tensor, which is a
// cheap shared handle (copies share the memory). Thread-safety as the C
// API's: Runtime and Module may be used from several threads at once.
// Do not include this header and kiln's internal headers in one file: both
// declare kiln::Runtime and kiln::Module (this API's live in kiln::v0).
#pragma once

#include "kiln/kiln_c.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {
inline namespace v0 {

/// kiln_c.h's codes.
enum class Code {
  ok = KILN_OK,
  invalid_argument = KILN_INVALID_ARGUMENT,
  unsupported = KILN_UNSUPPORTED,
  compile_failed = KILN_COMPILE_FAILED,
  io = KILN_IO,
  resource_exhausted = KILN_RESOURCE_EXHAUSTED,
  cancelled = KILN_CANCELLED,
  unavailable = KILN_UNAVAILABLE,
  internal = KILN_INTERNAL,
};

class Error : public std::runtime_error {
public:
  Error(Code code, const std::string &message, std::string location)
      : std::runtime_error(message), code_(code), location_(std::move(location)) {}
  Code code() const noexcept { return code_; }
  /// "file:line:col" in the model, or "".
  const std::string &location() const noexcept { return location_; }
  /// "invalid argument", "unsupported", ...
  const char *codeName() const noexcept { return kiln_code_name(kiln_code(code_)); }

private:
  Code code_;
  std::string location_;
};

namespace detail {
/// Throws the status's error (and frees it); nothing for success.
inline void check(kiln_status *status) {
  if (!status) return;
  Error e(Code(kiln_status_code(status)), kiln_status_message(status), kiln_status_location(status));
  kiln_status_free(status);
  throw e;
}
inline const char *cstr(const std::string &s) { return s.empty() ? nullptr : s.c_str(); }
/// Runs `body` (returning a kiln_status *) for a callback the C API calls:
/// a kiln::Error it throws becomes a status with its code, another
/// exception an internal error, so nothing unwinds into C.
template <typename F> kiln_status *statusOf(F &&body) {
  try {
    return body();
  } catch (const Error &err) {
    return kiln_status_create(kiln_code(err.code()), err.what());
  } catch (const std::exception &err) {
    return kiln_status_create(KILN_INTERNAL, err.what());
  }
}
/// Owns one C handle (move-only); frees it with Free.
template <typename T, void (*Free)(T *)> class Handle {
public:
  Handle() = default;
  explicit Handle(T *p) : p_(p) {}
  Handle(Handle &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Handle &operator=(Handle &&o) noexcept {
    if (this != &o) reset(o.p_), o.p_ = nullptr;
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { Free(p_); }
  T *get() const { return p_; }
  void reset(T *p = nullptr) {
    T *old = p_;
    p_ = p;
    Free(old);
  }
  explicit operator bool() const { return p_ != nullptr; }
  /// Gives up ownership without freeing.
  T *release() {
    T *p = p_;
    p_ = nullptr;
    return p;
  }

private:
  T *p_ = nullptr;
};
/// Calls and deletes a heap-allocated callable: the C API's callback.
template <typename F> void callOnce(void *f) {
  F *fn = static_cast<F *>(f);
  (*fn)();
  delete fn;
}
}  // namespace detail

/// The library's version, "MAJOR.MINOR.PATCH" (KILN_VERSION_STRING is the
/// headers' version).
inline std::string version() { return kiln_version(); }

enum class DType {
  f32 = KILN_F32,
  f16 = KILN_F16,
  bf16 = KILN_BF16,
  f64 = KILN_F64,
  i64 = KILN_I64,
  i32 = KILN_I32,
  i16 = KILN_I16,
  i8 = KILN_I8,
  u8 = KILN_U8,
  boolean = KILN_BOOL,
};
inline std::string_view name(DType d) {
  const char *n = kiln_dtype_name(kiln_dtype(d));
  return n ? n : "?";
}
inline size_t byteSize(DType d) { return kiln_dtype_size(kiln_dtype(d)); }

/// The DType of a C++ element type.
template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::f32; }
template <> constexpr DType dtypeOf<double>() { return DType::f64; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::i64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::i32; }
template <> constexpr DType dtypeOf<int16_t>() { return DType::i16; }
template <> constexpr DType dtypeOf<int8_t>() { return DType::i8; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::u8; }
template <> constexpr DType dtypeOf<bool>() { return DType::boolean; }

/// Marks a dynamic dimension in TensorInfo::shape.
inline constexpr int64_t kDynamic = KILN_DYNAMIC;

/// An input or output of a function: name, dtype, shape (kDynamic where open).
struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

namespace detail {
inline std::vector<kiln_tensor_info> cInfos(const std::vector<TensorInfo> &infos) {
  std::vector<kiln_tensor_info> c;
  for (const TensorInfo &i : infos) c.push_back({i.name.c_str(), kiln_dtype(i.dtype), i.shape.size(), i.shape.data()});
  return c;
}
}  // namespace detail

/// A tensor: kiln-owned memory, or the caller's memory wrapped without a copy.
class Tensor {
public:
  Tensor() = default;
  /// kiln-owned, zeroed memory.
  static Tensor zeros(DType dtype, const std::vector<int64_t> &shape) {
    kiln_tensor *t = nullptr;
    detail::check(kiln_tensor_create(kiln_dtype(dtype), shape.data(), shape.size(), &t));
    return Tensor(t);
  }
  /// A copy of `values` (shape's element count of them).
  template <typename T> static Tensor fromValues(const std::vector<int64_t> &shape, const std::vector<T> &values) {
    Tensor t = zeros(dtypeOf<T>(), shape);
    if (values.size() != size_t(t.elementCount()))
      throw Error(Code::invalid_argument,
                  "Tensor::fromValues: " + std::to_string(values.size()) + " values for " +
                      std::to_string(t.elementCount()) + " elements",
                  "");
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t *>(t.rawData())[i] = values[i] ? 1 : 0;
    } else {
      T *out = t.data<T>();
      for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    }
    return t;
  }
  /// The caller's memory, not copied: kiln reads it in place and, as a
  /// call's output, writes the result into it. It must stay alive while
  /// calls use it (or pass `release`, run when kiln no longer holds it).
  template <typename T> static Tensor wrap(T *data, const std::vector<int64_t> &shape) {
    return wrapBytes(dtypeOf<T>(), data, shape, elementsOf(shape) * sizeof(T));
  }
  /// The same, with `release()` (any callable) run once kiln no longer
  /// holds the memory.
  template <typename T, typename F> static Tensor wrap(T *data, const std::vector<int64_t> &shape, F release) {
    return wrapBytes(dtypeOf<T>(), data, shape, elementsOf(shape) * sizeof(T), std::move(release));
  }
  static Tensor wrapBytes(DType dtype, void *data, const std::vector<int64_t> &shape, size_t bytes) {
    kiln_tensor *t = nullptr;
    detail::check(kiln_tensor_wrap(kiln_dtype(dtype), shape.data(), shape.size(), data, bytes, nullptr, nullptr, &t));
    return Tensor(t);
  }
  template <typename F>
  static Tensor wrapBytes(DType dtype, void *data, const std::vector<int64_t> &shape, size_t bytes, F release) {
    kiln_tensor *t = nullptr;
    F *ctx = new F(std::move(release));
    kiln_status *s = kiln_tensor_wrap(kiln_dtype(dtype), shape.data(), shape.size(), data, bytes,
                                      detail::callOnce<F>, ctx, &t);
    if (s) delete ctx;
    detail::check(s);
    return Tensor(t);
  }

  Tensor(const Tensor &o) : h_(o.h_ ? share(o.h_.get()) : nullptr) {}
  Tensor &operator=(const Tensor &o) {
    if (this != &o) h_.reset(o.h_ ? share(o.h_.get()) : nullptr);
    return *this;
  }
  Tensor(Tensor &&) noexcept = default;
  Tensor &operator=(Tensor &&) noexcept = default;

  bool valid() const { return bool(h_); }
  DType dtype() const { return DType(kiln_tensor_dtype(h_.get())); }
  std::vector<int64_t> shape() const {
    const int64_t *s = kiln_tensor_shape(h_.get());
    return std::vector<int64_t>(s, s + kiln_tensor_rank(h_.get()));
  }
  int64_t elementCount() const { return kiln_tensor_element_count(h_.get()); }
  size_t byteSize() const { return kiln_tensor_byte_size(h_.get()); }
  void *rawData() const { return kiln_tensor_data(h_.get()); }
  /// The elements as T; throws when T is not the tensor's dtype.
  template <typename T> T *data() const {
    if (dtypeOf<T>() != dtype())
      throw Error(Code::invalid_argument,
                  "Tensor::data<" + std::string(name(dtypeOf<T>())) + ">() on a " + std::string(name(dtype())) +
                      " tensor",
                  "");
    return static_cast<T *>(rawData());
  }
  template <typename T> std::vector<T> values() const {
    const T *p = data<T>();
    return std::vector<T>(p, p + elementCount());
  }

  kiln_tensor *handle() const { return h_.get(); }
  /// Takes ownership of a C handle.
  explicit Tensor(kiln_tensor *h) : h_(h) {}

private:
  static kiln_tensor *share(const kiln_tensor *t) {
    kiln_tensor *out = nullptr;
    detail::check(kiln_tensor_share(t, &out));
    return out;
  }
  static size_t elementsOf(const std::vector<int64_t> &shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d < 0 ? 0 : d);
    return n;
  }
  detail::Handle<kiln_tensor, kiln_tensor_free> h_;
};

/// Runtime options by name, as kiln_options_set documents them:
///   kiln::Options().set("threads", "4").set("op_mode", "tosa.conv2d=kernel")
class Options {
public:
  Options() : h_(kiln_options_create()) {
    if (!h_) throw Error(Code::resource_exhausted, "kiln_options_create: out of memory", "");
  }
  Options &set(const std::string &name, const std::string &value) {
    detail::check(kiln_options_set(h_.get(), name.c_str(), value.c_str()));
    return *this;
  }
  Options &set(const std::string &name, long long value) { return set(name, std::to_string(value)); }
  const kiln_options *handle() const { return h_.get(); }

private:
  detail::Handle<kiln_options, kiln_options_free> h_;
};

using CacheStats = kiln_cache_stats;
using ModuleStats = kiln_module_stats;
using TierStats = kiln_tier_stats;

/// What was compiled for one function at one set of input types.
struct CompileInfo {
  bool fromDiskCache = false;
  int kernelsCompiled = 0, kernelsShared = 0, placementsMeasured = 0, kernelsChosen = 0, jitFallbacks = 0;
  double compileMs = 0;
  std::string placement;
};

/// An asynchronous call (Module::callAsync).
class AsyncCall {
public:
  bool ready() const { return kiln_call_ready(h_.get()) != 0; }
  /// Stops launching the call's remaining steps; wait() then throws kCancelled.
  void cancel() { kiln_call_cancel(h_.get()); }
  /// Waits for the results (throws the call's error).
  std::vector<Tensor> wait() {
    std::vector<kiln_tensor *> out(outputs_, nullptr);
    kiln_status *s = kiln_call_wait(h_.get(), out.data(), out.size());
    std::vector<Tensor> results;
    for (kiln_tensor *t : out) results.emplace_back(t);  // owned even when s reports an error
    detail::check(s);
    return results;
  }
  /// Runs `callback()` (any callable) on a kiln thread once the call is
  /// ready. It must not throw.
  template <typename F> void onReady(F callback) {
    kiln_call_on_ready(h_.get(), detail::callOnce<F>, new F(std::move(callback)));
  }

private:
  friend class Module;
  AsyncCall(kiln_call *h, size_t outputs) : h_(h), outputs_(outputs) {}
  detail::Handle<kiln_call, kiln_call_free> h_;
  size_t outputs_;
};

class Module {
public:
  /// The module's public functions.
  std::vector<std::string> functions() const {
    std::vector<std::string> names;
    for (size_t i = 0, n = kiln_module_function_count(h_.get()); i < n; ++i)
      names.push_back(kiln_module_function_name(h_.get(), i));
    return names;
  }
  /// The function `function` names ("" = main, or the only function);
  /// throws kiln::Error (kInvalidArgument) where there is none.
  std::string resolveFunction(const std::string &function = "") const {
    const char *name = nullptr;
    detail::check(kiln_module_resolve_function(h_.get(), detail::cstr(function), &name));
    return name;
  }
  /// Inputs and outputs of `function` ("" = main, or the only function).
  std::vector<TensorInfo> inputs(const std::string &function = "") const {
    return infos(function, kiln_module_input_count, kiln_module_input_info);
  }
  std::vector<TensorInfo> outputs(const std::string &function = "") const {
    return infos(function, kiln_module_output_count, kiln_module_output_info);
  }

  /// Calls main (or the only function).
  std::vector<Tensor> call(const std::vector<Tensor> &inputs) { return call("", inputs); }
  std::vector<Tensor> call(const std::string &function, const std::vector<Tensor> &inputs) {
    std::vector<kiln_tensor *> in = handles(inputs);
    std::vector<kiln_tensor *> out(outputCount(function), nullptr);
    kiln_status *s = kiln_module_call(h_.get(), detail::cstr(function), in.data(), in.size(), out.data(), out.size());
    return collect(s, out);
  }
  /// Inputs by name, in any order.
  std::vector<Tensor> call(const std::string &function, const std::vector<std::pair<std::string, Tensor>> &named) {
    std::vector<const char *> names;
    std::vector<kiln_tensor *> in;
    for (const auto &[n, t] : named) {
      names.push_back(n.c_str());
      in.push_back(t.handle());
    }
    std::vector<kiln_tensor *> out(outputCount(function), nullptr);
    kiln_status *s = kiln_module_call_named(h_.get(), detail::cstr(function), names.data(), in.data(), in.size(),
                                            out.data(), out.size());
    return collect(s, out);
  }
  /// Writes the results into `outputs` (tensors of the results' dtypes and
  /// shapes, e.g. wrapping the caller's memory), as ONNX Runtime's IoBinding.
  void callInto(const std::string &function, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) {
    std::vector<kiln_tensor *> in = handles(inputs), out = handles(outputs);
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i]) throw Error(Code::invalid_argument, "callInto: output " + std::to_string(i) + " is empty", "");
    detail::check(kiln_module_call(h_.get(), detail::cstr(function), in.data(), in.size(), out.data(), out.size()));
  }
  /// Whether a call of batch N equals N calls of batch 1 on its slices
  /// (kiln_module_batch_separable); `why` receives the reason when not.
  bool batchSeparable(const std::string &function, std::string *why = nullptr) const {
    int separable = 0;
    const char *reason = nullptr;
    detail::check(kiln_module_batch_separable(h_.get(), detail::cstr(function), &separable, &reason));
    if (why) *why = reason ? reason : "";
    return separable != 0;
  }
  /// Starts a call and returns at once; `timeoutSeconds` > 0 bounds it.
  AsyncCall callAsync(const std::string &function, const std::vector<Tensor> &inputs, double timeoutSeconds = 0) {
    std::vector<kiln_tensor *> in = handles(inputs);
    size_t outputs = outputCount(function);
    kiln_call *c = nullptr;
    detail::check(kiln_module_call_async(h_.get(), detail::cstr(function), in.data(), in.size(), timeoutSeconds, &c));
    return AsyncCall(c, outputs);
  }
  /// Compiles `function` for these input types without running it.
  void prewarm(const std::string &function, const std::vector<TensorInfo> &inputs) {
    std::vector<kiln_tensor_info> c = detail::cInfos(inputs);
    detail::check(kiln_module_prewarm(h_.get(), detail::cstr(function), c.data(), c.size()));
  }
  /// What was compiled for these input types (compiling them if needed).
  CompileInfo compileInfo(const std::string &function, const std::vector<TensorInfo> &inputs) {
    std::vector<kiln_tensor_info> c = detail::cInfos(inputs);
    kiln_compile_info info{};
    detail::check(kiln_module_compile_info(h_.get(), detail::cstr(function), c.data(), c.size(), &info));
    CompileInfo r;
    r.fromDiskCache = info.from_disk_cache != 0;
    r.kernelsCompiled = info.kernels_compiled;
    r.kernelsShared = info.kernels_shared;
    r.placementsMeasured = info.placements_measured;
    r.kernelsChosen = info.kernels_chosen;
    r.jitFallbacks = info.jit_fallbacks;
    r.compileMs = info.compile_ms;
    r.placement = info.placement ? info.placement : "";
    return r;
  }
  ModuleStats stats() const {
    ModuleStats s{};
    kiln_module_stats_get(h_.get(), &s);
    return s;
  }
  /// How tiered execution (option compile_policy = tiered) served calls.
  TierStats tierStats() const {
    TierStats s{};
    kiln_module_tier_stats_get(h_.get(), &s);
    return s;
  }
  /// Blocks until every background compile started so far has finished.
  void waitForBackgroundCompiles() { kiln_module_wait_background_compiles(h_.get()); }
  kiln_module *handle() const { return h_.get(); }

private:
  friend class Runtime;
  friend class Eager;
  explicit Module(kiln_module *h) : h_(h) {}
  static std::vector<kiln_tensor *> handles(const std::vector<Tensor> &ts) {
    std::vector<kiln_tensor *> hs;
    hs.reserve(ts.size());
    for (const Tensor &t : ts) hs.push_back(t.handle());
    return hs;
  }
  static std::vector<Tensor> collect(kiln_status *s, const std::vector<kiln_tensor *> &out) {
    std::vector<Tensor> results;
    for (kiln_tensor *t : out) results.emplace_back(t);
    detail::check(s);
    return results;
  }
  size_t outputCount(const std::string &function) const {
    size_t n = 0;
    detail::check(kiln_module_output_count(h_.get(), detail::cstr(function), &n));
    return n;
  }
  template <typename Count, typename Info>
  std::vector<TensorInfo> infos(const std::string &function, Count count, Info info) const {
    size_t n = 0;
    detail::check(count(h_.get(), detail::cstr(function), &n));
    std::vector<TensorInfo> r;
    for (size_t i = 0; i < n; ++i) {
      kiln_tensor_info c{};
      detail::check(info(h_.get(), detail::cstr(function), i, &c));
      r.push_back({c.name, DType(c.dtype), std::vector<int64_t>(c.shape, c.shape + c.rank)});
    }
    return r;
  }
  detail::Handle<kiln_module, kiln_module_free> h_;
};

class Runtime;

/// Attributes of an eager op or a user kernel's use (TOSA attribute names).
class Attrs {
public:
  Attrs() : h_(kiln_attrs_create()) {
    if (!h_) throw Error(Code::resource_exhausted, "kiln_attrs_create: out of memory", "");
  }
  Attrs &set(const std::string &name, int64_t v) { return detail::check(kiln_attrs_set_int(h_.get(), name.c_str(), v)), *this; }
  Attrs &set(const std::string &name, int v) { return set(name, int64_t(v)); }
  Attrs &set(const std::string &name, double v) { return detail::check(kiln_attrs_set_float(h_.get(), name.c_str(), v)), *this; }
  Attrs &set(const std::string &name, const std::vector<int64_t> &v) {
    return detail::check(kiln_attrs_set_ints(h_.get(), name.c_str(), v.data(), v.size())), *this;
  }
  Attrs &set(const std::string &name, const std::string &v) {
    return detail::check(kiln_attrs_set_string(h_.get(), name.c_str(), v.c_str())), *this;
  }
  const kiln_attrs *handle() const { return h_.get(); }

private:
  detail::Handle<kiln_attrs, kiln_attrs_free> h_;
};

/// Reads the attributes a user kernel is called with (not owned).
struct AttrsView {
  const kiln_attrs *attrs;
  int64_t getInt(const std::string &name) const {
    int64_t v = 0;
    detail::check(kiln_attrs_get_int(attrs, name.c_str(), &v));
    return v;
  }
  double getFloat(const std::string &name) const {
    double v = 0;
    detail::check(kiln_attrs_get_float(attrs, name.c_str(), &v));
    return v;
  }
  std::vector<int64_t> getInts(const std::string &name) const {
    size_t n = 0;
    detail::check(kiln_attrs_get_ints(attrs, name.c_str(), nullptr, 0, &n));
    std::vector<int64_t> v(n);
    detail::check(kiln_attrs_get_ints(attrs, name.c_str(), v.data(), n, &n));
    return v;
  }
};

/// An eager op's result: its type at once, its value when computed. Copies
/// share the value.
class Value {
public:
  Value() = default;
  /// A ready value.
  Value(const Tensor &t) {
    kiln_value *v = nullptr;
    detail::check(kiln_value_from_tensor(t.handle(), &v));
    h_.reset(v);
  }
  Value(const Value &o) : h_(o.h_ ? share(o.h_.get()) : nullptr) {}
  Value &operator=(const Value &o) {
    if (this != &o) h_.reset(o.h_ ? share(o.h_.get()) : nullptr);
    return *this;
  }
  Value(Value &&) noexcept = default;
  Value &operator=(Value &&) noexcept = default;
  explicit Value(kiln_value *h) : h_(h) {}

  DType dtype() const { return DType(info().dtype); }
  std::vector<int64_t> shape() const {
    kiln_tensor_info i = info();
    return std::vector<int64_t>(i.shape, i.shape + i.rank);
  }
  /// Waits; throws the op's error.
  Tensor get() const {
    kiln_tensor *t = nullptr;
    detail::check(kiln_value_await(h_.get(), &t));
    return Tensor(t);
  }
  kiln_value *handle() const { return h_.get(); }

private:
  kiln_tensor_info info() const {
    kiln_tensor_info i{};
    kiln_value_info(h_.get(), &i);
    return i;
  }
  static kiln_value *share(const kiln_value *v) {
    kiln_value *out = nullptr;
    detail::check(kiln_value_share(v, &out));
    return out;
  }
  detail::Handle<kiln_value, kiln_value_free> h_;
};

/// Eager execution: ops run one by one as they are called (same shape
/// functions and kernels as graphs); results are Values.
///   kiln::Eager eager(runtime);
///   kiln::Value y = eager.run("tosa.add", {x, x});
class Eager {
public:
  explicit Eager(Runtime &runtime);
  Value run(const std::string &op, const std::vector<Value> &inputs) { return run(op, inputs, nullptr); }
  Value run(const std::string &op, const std::vector<Value> &inputs, const Attrs &attrs) {
    return run(op, inputs, attrs.handle());
  }
  /// Records what `fn(eager, inputs)` (returning std::vector<Value>) does
  /// on symbolic inputs of the example types as a graph: a module whose
  /// main runs it.
  template <typename F> Module trace(F fn, const std::vector<TensorInfo> &examples);
  kiln_eager *handle() const { return h_.get(); }

private:
  Value run(const std::string &op, const std::vector<Value> &inputs, const kiln_attrs *attrs) {
    std::vector<kiln_value *> in;
    for (const Value &v : inputs) in.push_back(v.handle());
    kiln_value *out = nullptr;
    detail::check(kiln_eager_execute(h_.get(), op.c_str(), in.data(), in.size(), attrs, &out));
    return Value(out);
  }
  explicit Eager(kiln_eager *h) : h_(h) {}
  detail::Handle<kiln_eager, kiln_eager_free> h_;
};

class Runtime {
public:
  Runtime() : Runtime(Options()) {}
  explicit Runtime(const Options &options) {
    kiln_runtime *r = nullptr;
    detail::check(kiln_runtime_create(options.handle(), &r));
    h_.reset(r);
  }
  /// MLIR (TOSA / linalg on tensors), text or bytecode, from a file.
  Module load(const std::string &path) {
    kiln_module *m = nullptr;
    detail::check(kiln_runtime_load_file(h_.get(), path.c_str(), &m));
    return Module(m);
  }
  /// The same from memory; `name` is what errors call it.
  Module loadFromMemory(std::string_view source, const std::string &name = "<memory>") {
    kiln_module *m = nullptr;
    detail::check(kiln_runtime_load_memory(h_.get(), source.data(), source.size(), name.c_str(), &m));
    return Module(m);
  }
  /// A built-in model: "mlp", "cnn", "resnet50" (builtinModels()).
  Module loadBuiltin(const std::string &name) {
    kiln_module *m = nullptr;
    detail::check(kiln_runtime_load_builtin(h_.get(), name.c_str(), &m));
    return Module(m);
  }
  static std::vector<std::string> builtinModels() {
    std::vector<std::string> names;
    for (size_t i = 0, n = kiln_builtin_model_count(); i < n; ++i) names.push_back(kiln_builtin_model_name(i));
    return names;
  }
  /// What generated code targets, e.g. "x86_64-pc-linux-gnu znver4 +avx512f,...".
  std::string target() const { return kiln_runtime_target(h_.get()); }
  CacheStats cacheStats() const {
    CacheStats s{};
    kiln_runtime_cache_stats(h_.get(), &s);
    return s;
  }
  kiln_runtime *handle() const { return h_.get(); }

private:
  detail::Handle<kiln_runtime, kiln_runtime_free> h_;
};

inline Eager::Eager(Runtime &runtime) {
  kiln_eager *e = nullptr;
  detail::check(kiln_eager_create(runtime.handle(), &e));
  h_.reset(e);
}

template <typename F> Module Eager::trace(F fn, const std::vector<TensorInfo> &examples) {
  struct Call {
    F *fn;
  } call{&fn};
  auto thunk = [](kiln_eager *e, kiln_value *const *inputs, size_t n, kiln_values *outputs,
                  void *user) -> kiln_status * {
    return detail::statusOf([&]() -> kiln_status * {
      Eager eager(e);  // borrowed from the C API: released, never freed, on every path
      struct Borrowed {
        Eager &eager;
        ~Borrowed() { eager.h_.release(); }
      } borrowed{eager};
      std::vector<Value> args;
      for (size_t i = 0; i < n; ++i) {
        kiln_value *v = nullptr;
        kiln_status *s = kiln_value_share(inputs[i], &v);
        if (s) return s;
        args.emplace_back(v);
      }
      std::vector<Value> results = (*static_cast<Call *>(user)->fn)(eager, args);
      for (const Value &r : results)
        if (kiln_status *s = kiln_values_push(outputs, r.handle())) return s;
      return nullptr;
    });
  };
  std::vector<kiln_tensor_info> c = detail::cInfos(examples);
  kiln_module *m = nullptr;
  detail::check(kiln_eager_trace(h_.get(), thunk, &call, c.data(), c.size(), &m, nullptr));
  return Module(m);
}

/// The type of one kernel input or output.
struct KernelTensor {
  DType dtype;
  std::vector<int64_t> shape;
  void *data;
};

/// Registers a handwritten kernel for `op` (see kiln_register_kernel), from
/// callables that live for the rest of the process:
///   shape(const std::vector<TensorInfo> &inputs, AttrsView) -> std::vector<TensorInfo>
///   compute(const std::vector<KernelTensor> &inputs, const std::vector<KernelTensor> &outputs, AttrsView)
/// Exceptions they throw become the kernel's error.
template <typename Shape, typename Compute>
void registerKernel(const std::string &op, const std::string &impl, Shape shape, Compute compute,
                    const std::vector<DType> &dtypes = {}) {
  struct Fns {
    Shape shape;
    Compute compute;
  };
  auto *fns = new Fns{std::move(shape), std::move(compute)};  // kernels stay registered for the process
  auto shapeThunk = [](const kiln_tensor_info *in, size_t n, const kiln_attrs *attrs, kiln_types *out,
                       void *user) -> kiln_status * {
    return detail::statusOf([&]() -> kiln_status * {
      std::vector<TensorInfo> inputs;
      for (size_t i = 0; i < n; ++i) inputs.push_back({"", DType(in[i].dtype), {in[i].shape, in[i].shape + in[i].rank}});
      std::vector<TensorInfo> results = static_cast<Fns *>(user)->shape(inputs, AttrsView{attrs});
      for (const TensorInfo &r : results)
        if (kiln_status *s = kiln_types_push(out, kiln_dtype(r.dtype), r.shape.data(), r.shape.size())) return s;
      return nullptr;
    });
  };
  auto computeThunk = [](const kiln_kernel_context *ctx, void *user) -> kiln_status * {
    return detail::statusOf([&]() -> kiln_status * {
      std::vector<KernelTensor> inputs, outputs;
      kiln_tensor_info info{};
      for (size_t i = 0, n = kiln_kernel_input_count(ctx); i < n; ++i) {
        void *data = const_cast<void *>(kiln_kernel_input(ctx, i, &info));
        inputs.push_back({DType(info.dtype), {info.shape, info.shape + info.rank}, data});
      }
      for (size_t i = 0, n = kiln_kernel_output_count(ctx); i < n; ++i) {
        void *data = kiln_kernel_output(ctx, i, &info);
        outputs.push_back({DType(info.dtype), {info.shape, info.shape + info.rank}, data});
      }
      static_cast<Fns *>(user)->compute(inputs, outputs, AttrsView{kiln_kernel_attrs(ctx)});
      return nullptr;
    });
  };
  std::vector<kiln_dtype> cd;
  for (DType d : dtypes) cd.push_back(kiln_dtype(d));
  kiln_status *s = kiln_register_kernel(op.c_str(), impl.c_str(), cd.data(), cd.size(), shapeThunk, computeThunk, fns);
  if (s) delete fns;
  detail::check(s);
}

/// Records a runtime's calls and compiles from construction to stop().
class Profiler {
public:
  explicit Profiler(Runtime &runtime) {
    kiln_profiler *p = nullptr;
    detail::check(kiln_profiler_start(runtime.handle(), &p));
    h_.reset(p);
  }
  /// Stops; writes a Chrome trace and an HTML report where paths are given;
  /// returns the per-kernel table.
  std::string stop(const std::string &tracePath = "", const std::string &reportPath = "") {
    char *table = nullptr;
    detail::check(kiln_profiler_stop(h_.get(), detail::cstr(tracePath), detail::cstr(reportPath), &table));
    std::string text = table ? table : "";
    kiln_string_free(table);
    return text;
  }

private:
  detail::Handle<kiln_profiler, kiln_profiler_free> h_;
};

}  // namespace v0
}  // namespace kiln
