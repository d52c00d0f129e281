// kiln._kiln: the Python binding, a thin layer over kiln's C API
// (<kiln/kiln_c.h>, libkiln.so) written with nanobind. Nothing here reaches
// below the public API; the Python package (python/kiln/) adds the pure
// Python parts (errors, profile(), load_onnx, the torch.compile backend).
//
// Arrays cross without copies where their layout allows: inputs are any
// NumPy array or DLPack producer on the host (PyTorch, JAX, ...), read in
// place when C-contiguous (else copied once into a kiln tensor); outputs are
// kiln's own tensors handed to NumPy (or DLPack / PyTorch) with a capsule
// that frees them, or the caller's arrays given as `out=`. The GIL is
// released while kiln runs.
#include <kiln/kiln_c.h>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---- Errors -------------------------------------------------------------------

/// kiln's error classes, one per kiln_code, set by kiln/__init__.py. Plain
/// handles holding a reference each, never released: no Py_DECREF from a
/// static destructor after the interpreter has gone.
nb::handle errorClasses[KILN_INTERNAL + 1];

/// A kiln error on its way to Python as the class of its code.
struct Error : std::exception {
  kiln_code code;
  std::string message, location;
  Error(kiln_code c, std::string m, std::string l = "") : code(c), message(std::move(m)), location(std::move(l)) {}
  const char *what() const noexcept override { return message.c_str(); }
};

/// Throws (and frees) a non-NULL status.
void check(kiln_status *s) {
  if (!s) return;
  Error e(kiln_status_code(s), kiln_status_message(s), kiln_status_location(s));
  kiln_status_free(s);
  throw e;
}

[[noreturn]] void invalid(std::string message) { throw Error(KILN_INVALID_ARGUMENT, std::move(message)); }

void raisePython(const Error &e) {
  int code = int(e.code);
  if (code < 1 || code > KILN_INTERNAL) code = KILN_INTERNAL;
  nb::handle cls = errorClasses[code];
  if (!cls.is_valid()) {
    PyErr_SetString(PyExc_RuntimeError, e.message.c_str());
    return;
  }
  nb::object instance = cls(e.message, kiln_code_name(kiln_code(code)), e.location, code);
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

// ---- dtypes ---------------------------------------------------------------------

const char *numpyName(kiln_dtype d) {
  switch (d) {
  case KILN_F32: return "float32";
  case KILN_F16: return "float16";
  case KILN_BF16: return "bfloat16";
  case KILN_F64: return "float64";
  case KILN_I64: return "int64";
  case KILN_I32: return "int32";
  case KILN_I16: return "int16";
  case KILN_I8: return "int8";
  case KILN_U8: return "uint8";
  case KILN_BOOL: return "bool";
  }
  return "?";
}

nb::dlpack::dtype toDlpack(kiln_dtype d) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) { return nb::dlpack::dtype{uint8_t(code), uint8_t(bits), 1}; };
  switch (d) {
  case KILN_F32: return make(C::Float, 32);
  case KILN_F16: return make(C::Float, 16);
  case KILN_BF16: return make(C::Bfloat, 16);
  case KILN_F64: return make(C::Float, 64);
  case KILN_I64: return make(C::Int, 64);
  case KILN_I32: return make(C::Int, 32);
  case KILN_I16: return make(C::Int, 16);
  case KILN_I8: return make(C::Int, 8);
  case KILN_U8: return make(C::UInt, 8);
  case KILN_BOOL: return make(C::Bool, 8);
  }
  return make(C::Float, 32);
}

std::optional<kiln_dtype> fromDlpack(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  switch (C(t.code)) {
  case C::Float:
    if (t.bits == 32) return KILN_F32;
    if (t.bits == 16) return KILN_F16;
    if (t.bits == 64) return KILN_F64;
    break;
  case C::Bfloat:
    if (t.bits == 16) return KILN_BF16;
    break;
  case C::Int:
    if (t.bits == 64) return KILN_I64;
    if (t.bits == 32) return KILN_I32;
    if (t.bits == 16) return KILN_I16;
    if (t.bits == 8) return KILN_I8;
    break;
  case C::UInt:
    if (t.bits == 8) return KILN_U8;
    break;
  case C::Bool:
    if (t.bits == 8) return KILN_BOOL;
    break;
  default: break;
  }
  return std::nullopt;
}

std::string describe(nb::dlpack::dtype t) {
  static const char *codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string s = t.code < 7 ? codes[t.code] : "dtype" + std::to_string(int(t.code));
  return s + std::to_string(int(t.bits)) + (t.lanes != 1 ? "x" + std::to_string(int(t.lanes)) : "");
}

/// "float32", "f32", "torch.float32", "<f4"-less NumPy names, ...
std::optional<kiln_dtype> parseDtype(std::string name) {
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name.rfind("dtype('", 0) == 0 && name.size() > 9) name = name.substr(7, name.size() - 9);
  static const std::pair<const char *, kiln_dtype> names[] = {
      {"float32", KILN_F32}, {"f32", KILN_F32},   {"float", KILN_F32},   {"float16", KILN_F16},
      {"f16", KILN_F16},     {"half", KILN_F16},  {"bfloat16", KILN_BF16}, {"bf16", KILN_BF16},
      {"float64", KILN_F64}, {"f64", KILN_F64},   {"double", KILN_F64},  {"int64", KILN_I64},
      {"i64", KILN_I64},     {"long", KILN_I64},  {"int32", KILN_I32},   {"i32", KILN_I32},
      {"int", KILN_I32},     {"int16", KILN_I16}, {"i16", KILN_I16},     {"int8", KILN_I8},
      {"i8", KILN_I8},       {"uint8", KILN_U8},  {"ui8", KILN_U8},      {"u8", KILN_U8},
      {"bool", KILN_BOOL},   {"i1", KILN_BOOL}};
  for (const auto &[n, d] : names)
    if (name == n) return d;
  return std::nullopt;
}

kiln_dtype dtypeOf(nb::handle h) {
  std::string name = nb::isinstance<nb::str>(h) ? nb::cast<std::string>(h) : nb::cast<std::string>(nb::str(h));
  if (auto d = parseDtype(name)) return *d;
  invalid("unknown dtype '" + name + "' (kiln takes float32, float16, bfloat16, float64, int64, int32, int16, "
          "int8, uint8, bool)");
}

std::string shapeText(const int64_t *shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) s += (i ? "," : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

// ---- Handles ----------------------------------------------------------------------

/// A runtime; modules and eager contexts hold it. close() ends its use from
/// Python at once; the C runtime is freed then, or, while eager contexts
/// (which must not outlive it) are alive, when the last one goes.
struct RuntimeHandle {
  kiln_runtime *rt = nullptr;
  std::atomic<bool> closed{false};
  std::atomic<int> eagers{0};
  std::mutex mu;

  explicit RuntimeHandle(kiln_runtime *r) : rt(r) {}
  ~RuntimeHandle() {
    if (rt) {
      nb::gil_scoped_release unlocked;
      kiln_runtime_free(rt);
    }
  }
  void checkOpen() const {
    if (closed.load(std::memory_order_relaxed)) invalid("the kiln runtime is closed");
  }
  void close() {
    closed = true;
    std::lock_guard<std::mutex> lock(mu);
    if (rt && eagers.load() == 0) {
      kiln_runtime *r = rt;
      rt = nullptr;
      nb::gil_scoped_release unlocked;
      kiln_runtime_free(r);
    }
  }
};

struct ModuleHandle {
  kiln_module *m = nullptr;
  std::shared_ptr<RuntimeHandle> runtime;
  std::string mlir;  // for traced modules: the recorded MLIR
  ModuleHandle(kiln_module *mod, std::shared_ptr<RuntimeHandle> rt) : m(mod), runtime(std::move(rt)) {}
  ~ModuleHandle() {
    nb::gil_scoped_release unlocked;
    kiln_module_free(m);
  }
};

// Output tensors alive in Python (handed out, not yet freed): a leak check for tests.
std::atomic<int64_t> liveOutputs{0};

enum class Format { kNumpy, kDlpack, kTorch };

Format parseFormat(const std::string &s) {
  if (s == "numpy") return Format::kNumpy;
  if (s == "dlpack") return Format::kDlpack;
  if (s == "torch") return Format::kTorch;
  invalid("output must be 'numpy', 'dlpack' or 'torch', not '" + s + "'");
}

/// Hands a kiln tensor (ownership taken) to Python without a copy.
nb::object toPython(kiln_tensor *t, Format format) {
  size_t rank = kiln_tensor_rank(t);
  const int64_t *dims = kiln_tensor_shape(t);
  size_t shape[16];
  std::vector<size_t> big;
  size_t *sp = shape;
  if (rank > 16) big.resize(rank), sp = big.data();
  for (size_t i = 0; i < rank; ++i) sp[i] = size_t(dims[i]);
  kiln_dtype dtype = kiln_tensor_dtype(t);
  ++liveOutputs;
  nb::capsule owner(t, [](void *p) noexcept {
    kiln_tensor_free(static_cast<kiln_tensor *>(p));
    --liveOutputs;
  });
  void *data = kiln_tensor_data(t);
  switch (format) {
  case Format::kNumpy:
    if (dtype == KILN_BF16)
      invalid("a bfloat16 result has no NumPy dtype; ask for output='torch' or output='dlpack'");
    return nb::ndarray<nb::numpy>(data, rank, sp, owner, nullptr, toDlpack(dtype)).cast();
  case Format::kTorch: return nb::ndarray<nb::pytorch>(data, rank, sp, owner, nullptr, toDlpack(dtype)).cast();
  case Format::kDlpack: return nb::ndarray<>(data, rank, sp, owner, nullptr, toDlpack(dtype)).cast();
  }
  return nb::none();
}

/// A kiln tensor handle freed at scope exit.
struct TensorRef {
  kiln_tensor *t = nullptr;
  TensorRef() = default;
  TensorRef(const TensorRef &) = delete;
  TensorRef(TensorRef &&o) noexcept : t(o.t) { o.t = nullptr; }
  ~TensorRef() { kiln_tensor_free(t); }
  kiln_tensor *release() {
    kiln_tensor *r = t;
    t = nullptr;
    return r;
  }
};

nb::handle numpyModule() {
  static nb::handle np = nb::module_::import_("numpy").release();  // kept for the process's life
  return np;
}

/// Copies a strided array into contiguous memory, last dimension innermost.
void stridedCopy(char *dst, const char *src, size_t rank, const size_t *shape, const int64_t *strides,
                 size_t itemsize) {
  if (rank == 0) {
    std::memcpy(dst, src, itemsize);
    return;
  }
  std::vector<size_t> index(rank, 0);
  size_t total = 1;
  for (size_t i = 0; i < rank; ++i) total *= shape[i];
  for (size_t n = 0; n < total; ++n) {
    const char *p = src;
    for (size_t i = 0; i < rank; ++i) p += int64_t(index[i]) * strides[i] * int64_t(itemsize);
    std::memcpy(dst, p, itemsize);
    dst += itemsize;
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
}

/// What an input becomes: a kiln tensor over the array's memory (kept alive
/// by `array`), or over a contiguous copy.
struct Converted {
  TensorRef tensor;
  nb::ndarray<nb::ro> array;  // the array read in place (keeps its memory alive)
  bool copied = false;
};

/// `label()` names the input in errors ("input 0 ('x') of @main"), built
/// only when one is raised; `want` is the declared dtype, used for Python
/// scalars and lists. `writable`: an out= array, written in place.
template <class Label>
Converted toKiln(nb::handle obj, const Label &label, std::optional<kiln_dtype> want, bool writable = false) {
  Converted c;
  auto what = [&] { return std::string(label()); };
  auto typeName = [&] { return std::string(nb::type_name(obj.type()).c_str()); };
  if (writable) {
    nb::ndarray<> w;
    if (!nb::try_cast(obj, w, false)) {
      if (nb::try_cast(obj, c.array, false)) invalid(what() + ": the array is read-only");
      invalid(what() + ": a " + typeName() + " is not an array kiln can write into (NumPy arrays, DLPack producers)");
    }
    c.array = nb::ndarray<nb::ro>(w);
  } else if (!nb::try_cast(obj, c.array, /*convert=*/false)) {
    if (obj.is_none() || nb::isinstance<nb::str>(obj) || nb::isinstance<nb::bytes>(obj))
      invalid(what() + ": a " + typeName() + " is not an array (kiln takes NumPy arrays and DLPack producers such as "
                       "torch.Tensor, and lists or scalars of numbers)");
    if (nb::hasattr(obj, "detach") && nb::hasattr(obj, "__dlpack__")) {
      // Tensors that require grad refuse DLPack.
      nb::object detached = obj.attr("detach")();
      if (!nb::try_cast(detached, c.array, false)) invalid(what() + ": cannot read this " + typeName() + " through DLPack");
    } else {
      // Lists, scalars and NumPy scalars: through NumPy (lists and Python
      // scalars take the declared dtype).
      nb::object arr;
      try {
        bool plain = !nb::hasattr(obj, "dtype");
        arr = want && plain ? numpyModule().attr("asarray")(obj, "dtype"_a = numpyName(*want))
                            : numpyModule().attr("asarray")(obj);
      } catch (nb::python_error &e) {
        invalid(what() + ": cannot convert a " + typeName() + " to an array (" + e.what() + ")");
      }
      if (!nb::try_cast(arr, c.array, false))
        invalid(what() + ": cannot read a " + typeName() +
                " as an array (kiln takes NumPy arrays and DLPack producers such as torch.Tensor)");
    }
  }
  nb::ndarray<nb::ro> &a = c.array;
  if (a.device_type() != nb::device::cpu::value)
    throw Error(KILN_INVALID_ARGUMENT, what() + ": the array is on device type " + std::to_string(a.device_type()) +
                                           "; kiln's Python API takes host (CPU) memory");
  auto dtype = fromDlpack(a.dtype());
  if (!dtype)
    invalid(what() + ": dtype " + describe(a.dtype()) +
            " is not one kiln takes (float32, float16, bfloat16, float64, int64, int32, int16, int8, uint8, bool)");
  size_t rank = a.ndim();
  int64_t shape[32];
  if (rank > 32) invalid(what() + ": rank " + std::to_string(rank) + " is more than kiln takes (32)");
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = rank; i-- > 0;) {
    shape[i] = int64_t(a.shape(i));
    if (a.shape(i) != 1 && a.stride(i) != expect) contiguous = false;
    expect *= int64_t(a.shape(i));
  }
  size_t bytes = a.nbytes();
  if (contiguous || a.size() == 0) {
    // kiln only reads inputs; an out= array was checked writable above.
    check(kiln_tensor_wrap(*dtype, shape, rank, const_cast<void *>(a.data()), bytes, nullptr, nullptr, &c.tensor.t));
    return c;
  }
  if (writable) invalid(what() + ": an output array must be C-contiguous to be written in place");
  check(kiln_tensor_create(*dtype, shape, rank, &c.tensor.t));
  size_t ushape[32];
  int64_t strides[32];
  for (size_t i = 0; i < rank; ++i) ushape[i] = a.shape(i), strides[i] = a.stride(i);
  stridedCopy(static_cast<char *>(kiln_tensor_data(c.tensor.t)), static_cast<const char *>(a.data()), rank, ushape,
              strides, a.itemsize());
  c.copied = true;
  return c;
}

/// The kiln tensors of converted inputs, in order.
std::vector<kiln_tensor *> handles(const std::vector<Converted> &conv) {
  std::vector<kiln_tensor *> ins(conv.size());
  for (size_t i = 0; i < conv.size(); ++i) ins[i] = conv[i].tensor.t;
  return ins;
}

/// One output as itself (`single`), else a tuple of all.
nb::object pack(std::vector<nb::object> objs, bool single) {
  if (single && objs.size() == 1) return objs[0];
  nb::list l;
  for (nb::object &o : objs) l.append(o);
  return nb::tuple(l);
}

/// A call's results (ownership taken) as Python objects, packed.
nb::object results(const std::vector<kiln_tensor *> &outs, Format format, bool single) {
  std::vector<TensorRef> refs(outs.size());  // freed if a conversion throws
  for (size_t i = 0; i < outs.size(); ++i) refs[i].t = outs[i];
  std::vector<nb::object> objs;
  for (TensorRef &r : refs) objs.push_back(toPython(r.release(), format));
  return pack(std::move(objs), single);
}

struct TensorInfo {
  std::string name;
  kiln_dtype dtype;
  std::vector<int64_t> shape;
  nb::object pyShape() const {
    nb::list l;
    for (int64_t d : shape) l.append(d < 0 ? nb::object(nb::none()) : nb::object(nb::int_(d)));
    return nb::tuple(l);
  }
  std::string repr() const {
    return "TensorInfo(name='" + name + "', dtype='" + numpyName(dtype) + "', shape=" + shapeText(shape.data(), shape.size()) + ")";
  }
};

TensorInfo infoOf(const kiln_tensor_info &i) {
  return TensorInfo{i.name ? i.name : "", i.dtype, std::vector<int64_t>(i.shape, i.shape + i.rank)};
}

/// Input types for prewarm / compile_info: arrays, TensorInfo, or (shape, dtype).
struct Specs {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<kiln_tensor_info> infos;
};

Specs specsOf(const std::vector<nb::object> &items, const std::vector<TensorInfo> &declared) {
  Specs s;
  s.shapes.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    nb::handle it = items[i];
    nb::object shapeObj, dtypeObj;
    if (nb::isinstance<TensorInfo>(it)) {
      const TensorInfo &t = nb::cast<const TensorInfo &>(it);
      s.shapes.push_back(t.shape);
      s.infos.push_back(kiln_tensor_info{nullptr, t.dtype, 0, nullptr});
      continue;
    }
    if (nb::hasattr(it, "shape") && nb::hasattr(it, "dtype")) {
      shapeObj = it.attr("shape");
      dtypeObj = it.attr("dtype");
    } else if ((nb::isinstance<nb::tuple>(it) || nb::isinstance<nb::list>(it)) && nb::len(it) == 2 &&
               !nb::isinstance<nb::int_>(it[1])) {
      shapeObj = it[0];
      dtypeObj = it[1];
    } else {
      shapeObj = nb::borrow(it);  // a shape alone: the declared dtype
    }
    std::vector<int64_t> shape;
    for (nb::handle d : shapeObj) shape.push_back(nb::cast<int64_t>(d));
    kiln_dtype dtype = dtypeObj.is_valid() ? dtypeOf(dtypeObj)
                       : i < declared.size() ? declared[i].dtype
                                             : KILN_F32;
    s.shapes.push_back(std::move(shape));
    s.infos.push_back(kiln_tensor_info{nullptr, dtype, 0, nullptr});
  }
  for (size_t i = 0; i < s.infos.size(); ++i) {
    s.infos[i].rank = s.shapes[i].size();
    s.infos[i].shape = s.shapes[i].data();
  }
  return s;
}

// ---- Asynchronous calls -----------------------------------------------------------

struct CallState {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
};

[[noreturn]] void timedOut(double seconds) {
  PyErr_SetString(PyExc_TimeoutError, ("the kiln call did not finish within " + std::to_string(seconds) + " s").c_str());
  throw nb::python_error();
}

struct Call {
  kiln_call *call = nullptr;
  std::shared_ptr<CallState> state;
  std::shared_ptr<ModuleHandle> module;
  std::vector<Converted> inputs;  // alive until the call has finished
  Format format = Format::kNumpy;
  size_t numOutputs = 0;
  bool single = false;
  bool taken = false;
  nb::object result;
  std::optional<Error> error;

  Call() = default;
  Call(const Call &) = delete;
  Call &operator=(const Call &) = delete;
  ~Call() {
    if (!call) return;
    nb::gil_scoped_release unlocked;
    if (!kiln_call_ready(call)) kiln_call_cancel(call);
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] { return state->ready; });
    lock.unlock();
    kiln_call_free(call);
  }

  bool done() const { return state->ready || kiln_call_ready(call); }

  /// Waits (GIL released) up to `timeout` seconds; false on timeout.
  bool wait(std::optional<double> timeout) {
    nb::gil_scoped_release unlocked;
    std::unique_lock<std::mutex> lock(state->mu);
    if (!timeout) {
      state->cv.wait(lock, [&] { return state->ready; });
      return true;
    }
    return state->cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, *timeout)),
                              [&] { return state->ready; });
  }

  void take() {
    if (taken) return;
    std::vector<kiln_tensor *> outs(numOutputs, nullptr);
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = kiln_call_wait(call, outs.data(), outs.size());
    }
    taken = true;
    if (s) {
      error.emplace(kiln_status_code(s), kiln_status_message(s), kiln_status_location(s));
      kiln_status_free(s);
      for (kiln_tensor *t : outs) kiln_tensor_free(t);
    } else {
      result = results(outs, format, single);
    }
    nb::gil_scoped_release unlocked;  // the inputs' memory may go now
    inputs.clear();
  }

  nb::object get(std::optional<double> timeout) {
    if (!wait(timeout)) timedOut(*timeout);
    take();
    if (error) throw *error;
    return result;
  }
};

// ---- Functions and modules ------------------------------------------------------------

struct Function {
  std::shared_ptr<ModuleHandle> module;
  std::string name;  // "" = main or the only function
  std::vector<TensorInfo> inputs, outputs;

  Function(std::shared_ptr<ModuleHandle> m, std::string n) : module(std::move(m)), name(std::move(n)) {
    auto read = [&](auto count, auto info, std::vector<TensorInfo> &into) {
      size_t n = 0;
      check(count(module->m, fname(), &n));
      for (size_t i = 0; i < n; ++i) {
        kiln_tensor_info t;
        check(info(module->m, fname(), i, &t));
        into.push_back(infoOf(t));
      }
    };
    read(kiln_module_input_count, kiln_module_input_info, inputs);
    read(kiln_module_output_count, kiln_module_output_info, outputs);
  }
  const char *fname() const { return name.empty() ? nullptr : name.c_str(); }
  std::string signature() const {
    auto list = [](const std::vector<TensorInfo> &ts) {
      std::string out;
      for (const TensorInfo &t : ts)
        out += (out.empty() ? "" : ", ") + t.name + ": " + numpyName(t.dtype) + shapeText(t.shape.data(), t.shape.size());
      return out;
    };
    return (name.empty() ? "main" : name) + "(" + list(inputs) + ") -> (" + list(outputs) + ")";
  }
  std::string label() const { return name.empty() ? std::string("the module's main function") : "@" + name; }
  std::string inputLabel(size_t i) const {
    return "input " + std::to_string(i) + (i < inputs.size() ? " ('" + inputs[i].name + "')" : "") + " of " + label();
  }

  /// Orders positional and keyword inputs by the signature.
  std::vector<nb::handle> order(nb::handle args, nb::handle kwargs) const {
    size_t npos = args.is_valid() ? nb::len(args) : 0;
    if (npos > inputs.size())
      invalid(label() + " takes " + std::to_string(inputs.size()) + " input(s), " + std::to_string(npos) + " given");
    std::vector<nb::handle> ordered(inputs.size());
    for (size_t i = 0; i < npos; ++i) ordered[i] = args[i];
    if (kwargs.is_valid() && nb::len(kwargs) > 0) {
      for (auto [k, v] : nb::borrow<nb::dict>(kwargs)) {
        std::string key = nb::cast<std::string>(k);
        size_t i = 0;
        while (i < inputs.size() && inputs[i].name != key) ++i;
        if (i == inputs.size()) {
          std::string names;
          for (const auto &in : inputs) names += (names.empty() ? "" : ", ") + in.name;
          invalid(label() + " has no input named '" + key + "' (its inputs: " + names + ")");
        }
        if (ordered[i].is_valid()) invalid(label() + ": input '" + key + "' given twice");
        ordered[i] = v;
      }
    }
    for (size_t i = 0; i < ordered.size(); ++i)
      if (!ordered[i].is_valid()) invalid(label() + ": input '" + inputs[i].name + "' is missing");
    return ordered;
  }

  std::vector<Converted> convert(const std::vector<nb::handle> &ordered) const {
    std::vector<Converted> conv;
    conv.reserve(ordered.size());
    for (size_t i = 0; i < ordered.size(); ++i)
      conv.push_back(toKiln(ordered[i], [&] { return inputLabel(i); }, inputs[i].dtype));
    return conv;
  }

  nb::object run(const std::vector<nb::handle> &ordered, nb::handle out, Format format, bool single,
                 std::optional<double> timeout) {
    module->runtime->checkOpen();
    std::vector<Converted> conv = convert(ordered);
    std::vector<kiln_tensor *> ins = handles(conv);
    size_t n = outputs.size();
    std::vector<kiln_tensor *> outs(n, nullptr);
    std::vector<Converted> given;  // out= arrays, written in place
    std::vector<nb::handle> givenObjs;
    if (out.is_valid() && !out.is_none()) {
      if (nb::isinstance<nb::list>(out) || nb::isinstance<nb::tuple>(out))
        for (nb::handle o : out) givenObjs.push_back(o);
      else
        givenObjs.push_back(out);
      if (givenObjs.size() != n)
        invalid(label() + " has " + std::to_string(n) + " output(s); out= gives " + std::to_string(givenObjs.size()));
      for (size_t i = 0; i < n; ++i) {
        given.push_back(toKiln(givenObjs[i], [&] { return "out[" + std::to_string(i) + "] of " + label(); },
                               std::nullopt, true));
        outs[i] = given.back().tensor.t;
      }
    }
    kiln_status *s;
    if (timeout && *timeout > 0) {
      kiln_call *call = nullptr;
      {
        nb::gil_scoped_release unlocked;
        s = kiln_module_call_async(module->m, fname(), ins.data(), ins.size(), *timeout, &call);
        if (!s) s = kiln_call_wait(call, outs.data(), n);
        kiln_call_free(call);
      }
    } else {
      nb::gil_scoped_release unlocked;
      s = kiln_module_call(module->m, fname(), ins.data(), ins.size(), outs.data(), n);
    }
    if (s && given.empty())
      for (kiln_tensor *&t : outs) kiln_tensor_free(t), t = nullptr;
    check(s);
    if (!given.empty()) {
      std::vector<nb::object> objs;
      for (nb::handle o : givenObjs) objs.push_back(nb::borrow(o));
      return pack(std::move(objs), single);
    }
    return results(outs, format, single);
  }

  std::unique_ptr<Call> runAsync(const std::vector<nb::handle> &ordered, Format format, bool single,
                                 std::optional<double> timeout) {
    module->runtime->checkOpen();
    auto c = std::make_unique<Call>();
    c->inputs = convert(ordered);
    c->module = module;
    c->format = format;
    c->numOutputs = outputs.size();
    c->single = single;
    c->state = std::make_shared<CallState>();
    std::vector<kiln_tensor *> ins = handles(c->inputs);
    kiln_call *call = nullptr;
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = kiln_module_call_async(module->m, fname(), ins.data(), ins.size(), timeout.value_or(0), &call);
    }
    check(s);
    c->call = call;
    auto *ctx = new std::shared_ptr<CallState>(c->state);
    kiln_call_on_ready(
        call,
        [](void *p) {
          auto *sp = static_cast<std::shared_ptr<CallState> *>(p);
          std::shared_ptr<CallState> st = std::move(*sp);
          delete sp;
          std::lock_guard<std::mutex> lock(st->mu);
          st->ready = true;
          st->cv.notify_all();
        },
        ctx);
    return c;
  }

  /// For bench/python: `n` calls on these inputs made from C++ in a loop
  /// (the GIL released), each one's seconds: the same call without Python.
  std::vector<double> timeCalls(const std::vector<nb::handle> &ordered, size_t n) {
    module->runtime->checkOpen();
    std::vector<Converted> conv = convert(ordered);
    std::vector<kiln_tensor *> ins = handles(conv);
    std::vector<double> seconds(n);
    std::vector<kiln_tensor *> outs(outputs.size(), nullptr);
    kiln_status *s = nullptr;
    {
      nb::gil_scoped_release unlocked;
      for (size_t k = 0; k < n && !s; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        s = kiln_module_call(module->m, fname(), ins.data(), ins.size(), outs.data(), outs.size());
        for (kiln_tensor *&t : outs) kiln_tensor_free(t), t = nullptr;
        seconds[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    check(s);
    return seconds;
  }

  void prewarm(const std::vector<nb::object> &items) {
    module->runtime->checkOpen();
    Specs s = specsOf(items, inputs);
    nb::gil_scoped_release unlocked;
    check(kiln_module_prewarm(module->m, fname(), s.infos.data(), s.infos.size()));
  }

  nb::dict compileInfo(const std::vector<nb::object> &items) {
    module->runtime->checkOpen();
    Specs s = specsOf(items, inputs);
    kiln_compile_info ci{};
    {
      nb::gil_scoped_release unlocked;
      check(kiln_module_compile_info(module->m, fname(), s.infos.data(), s.infos.size(), &ci));
    }
    nb::dict d;
    d["from_disk_cache"] = bool(ci.from_disk_cache);
    d["kernels_compiled"] = ci.kernels_compiled;
    d["kernels_shared"] = ci.kernels_shared;
    d["placements_measured"] = ci.placements_measured;
    d["kernels_chosen"] = ci.kernels_chosen;
    d["jit_fallbacks"] = ci.jit_fallbacks;
    d["compile_ms"] = ci.compile_ms;
    d["placement"] = ci.placement ? ci.placement : "";
    return d;
  }

  nb::tuple batchSeparable() const {
    int sep = 0;
    const char *why = nullptr;
    check(kiln_module_batch_separable(module->m, fname(), &sep, &why));
    return nb::make_tuple(bool(sep), why ? nb::str(why) : nb::str(""));
  }
};

struct Module {
  std::shared_ptr<ModuleHandle> handle;
  std::optional<Function> main;  // none when the module has no default function
  nb::dict functions;

  explicit Module(std::shared_ptr<ModuleHandle> h) : handle(std::move(h)) {
    size_t n = kiln_module_function_count(handle->m);
    for (size_t i = 0; i < n; ++i) {
      const char *name = kiln_module_function_name(handle->m, i);
      functions[name] = nb::cast(Function(handle, name));
    }
    // The library's default (main, or the only function), by its name;
    // none where several functions and no main: call m.functions[name].
    const char *resolved = nullptr;
    if (kiln_status *s = kiln_module_resolve_function(handle->m, nullptr, &resolved)) kiln_status_free(s);
    else main.emplace(handle, resolved);
  }
  Function &fn() {
    if (!main) {
      std::string names;
      for (auto [k, v] : functions) names += (names.empty() ? "" : ", ") + nb::cast<std::string>(k);
      invalid("the module has no function 'main' and more than one function (" + names +
              "); call one as module.functions[name]");
    }
    return *main;
  }
};

nb::dict cacheStats(const kiln_cache_stats &c) {
  nb::dict d;
  d["memory_hits"] = c.memory_hits;
  d["memory_misses"] = c.memory_misses;
  d["disk_hits"] = c.disk_hits;
  d["compiles"] = c.compiles;
  d["compile_failures"] = c.compile_failures;
  d["jit_fallbacks"] = c.jit_fallbacks;
  d["compile_ms"] = c.compile_ms;
  d["disk_load_ms"] = c.disk_load_ms;
  d["disk_writes"] = c.disk_writes;
  d["disk_rejected"] = c.disk_rejected;
  return d;
}

// ---- Runtime ----------------------------------------------------------------------

struct Runtime {
  std::shared_ptr<RuntimeHandle> handle;

  explicit Runtime(const std::vector<std::pair<std::string, std::string>> &options) {
    std::unique_ptr<kiln_options, void (*)(kiln_options *)> opts(kiln_options_create(), kiln_options_free);
    for (const auto &[k, v] : options) check(kiln_options_set(opts.get(), k.c_str(), v.c_str()));
    kiln_runtime *rt = nullptr;
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = kiln_runtime_create(opts.get(), &rt);
    }
    check(s);
    handle = std::make_shared<RuntimeHandle>(rt);
  }
  kiln_runtime *get() const {
    handle->checkOpen();
    return handle->rt;
  }
  Module wrap(kiln_module *m) { return Module(std::make_shared<ModuleHandle>(m, handle)); }

  /// `load(runtime, &module)` with the GIL released, as a Module.
  template <class Load> Module load(Load load) {
    kiln_runtime *rt = get();
    kiln_module *m = nullptr;
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = load(rt, &m);
    }
    check(s);
    return wrap(m);
  }
  Module loadFile(const std::string &path) {
    return load([&](kiln_runtime *rt, kiln_module **m) { return kiln_runtime_load_file(rt, path.c_str(), m); });
  }
  Module loadMemory(nb::bytes data, const std::string &name) {
    const void *p = data.c_str();
    size_t n = data.size();
    return load([&](kiln_runtime *rt, kiln_module **m) { return kiln_runtime_load_memory(rt, p, n, name.c_str(), m); });
  }
  Module loadBuiltin(const std::string &name) {
    return load([&](kiln_runtime *rt, kiln_module **m) { return kiln_runtime_load_builtin(rt, name.c_str(), m); });
  }
};

// ---- Eager -------------------------------------------------------------------------

struct EagerHandle {
  kiln_eager *e = nullptr;
  std::shared_ptr<RuntimeHandle> runtime;
  EagerHandle(kiln_eager *eager, std::shared_ptr<RuntimeHandle> rt) : e(eager), runtime(std::move(rt)) {
    ++runtime->eagers;
  }
  ~EagerHandle() {
    {
      nb::gil_scoped_release unlocked;
      kiln_eager_free(e);
    }
    --runtime->eagers;
    if (runtime->closed) runtime->close();
  }
};

struct Value {
  kiln_value *v = nullptr;
  std::shared_ptr<EagerHandle> eager;
  Value(kiln_value *value, std::shared_ptr<EagerHandle> e) : v(value), eager(std::move(e)) {}
  Value(const Value &) = delete;
  ~Value() { kiln_value_free(v); }
  kiln_tensor_info info() const {
    kiln_tensor_info i{};
    kiln_value_info(v, &i);
    return i;
  }
  nb::object shape() const {
    kiln_tensor_info i = info();
    nb::list l;
    for (size_t k = 0; k < i.rank; ++k) l.append(i.shape[k]);
    return nb::tuple(l);
  }
  std::string dtype() const { return numpyName(info().dtype); }
  nb::object get(Format format) const {
    kiln_tensor *t = nullptr;
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = kiln_value_await(v, &t);
    }
    check(s);
    return toPython(t, format);
  }
};

struct Eager {
  std::shared_ptr<EagerHandle> handle;

  explicit Eager(Runtime &rt) {
    kiln_eager *e = nullptr;
    check(kiln_eager_create(rt.get(), &e));
    handle = std::make_shared<EagerHandle>(e, rt.handle);
  }

  /// A value from a Value or anything toKiln takes (copied: eager values may
  /// outlive the call that made them).
  std::shared_ptr<Value> valueOf(nb::handle h, const std::string &what) {
    if (nb::isinstance<Value>(h)) return nb::cast<std::shared_ptr<Value>>(h);
    Converted c = toKiln(h, [&] { return what; }, std::nullopt);
    TensorRef copy;
    const int64_t *shape = kiln_tensor_shape(c.tensor.t);
    check(kiln_tensor_create(kiln_tensor_dtype(c.tensor.t), shape, kiln_tensor_rank(c.tensor.t), &copy.t));
    std::memcpy(kiln_tensor_data(copy.t), kiln_tensor_data(c.tensor.t), kiln_tensor_byte_size(c.tensor.t));
    kiln_value *v = nullptr;
    check(kiln_value_from_tensor(copy.t, &v));
    return std::make_shared<Value>(v, handle);
  }

  std::shared_ptr<Value> execute(const std::string &op, nb::args args, nb::kwargs attrs) {
    handle->runtime->checkOpen();
    std::vector<std::shared_ptr<Value>> values;
    for (size_t i = 0; i < nb::len(args); ++i)
      values.push_back(valueOf(args[i], "operand " + std::to_string(i) + " of " + op));
    std::unique_ptr<kiln_attrs, void (*)(kiln_attrs *)> a(kiln_attrs_create(), kiln_attrs_free);
    for (auto [k, v] : attrs) {
      std::string key = nb::cast<std::string>(k);
      if (nb::isinstance<nb::bool_>(v) || nb::isinstance<nb::int_>(v))
        check(kiln_attrs_set_int(a.get(), key.c_str(), nb::cast<int64_t>(v)));
      else if (nb::isinstance<nb::float_>(v))
        check(kiln_attrs_set_float(a.get(), key.c_str(), nb::cast<double>(v)));
      else if (nb::isinstance<nb::str>(v))
        check(kiln_attrs_set_string(a.get(), key.c_str(), nb::cast<std::string>(v).c_str()));
      else {
        std::vector<int64_t> ints;
        try {
          for (nb::handle x : v) ints.push_back(nb::cast<int64_t>(x));
        } catch (const std::exception &) {
          invalid(op + ": attribute '" + key + "' must be an int, a float, a string or a sequence of ints");
        }
        check(kiln_attrs_set_ints(a.get(), key.c_str(), ints.data(), ints.size()));
      }
    }
    std::vector<kiln_value *> ins;
    for (auto &v : values) ins.push_back(v->v);
    kiln_value *out = nullptr;
    check(kiln_eager_execute(handle->e, op.c_str(), ins.data(), ins.size(), a.get(), &out));
    return std::make_shared<Value>(out, handle);
  }

  struct TraceContext {
    Eager *self;
    nb::handle fn;
    std::optional<nb::python_error> pythonError;
    std::optional<Error> kilnError;
  };

  Module trace(nb::handle fn, const std::vector<nb::object> &examples) {
    handle->runtime->checkOpen();
    Specs s = specsOf(examples, {});
    TraceContext ctx{this, fn, std::nullopt, std::nullopt};
    kiln_module *m = nullptr;
    char *mlir = nullptr;
    kiln_status *st = kiln_eager_trace(
        handle->e,
        [](kiln_eager *, kiln_value *const *inputs, size_t n, kiln_values *outputs, void *user) -> kiln_status * {
          auto *c = static_cast<TraceContext *>(user);
          try {
            nb::list args;
            for (size_t i = 0; i < n; ++i) {
              kiln_value *v = nullptr;
              check(kiln_value_share(inputs[i], &v));
              args.append(nb::cast(std::make_shared<Value>(v, c->self->handle)));
            }
            nb::object r = c->fn(*nb::tuple(args));
            std::vector<nb::handle> results;
            if (nb::isinstance<nb::tuple>(r) || nb::isinstance<nb::list>(r))
              for (nb::handle x : r) results.push_back(x);
            else
              results.push_back(r);
            for (nb::handle x : results) {
              if (!nb::isinstance<Value>(x))
                invalid("kiln.trace: the traced function must return kiln values (results of eager ops), got " +
                        std::string(nb::type_name(x.type()).c_str()));
              check(kiln_values_push(outputs, nb::cast<Value &>(x).v));
            }
            return nullptr;
          } catch (nb::python_error &e) {
            c->pythonError.emplace(std::move(e));
            return kiln_status_create(KILN_INVALID_ARGUMENT, "the traced Python function raised an exception");
          } catch (const Error &e) {
            c->kilnError = e;
            return kiln_status_create(e.code, e.message.c_str());
          }
        },
        &ctx, s.infos.data(), s.infos.size(), &m, &mlir);
    if (ctx.pythonError) {
      kiln_status_free(st);
      ctx.pythonError->restore();
      throw nb::python_error();
    }
    check(st);
    Module mod = Module(std::make_shared<ModuleHandle>(m, handle->runtime));
    if (mlir) {
      mod.handle->mlir = mlir;
      kiln_string_free(mlir);
    }
    return mod;
  }
};

// ---- Profiler -----------------------------------------------------------------------

struct Profiler {
  kiln_profiler *p = nullptr;
  std::shared_ptr<RuntimeHandle> runtime;
  explicit Profiler(Runtime &rt) : runtime(rt.handle) { check(kiln_profiler_start(rt.get(), &p)); }
  ~Profiler() { kiln_profiler_free(p); }
  nb::tuple stop(std::optional<std::string> trace, std::optional<std::string> report) {
    char *table = nullptr, *json = nullptr;
    kiln_status *s;
    {
      nb::gil_scoped_release unlocked;
      s = kiln_profiler_stop_json(p, trace ? trace->c_str() : nullptr, report ? report->c_str() : nullptr, &table,
                                  &json);
    }
    check(s);
    nb::tuple r = nb::make_tuple(nb::str(table ? table : ""), nb::str(json ? json : "{}"));
    kiln_string_free(table);
    kiln_string_free(json);
    return r;
  }
};

Format formatArg(const std::string &s) { return parseFormat(s); }

/// `inputs` of run()/run_async(): a sequence, or a dict by input name.
std::vector<nb::handle> ordered(Function &f, nb::handle inputs) {
  if (nb::isinstance<nb::dict>(inputs)) return f.order(nb::tuple(), inputs);
  return f.order(nb::tuple(nb::borrow(inputs)), nb::handle());
}

std::vector<nb::object> objects(nb::args args) {
  std::vector<nb::object> items;
  for (nb::handle h : args) items.push_back(nb::borrow(h));
  return items;
}

/// The call forms, on Function and on Module (its main function).
template <class Class, class Get> void bindCalls(Class &cls, Get get) {
  using T = typename Class::Type;
  cls.def(
         "__call__",
         [get](T &self, nb::args args, nb::kwargs kwargs) {
           Function &f = get(self);
           return f.run(f.order(args, kwargs), nb::handle(), Format::kNumpy, true, std::nullopt);
         },
         "Calls the function on arrays (positional, or keywords by input name); one output is returned as an "
         "array, several as a tuple")
      .def(
          "run",
          [get](T &self, nb::object inputs, nb::object out, const std::string &output, std::optional<double> timeout) {
            Function &f = get(self);
            return f.run(ordered(f, inputs), out, formatArg(output), false, timeout);
          },
          "inputs"_a, "out"_a = nb::none(), "output"_a = "numpy", "timeout"_a = nb::none(),
          "Calls with inputs as a sequence or a dict by name; returns a tuple of outputs. out=: arrays the results "
          "are written into (returned); output='numpy' | 'dlpack' | 'torch'; timeout in seconds")
      .def(
          "call_async",
          [get](T &self, nb::args args, nb::kwargs kwargs) {
            Function &f = get(self);
            return f.runAsync(f.order(args, kwargs), Format::kNumpy, true, std::nullopt);
          },
          "Starts a call and returns a kiln.Call at once")
      .def(
          "run_async",
          [get](T &self, nb::object inputs, const std::string &output, std::optional<double> timeout) {
            Function &f = get(self);
            return f.runAsync(ordered(f, inputs), formatArg(output), false, timeout);
          },
          "inputs"_a, "output"_a = "numpy", "timeout"_a = nb::none())
      .def("batch_separable", [get](T &self) { return get(self).batchSeparable(); },
           "(separable, why): whether batch items are computed apart (requests may be merged along dim 0)")
      .def(
          "prewarm", [get](T &self, nb::args specs) { get(self).prewarm(objects(specs)); },
          "Compiles for these input types without running: arrays, TensorInfo, (shape, dtype) or shapes")
      .def(
          "compile_info", [get](T &self, nb::args specs) { return get(self).compileInfo(objects(specs)); },
          "What was compiled for these input types (compiling it if it was not)")
      .def(
          "_time_calls",
          [get](T &self, nb::object inputs, size_t n) {
            Function &f = get(self);
            return f.timeCalls(ordered(f, inputs), n);
          },
          "inputs"_a, "n"_a, "seconds of each of n calls made from C++ (bench/python)");
}

}  // namespace

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's binding over its C API (import kiln, not this module)";
  nb::register_exception_translator([](const std::exception_ptr &p, void *) {
    try {
      std::rethrow_exception(p);
    } catch (const Error &e) {
      raisePython(e);
    }
  });

  m.def("_set_error_classes", [](nb::dict classes) {
    for (auto [k, v] : classes) {
      int code = nb::cast<int>(k);
      if (code >= 1 && code <= KILN_INTERNAL) errorClasses[code] = v.inc_ref();
    }
  });
  m.def("_live_outputs", [] { return liveOutputs.load(); }, "kiln tensors handed to Python and not yet freed");
  m.def(
      "_input_address",
      [](nb::handle obj) {
        Converted c = toKiln(obj, [] { return "array"; }, std::nullopt);
        return nb::make_tuple(uintptr_t(kiln_tensor_data(c.tensor.t)), c.copied);
      },
      "the address kiln reads an array at, and whether it copied it (for tests)");
  m.def("version", [] { return std::string(kiln_version()); });
  m.def("builtin_models", [] {
    std::vector<std::string> names;
    for (size_t i = 0; const char *n = kiln_builtin_model_name(i); ++i) names.push_back(n);
    return names;
  });
  m.def("code_name", [](int code) { return std::string(kiln_code_name(kiln_code(code))); });

  nb::class_<TensorInfo>(m, "TensorInfo", "A function input's or output's name, dtype and shape (None: dynamic)")
      .def_ro("name", &TensorInfo::name)
      .def_prop_ro("dtype", [](const TensorInfo &t) { return std::string(numpyName(t.dtype)); })
      .def_prop_ro("shape", &TensorInfo::pyShape)
      .def("__repr__", &TensorInfo::repr);

  nb::class_<Call>(m, "Call", "An asynchronous call: result(), done(), cancel()")
      .def("result", &Call::get, "timeout"_a = nb::none(),
           "Waits (the GIL released) and returns the outputs; raises kiln.Error on failure, TimeoutError when "
           "`timeout` seconds pass first")
      .def("done", &Call::done)
      .def(
          "cancel",
          [](Call &c) {
            kiln_call_cancel(c.call);
            return !c.done();
          },
          "Stops launching the call's remaining steps; it then fails with kiln.CancelledError")
      .def(
          "exception",
          [](Call &c, std::optional<double> timeout) -> nb::object {
            if (!c.wait(timeout)) timedOut(*timeout);
            c.take();
            if (!c.error) return nb::none();
            raisePython(*c.error);
            nb::python_error err;
            return nb::borrow(err.value());
          },
          "timeout"_a = nb::none());

  auto function = nb::class_<Function>(m, "Function", "One function of a module; call it on arrays")
                      .def_ro("name", &Function::name)
                      .def_ro("inputs", &Function::inputs)
                      .def_ro("outputs", &Function::outputs)
                      .def("__repr__", [](const Function &f) { return "kiln.Function(" + f.signature() + ")"; })
                      ;
  bindCalls(function, [](Function &f) -> Function & { return f; });

  auto module = nb::class_<Module>(m, "Module", "A loaded model: call it (its main function) or module.functions[name]");
  module.def_ro("functions", &Module::functions)
      .def_prop_ro("main", [](Module &mod) { return &mod.fn(); }, nb::rv_policy::reference_internal)
      .def_prop_ro("mlir", [](Module &mod) { return mod.handle->mlir; })
      .def("__repr__",
           [](Module &mod) {
             std::string out;
             for (auto [k, v] : mod.functions) out += (out.empty() ? "" : "; ") + nb::cast<Function &>(v).signature();
             return "kiln.Module(" + out + ")";
           })
      .def("stats", [](Module &mod) {
        kiln_module_stats s{};
        kiln_module_stats_get(mod.handle->m, &s);
        nb::dict d;
        d["functions_compiled"] = s.functions_compiled;
        d["pipeline_runs"] = s.pipeline_runs;
        return d;
      })
      .def("tier_stats", [](Module &mod) {
        kiln_tier_stats s{};
        kiln_module_tier_stats_get(mod.handle->m, &s);
        nb::dict d;
        d["kernel_plan_calls"] = s.kernel_plan_calls;
        d["background_compiles"] = s.background_compiles;
        d["swaps"] = s.swaps;
        d["failures"] = s.failures;
        d["range_calls"] = s.range_calls;
        d["hot_size_compiles"] = s.hot_size_compiles;
        d["range_kept"] = s.range_kept;
        return d;
      })
      .def("wait_background_compiles", [](Module &mod) {
        nb::gil_scoped_release unlocked;
        kiln_module_wait_background_compiles(mod.handle->m);
      })
      .def_prop_ro("inputs", [](Module &mod) { return mod.fn().inputs; })
      .def_prop_ro("outputs", [](Module &mod) { return mod.fn().outputs; });
  bindCalls(module, [](Module &mod) -> Function & { return mod.fn(); });

  nb::class_<Runtime>(m, "_Runtime")
      .def(nb::init<const std::vector<std::pair<std::string, std::string>> &>())
      .def("load_file", &Runtime::loadFile)
      .def("load_memory", &Runtime::loadMemory)
      .def("load_builtin", &Runtime::loadBuiltin)
      .def("close", [](Runtime &r) { r.handle->close(); })
      .def_prop_ro("closed", [](Runtime &r) { return r.handle->closed.load(); })
      .def_prop_ro("target", [](Runtime &r) { return std::string(kiln_runtime_target(r.get())); })
      .def("cache_stats", [](Runtime &r) {
        kiln_cache_stats c{};
        kiln_runtime_cache_stats(r.get(), &c);
        return cacheStats(c);
      });

  nb::class_<Value>(m, "Value", "An eager op's result: its type at once, its value when computed")
      .def_prop_ro("shape", &Value::shape)
      .def_prop_ro("dtype", &Value::dtype)
      .def("numpy", [](Value &v) { return v.get(Format::kNumpy); }, "Waits for the value; a NumPy array")
      .def("get", [](Value &v, const std::string &output) { return v.get(formatArg(output)); }, "output"_a = "numpy")
      .def("__repr__", [](Value &v) {
        kiln_tensor_info i = v.info();
        return "kiln.Value(" + std::string(numpyName(i.dtype)) + shapeText(i.shape, i.rank) + ")";
      });

  nb::class_<Eager>(m, "Eager", "Eager execution: TOSA ops run one by one, as graphs run them")
      .def(nb::init<Runtime &>())
      .def("execute", &Eager::execute, "op"_a, "args"_a, "attrs"_a,
           "Runs op (e.g. 'tosa.add') on values or arrays; attributes as keywords")
      .def("trace", [](Eager &e, nb::handle fn, nb::args examples) { return e.trace(fn, objects(examples)); });

  nb::class_<Profiler>(m, "_Profiler")
      .def(nb::init<Runtime &>())
      .def("stop", &Profiler::stop, "trace"_a = nb::none(), "report"_a = nb::none());
}
