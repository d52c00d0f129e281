// kiln's C API (api/include/kiln/kiln_c.h) over the C++ runtime: the only
// symbols libkiln.so exports. Every entry point catches what the runtime
// below may throw (std::bad_alloc, std::system_error) so that nothing
// unwinds into C; errors come back as kiln_status objects.
#include "kiln/kiln_c.h"

#include "api/Eager.h"
#include "api/Kernels.h"
#include "api/Kiln.h"
#include "api/Profiler.h"
#include "api/impl/WhenAllAvailable.h"
#include "lowering/models/BuiltinModels.h"
#include "jit/CompileService.h"
#include "jit/Compiler.h"
#include "ops/Placement.h"
#include "runtime/Error.h"
#include "runtime/FileIO.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <string>
#include <system_error>
#include <vector>

using kiln::ErrorCode;
using kiln::Status;

struct kiln_status {
  Status status;
};

struct kiln_tensor {
  kiln::Tensor tensor;
  bool elementAligned = true;  // data aligned to the element size (else calls copy it)
};

struct kiln_options {
  kiln::RuntimeOptions options;
};

struct kiln_runtime {
  std::unique_ptr<kiln::Runtime> runtime;
  std::string target;
};

namespace {

/// A function's names as the public API gives them (defaults filled in).
struct FunctionNames {
  std::vector<std::string> inputs, outputs;
};

}  // namespace

struct kiln_module {
  std::unique_ptr<kiln::Module> module;
  double callTimeoutSeconds = 0;  // the runtime's (RuntimeOptions::callTimeoutSeconds)
  std::map<std::string, FunctionNames> names;
  std::mutex mu;
  std::map<std::string, std::string> placements;  // kiln_compile_info::placement strings, by key
};

struct kiln_call {
  std::vector<kiln::AsyncValueRef<kiln::Tensor>> results;
  std::shared_ptr<kiln::CancellationToken> cancel;
};

struct kiln_profiler {
  std::unique_ptr<kiln::Profiler> profiler;
};

struct kiln_attrs {
  kiln::ops::AttrMap owned;
  const kiln::ops::AttrMap *view = nullptr;  // a kernel's attributes (not owned)
  const kiln::ops::AttrMap &map() const { return view ? *view : owned; }
};

struct kiln_eager {
  kiln_runtime *runtime;
  std::unique_ptr<kiln::eager::Context> context;
};

struct kiln_value {
  kiln::eager::EagerTensor value;
};

struct kiln_values {
  std::vector<kiln::eager::EagerTensor> values;
};

struct kiln_types {
  std::vector<kiln::TensorType> types;
};

struct kiln_kernel_context {
  const kiln::KernelArgs *args;
  kiln_attrs attrs;  // a view of args->attrs
};

namespace {

/// Returned when there is no memory even for a status (never deleted).
kiln_status outOfMemory{Status{ErrorCode::kResourceExhausted, "out of memory", {}}};

kiln_status *make(ErrorCode code, std::string message, std::string location = {}) {
  try {
    return new kiln_status{Status{code, std::move(message), std::move(location)}};
  } catch (...) {
    return &outOfMemory;
  }
}

kiln_status *fromError(llvm::Error err) {
  if (!err) return nullptr;
  Status s = kiln::toStatus(std::move(err));
  return make(s.code, std::move(s.message), std::move(s.location));
}

kiln_status *invalid(std::string message) { return make(ErrorCode::kInvalidArgument, std::move(message)); }

/// Runs `body` (returning kiln_status*), turning exceptions into statuses.
template <typename F> kiln_status *guard(const char *where, F &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return make(ErrorCode::kResourceExhausted, std::string(where) + ": out of memory");
  } catch (const std::system_error &e) {
    return make(ErrorCode::kResourceExhausted, std::string(where) + ": " + e.what());
  } catch (const std::exception &e) {
    return make(ErrorCode::kInternal, std::string(where) + ": " + e.what());
  } catch (...) {
    return make(ErrorCode::kInternal, std::string(where) + ": unknown exception");
  }
}

constexpr kiln::DType kDTypes[] = {kiln::DType::f32, kiln::DType::f16, kiln::DType::bf16, kiln::DType::f64,
                                   kiln::DType::i64, kiln::DType::i32, kiln::DType::i16, kiln::DType::i8,
                                   kiln::DType::u8,  kiln::DType::i1};

std::optional<kiln::DType> toDType(kiln_dtype d) {
  if (int(d) < 0 || size_t(d) >= std::size(kDTypes)) return std::nullopt;
  return kDTypes[d];
}

kiln_dtype fromDType(kiln::DType d) {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (kDTypes[i] == d) return kiln_dtype(i);
  return KILN_F32;
}

/// A tensor type given through the C API as dtype, shape and rank, checked
/// (errors start with `what`).
kiln_status *tensorType(const std::string &what, kiln_dtype dtype, const int64_t *shape, size_t rank,
                        kiln::TensorType &out) {
  auto dt = toDType(dtype);
  if (!dt) return invalid(what + ": unknown dtype " + std::to_string(int(dtype)));
  if (rank > 0 && !shape) return invalid(std::string(what) + ": shape is NULL with rank " + std::to_string(rank));
  if (rank > 64) return invalid(std::string(what) + ": rank " + std::to_string(rank) + " is more than 64");
  for (size_t i = 0; i < rank; ++i)
    if (shape[i] < 0)
      return invalid(std::string(what) + ": dimension " + std::to_string(i) + " is " + std::to_string(shape[i]) +
                     " (sizes must be >= 0)");
  if (kiln::numElements(llvm::ArrayRef<int64_t>(shape, rank)) == kiln::kSizeOverflow)
    return invalid(std::string(what) + ": " + kiln::shapeToString(llvm::ArrayRef<int64_t>(shape, rank)) +
                   " has more elements than 64 bits can count");
  out.dtype = *dt;
  out.shape.assign(shape, shape + rank);
  return nullptr;
}

/// A loaded module as the C API hands it out (calls get the runtime's
/// call timeout unless they give their own).
kiln_module *newModule(const kiln_runtime *r, std::unique_ptr<kiln::Module> m) {
  return new kiln_module{std::move(m), r->runtime->options().callTimeoutSeconds, {}, {}, {}};
}

/// The function a C caller means: NULL or "" = main, else the only one.
llvm::Expected<const kiln::FunctionSignature *> resolve(const kiln::Module &m, const char *function) {
  llvm::StringRef name = function ? function : "";
  if (const kiln::FunctionSignature *s = m.resolve(name)) return s;
  if (!name.empty()) return kiln::noSuchFunction(name, m.functions());
  return kiln::error(ErrorCode::kInvalidArgument,
                     "the module has no @main and more than one function (%s): name the function to call",
                     kiln::functionNames(m.functions()).c_str());
}

const FunctionNames &namesOf(kiln_module *m, const kiln::FunctionSignature &sig) {
  std::lock_guard<std::mutex> lock(m->mu);
  auto [it, inserted] = m->names.try_emplace(sig.name);
  if (inserted) {
    for (size_t i = 0; i < sig.args.size(); ++i)
      it->second.inputs.push_back(sig.args[i].name.empty() ? "input_" + std::to_string(i) : sig.args[i].name);
    for (size_t i = 0; i < sig.results.size(); ++i) {
      const std::string name = i < sig.resultNames.size() ? sig.resultNames[i] : std::string();
      it->second.outputs.push_back(name.empty() ? "output_" + std::to_string(i) : name);
    }
  }
  return it->second;
}

void describe(const std::string &name, const kiln::TensorType &type, kiln_tensor_info *out) {
  out->name = name.c_str();
  out->dtype = fromDType(type.dtype);
  out->rank = type.shape.size();
  static_assert(kiln::kDynamic == KILN_DYNAMIC, "kiln_c.h's KILN_DYNAMIC is the runtime's kDynamic");
  out->shape = type.shape.data();
}

/// Inputs as the runtime takes them (an input not aligned to its element
/// size is copied).
kiln_status *gatherInputs(kiln_tensor *const *inputs, size_t n, std::vector<kiln::Tensor> &out) {
  if (n > 0 && !inputs) return invalid("inputs is NULL with " + std::to_string(n) + " inputs");
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i]) return invalid("input " + std::to_string(i) + " is NULL");
    const kiln::Tensor &t = inputs[i]->tensor;
    if (inputs[i]->elementAligned) {
      out.push_back(t);
      continue;
    }
    auto copy = kiln::Tensor::allocate(t.dtype(), t.shape(), "an unaligned input's aligned copy");
    if (!copy) return fromError(copy.takeError());
    std::memcpy(copy->rawData(), t.rawData(), t.byteSize());
    out.push_back(std::move(*copy));
  }
  return nullptr;
}

/// Hands results to the caller: new handles, or copies into the tensors the
/// caller gave.
kiln_status *deliver(std::vector<kiln::Tensor> results, kiln_tensor **outputs, size_t n) {
  if (n != results.size())
    return invalid("the function has " + std::to_string(results.size()) + " results; " + std::to_string(n) +
                   " outputs were given");
  if (n > 0 && !outputs) return invalid("outputs is NULL with " + std::to_string(n) + " outputs");
  for (size_t i = 0; i < n; ++i) {
    if (outputs[i]) {
      const kiln::Tensor &into = outputs[i]->tensor;
      if (into.type() != results[i].type())
        return invalid("output " + std::to_string(i) + ": the given tensor is " + into.type().str() +
                       ", the result is " + results[i].type().str());
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (outputs[i]) {
      kiln::Tensor &into = outputs[i]->tensor;
      if (into.rawData() != results[i].rawData())
        std::memcpy(into.rawData(), results[i].rawData(), results[i].byteSize());
    } else {
      outputs[i] = new kiln_tensor{std::move(results[i]), true};
    }
  }
  return nullptr;
}

kiln_status *awaitResults(const std::vector<kiln::AsyncValueRef<kiln::Tensor>> &futures, kiln_tensor **outputs,
                          size_t n) {
  std::vector<kiln::Tensor> results;
  results.reserve(futures.size());
  for (const auto &f : futures) {
    auto v = f.awaitValue();
    if (!v) return fromError(v.takeError());
    results.push_back(std::move(*v));
  }
  return deliver(std::move(results), outputs, n);
}

kiln_status *inputTypes(const kiln_tensor_info *inputs, size_t n, std::vector<kiln::TensorType> &types) {
  if (n > 0 && !inputs) return invalid("inputs is NULL with " + std::to_string(n) + " inputs");
  for (size_t i = 0; i < n; ++i) {
    kiln::TensorType t;
    if (kiln_status *s = tensorType("input " + std::to_string(i), inputs[i].dtype, inputs[i].shape, inputs[i].rank, t))
      return s;
    types.push_back(std::move(t));
  }
  return nullptr;
}

bool parseFlag(const char *value, bool &out) {
  std::string v(value);
  if (v == "1" || v == "true" || v == "on") return out = true, true;
  if (v == "0" || v == "false" || v == "off") return out = false, true;
  return false;
}

template <typename T> bool parseInt(const char *value, T lo, T hi, T &out) {
  long long v;
  if (llvm::StringRef(value).trim().getAsInteger(10, v) || v < (long long)lo || v > (long long)hi) return false;
  out = T(v);
  return true;
}

}  // namespace

// Definitions of the functions kiln_c.h declares (extern "C" there, so
// here too).

// --- Errors and version ------------------------------------------------------

kiln_code kiln_status_code(const kiln_status *s) { return s ? kiln_code(int(s->status.code) + 1) : KILN_OK; }
const char *kiln_status_message(const kiln_status *s) { return s ? s->status.message.c_str() : ""; }
const char *kiln_status_location(const kiln_status *s) { return s ? s->status.location.c_str() : ""; }
void kiln_status_free(kiln_status *s) {
  if (s != &outOfMemory) delete s;
}
const char *kiln_code_name(kiln_code code) {
  if (code == KILN_OK) return "ok";
  if (int(code) < 1 || int(code) > int(ErrorCode::kInternal) + 1) return "unknown";
  return kiln::errorCodeName(ErrorCode(int(code) - 1));
}
const char *kiln_version(void) { return KILN_VERSION_STRING; }

// --- Tensors -----------------------------------------------------------------

const char *kiln_dtype_name(kiln_dtype d) {
  auto t = toDType(d);
  return t ? kiln::dtypeName(*t).data() : nullptr;
}
size_t kiln_dtype_size(kiln_dtype d) {
  auto t = toDType(d);
  return t ? kiln::dtypeSize(*t) : 0;
}

kiln_status *kiln_tensor_create(kiln_dtype dtype, const int64_t *shape, size_t rank, kiln_tensor **out) {
  return guard("kiln_tensor_create", [&]() -> kiln_status * {
    if (!out) return invalid("kiln_tensor_create: out is NULL");
    *out = nullptr;
    kiln::TensorType type;
    if (kiln_status *s = tensorType("kiln_tensor_create", dtype, shape, rank, type)) return s;
    auto t = kiln::Tensor::allocate(type.dtype, type.shape, "a tensor of the C API");
    if (!t) return fromError(t.takeError());
    std::memset(t->rawData(), 0, t->byteSize());
    *out = new kiln_tensor{std::move(*t), true};
    return nullptr;
  });
}

kiln_status *kiln_tensor_wrap(kiln_dtype dtype, const int64_t *shape, size_t rank, void *data, size_t bytes,
                              void (*release)(void *), void *releaseCtx, kiln_tensor **out) {
  return guard("kiln_tensor_wrap", [&]() -> kiln_status * {
    if (!out) return invalid("kiln_tensor_wrap: out is NULL");
    *out = nullptr;
    kiln::TensorType type;
    if (kiln_status *s = tensorType("kiln_tensor_wrap", dtype, shape, rank, type)) return s;
    if (type.byteSize() != bytes)
      return invalid("kiln_tensor_wrap: tensor<" + type.str() + "> needs " + std::to_string(type.byteSize()) +
                     " bytes, " + std::to_string(bytes) + " were given");
    if (!data && bytes > 0) return invalid("kiln_tensor_wrap: data is NULL");
    struct Releaser {
      void (*fn)(void *);
      void *ctx;
    };
    // `release` is armed only once the wrap succeeded: a failed wrap (no
    // memory) never calls it, and the caller still owns the memory.
    auto *releaser = new Releaser{nullptr, releaseCtx};
    std::shared_ptr<const void> keepAlive(releaser, [](const void *p) {
      auto *r = static_cast<const Releaser *>(p);
      if (r->fn) r->fn(r->ctx);
      delete r;
    });
    static char empty[64];
    kiln::Tensor t = kiln::Tensor::wrap(type.dtype, type.shape, data ? data : empty, std::move(keepAlive));
    bool aligned = reinterpret_cast<uintptr_t>(data) % kiln::dtypeSize(type.dtype) == 0;
    *out = new kiln_tensor{std::move(t), aligned};
    releaser->fn = release;
    return nullptr;
  });
}

kiln_status *kiln_tensor_share(const kiln_tensor *t, kiln_tensor **out) {
  return guard("kiln_tensor_share", [&]() -> kiln_status * {
    if (!t || !out) return invalid("kiln_tensor_share: tensor and out must not be NULL");
    *out = new kiln_tensor{t->tensor, t->elementAligned};
    return nullptr;
  });
}

void kiln_tensor_free(kiln_tensor *t) { delete t; }
kiln_dtype kiln_tensor_dtype(const kiln_tensor *t) { return fromDType(t->tensor.dtype()); }
size_t kiln_tensor_rank(const kiln_tensor *t) { return size_t(t->tensor.rank()); }
const int64_t *kiln_tensor_shape(const kiln_tensor *t) { return t->tensor.shape().data(); }
int64_t kiln_tensor_element_count(const kiln_tensor *t) { return t->tensor.numElements(); }
size_t kiln_tensor_byte_size(const kiln_tensor *t) { return t->tensor.byteSize(); }
void *kiln_tensor_data(const kiln_tensor *t) { return t->tensor.rawData(); }

// --- Options and runtime -----------------------------------------------------

kiln_options *kiln_options_create(void) {
  try {
    return new kiln_options();
  } catch (...) {
    return nullptr;
  }
}
void kiln_options_free(kiln_options *o) { delete o; }

kiln_status *kiln_options_set(kiln_options *options, const char *name, const char *value) {
  return guard("kiln_options_set", [&]() -> kiln_status * {
    if (!options || !name || !value) return invalid("kiln_options_set: options, name and value must not be NULL");
    kiln::RuntimeOptions &o = options->options;
    std::string n(name);
    auto bad = [&](const char *expected) {
      return invalid("option " + n + "='" + value + "': expected " + expected);
    };
    bool flag;
    if (n == "threads") {
      if (!parseInt(value, 0, 4096, o.threads)) return bad("a number of threads (0 = the machine's cores)");
    } else if (n == "compile_threads") {
      if (!parseInt(value, 0, 4096, o.compileThreads)) return bad("a number of threads (0 = the machine's cores)");
    } else if (n == "cache_dir") {
      o.cacheDir = value;
    } else if (n == "cache") {
      auto m = kiln::parseCacheMode(value);
      if (!m) return bad("off, ro or rw");
      o.cacheMode = *m;
    } else if (n == "cache_max_bytes") {
      auto b = kiln::parseByteSize(value);
      if (!b) return bad("bytes, e.g. 2G");
      o.cacheMaxBytes = *b;
    } else if (n == "op_mode") {
      auto p = kiln::ops::parseOpModes(value);
      if (!p) return fromError(kiln::withContext(p.takeError(), "option op_mode: "));
      p->merge(o.placement);  // entries set before win, as explicit options win over $KILN_OP_MODE
      o.placement = std::move(*p);
    } else if (n == "placement") {
      std::string v(value);
      if (v == "measure") o.placement.measure = true;
      else if (v == "fixed") o.placement.measure = false;
      else return bad("measure (time JIT against kernels per op; the fastest wins) or fixed (no timing: the same "
                      "placement, and bit-identical results, in every process)");
    } else if (n == "opt_level") {
      if (!parseInt(value, 0, 3, o.optLevel)) return bad("0, 1, 2 or 3");
    } else if (n == "max_vector_bits") {
      if (!parseInt(value, 0, 512, o.maxVectorBits) ||
          (o.maxVectorBits != 0 && o.maxVectorBits != 128 && o.maxVectorBits != 256 && o.maxVectorBits != 512))
        return bad("128, 256 or 512 (0 = the host's widest)");
    } else if (n == "prefetch_bytes") {
      int bytes = 0;
      if (!parseInt(value, 0, kiln::RuntimeOptions::kMaxPrefetchBytes, bytes))
        return bad(("bytes from 0 (no prefetches) to " + std::to_string(kiln::RuntimeOptions::kMaxPrefetchBytes)).c_str());
      o.prefetchBytes = bytes;
    } else if (n == "memory_limit") {
      if (std::string(value) == "0") o.memoryLimitBytes = 0;
      else if (auto b = kiln::parseByteSize(value)) o.memoryLimitBytes = *b;
      else return bad("bytes, e.g. 512M or 2G (0 = no limit)");
    } else if (n == "call_timeout") {
      char *end = nullptr;
      double s = std::strtod(value, &end);
      if (!end || *end || end == value || !(s >= 0) || s > 1e9) return bad("seconds (0 = no limit)");
      o.callTimeoutSeconds = s;
    } else if (n == "max_in_flight") {
      if (!parseInt(value, 0, 1 << 20, o.maxCallsInFlight)) return bad("a number of calls (0 = no limit)");
    } else if (n == "when_busy") {
      std::string v(value);
      if (v == "wait") o.whenBusy = kiln::RuntimeOptions::WhenBusy::kWait;
      else if (v == "fail") o.whenBusy = kiln::RuntimeOptions::WhenBusy::kFail;
      else return bad("wait or fail");
    } else if (n == "compile_policy") {
      o.compilePolicy = kiln::parseCompilePolicy(value);
      if (!o.compilePolicy) return bad("wait, tiered or kernels-only");
    } else if (n == "batch_ranges") {
      if (!parseFlag(value, flag)) return bad("0 or 1");
      o.batchRanges = flag;
    } else if (n == "hot_batch_calls") {
      int calls = 0;
      if (!parseInt(value, 0, 1 << 30, calls)) return bad("a number of calls (0 = never)");
      o.hotBatchCalls = calls;
    } else if (n == "hot_shape_calls") {
      int calls = 0;
      if (!parseInt(value, 1, 1 << 30, calls)) return bad("a number of calls (at least 1)");
      o.hotShapeCalls = calls;
    } else if (n == "device") {
      o.device = value;
    } else if (n == "huge_pages") {
      if (!parseFlag(value, flag)) return bad("0 or 1");
      o.hugePageWeights = flag;
    } else if (n == "serial_steps") {
      if (!parseFlag(value, flag)) return bad("0 or 1");
      o.serialSteps = flag;
    } else if (n == "gpu_graphs" || n == "gpu_tf32" || n == "gpu_profile") {
      if (!parseFlag(value, flag)) return bad("0 or 1");
      (n == "gpu_graphs" ? o.gpuGraphs : n == "gpu_tf32" ? o.gpuTf32 : o.gpuProfile) = flag;
    } else if (n == "gpu_conv_algo") {
      std::string v(value);
      if (v != "find" && v != "heuristic") return bad("find or heuristic");
      o.gpuConvAlgo = v;
    } else {
      return invalid("unknown option '" + n +
                     "' (options: threads, compile_threads, cache_dir, cache, cache_max_bytes, op_mode, placement, "
                     "opt_level, max_vector_bits, memory_limit, call_timeout, max_in_flight, when_busy, compile_policy, "
                     "batch_ranges, hot_batch_calls, hot_shape_calls, device, huge_pages, serial_steps, gpu_graphs, gpu_tf32, "
                     "gpu_profile, gpu_conv_algo)");
    }
    return nullptr;
  });
}

kiln_status *kiln_runtime_create(const kiln_options *options, kiln_runtime **out) {
  return guard("kiln_runtime_create", [&]() -> kiln_status * {
    if (!out) return invalid("kiln_runtime_create: out is NULL");
    *out = nullptr;
    auto rt = kiln::Runtime::create(options ? options->options : kiln::RuntimeOptions());
    if (!rt) return fromError(rt.takeError());
    auto *r = new kiln_runtime{std::move(*rt), {}};
    r->target = r->runtime->targetDescription();
    *out = r;
    return nullptr;
  });
}

void kiln_runtime_free(kiln_runtime *r) { delete r; }
const char *kiln_runtime_target(const kiln_runtime *r) { return r->target.c_str(); }

void kiln_runtime_cache_stats(const kiln_runtime *r, kiln_cache_stats *out) {
  *out = kiln_cache_stats{};
  kiln::jit::CompileServiceStats s = r->runtime->compileService().stats();
  out->memory_hits = s.memoryHits;
  out->memory_misses = s.memoryMisses;
  out->disk_hits = s.diskHits;
  out->compiles = s.compiles;
  out->compile_failures = s.compileFailures;
  out->jit_fallbacks = s.jitFallbacks;
  out->compile_ms = s.compileMs;
  out->disk_load_ms = s.diskLoadMs;
  out->disk_writes = s.disk.writes;
  out->disk_rejected = s.disk.rejected;
}

// --- Modules -----------------------------------------------------------------

kiln_status *kiln_runtime_load_file(kiln_runtime *r, const char *path, kiln_module **out) {
  return guard("kiln_runtime_load_file", [&]() -> kiln_status * {
    if (!r || !path || !out) return invalid("kiln_runtime_load_file: runtime, path and out must not be NULL");
    *out = nullptr;
    auto m = r->runtime->loadModuleFromFile(path);
    if (!m) return fromError(m.takeError());
    *out = newModule(r, std::move(*m));
    return nullptr;
  });
}

kiln_status *kiln_runtime_load_memory(kiln_runtime *r, const void *data, size_t size, const char *name,
                                      kiln_module **out) {
  return guard("kiln_runtime_load_memory", [&]() -> kiln_status * {
    if (!r || (!data && size) || !out) return invalid("kiln_runtime_load_memory: runtime, data and out must not be NULL");
    *out = nullptr;
    auto m = r->runtime->loadModule(llvm::StringRef(static_cast<const char *>(data), size),
                                    name && *name ? name : "<memory>");
    if (!m) return fromError(m.takeError());
    *out = newModule(r, std::move(*m));
    return nullptr;
  });
}

void kiln_module_free(kiln_module *m) { delete m; }

size_t kiln_module_function_count(const kiln_module *m) { return m->module->functions().size(); }
const char *kiln_module_function_name(const kiln_module *m, size_t i) {
  const auto &fs = m->module->functions();
  return i < fs.size() ? fs[i].name.c_str() : nullptr;
}

kiln_status *kiln_module_resolve_function(const kiln_module *m, const char *function, const char **name) {
  return guard("kiln_module_resolve_function", [&]() -> kiln_status * {
    if (!name) return invalid("kiln_module_resolve_function: name is NULL");
    *name = nullptr;
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    *name = (*sig)->name.c_str();
    return nullptr;
  });
}

kiln_status *kiln_module_input_count(const kiln_module *m, const char *function, size_t *out) {
  return guard("kiln_module_input_count", [&]() -> kiln_status * {
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    *out = (*sig)->args.size();
    return nullptr;
  });
}

kiln_status *kiln_module_output_count(const kiln_module *m, const char *function, size_t *out) {
  return guard("kiln_module_output_count", [&]() -> kiln_status * {
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    *out = (*sig)->results.size();
    return nullptr;
  });
}

kiln_status *kiln_module_input_info(const kiln_module *m, const char *function, size_t i, kiln_tensor_info *out) {
  return guard("kiln_module_input_info", [&]() -> kiln_status * {
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    if (i >= (*sig)->args.size())
      return invalid("@" + (*sig)->name + " has " + std::to_string((*sig)->args.size()) + " inputs; asked for input " +
                     std::to_string(i));
    const FunctionNames &names = namesOf(const_cast<kiln_module *>(m), **sig);
    describe(names.inputs[i], (*sig)->args[i].type, out);
    return nullptr;
  });
}

kiln_status *kiln_module_output_info(const kiln_module *m, const char *function, size_t i, kiln_tensor_info *out) {
  return guard("kiln_module_output_info", [&]() -> kiln_status * {
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    if (i >= (*sig)->results.size())
      return invalid("@" + (*sig)->name + " has " + std::to_string((*sig)->results.size()) +
                     " outputs; asked for output " + std::to_string(i));
    const FunctionNames &names = namesOf(const_cast<kiln_module *>(m), **sig);
    describe(names.outputs[i], (*sig)->results[i], out);
    return nullptr;
  });
}

kiln_status *kiln_module_batch_separable(const kiln_module *m, const char *function, int *separable,
                                         const char **why) {
  return guard("kiln_module_batch_separable", [&]() -> kiln_status * {
    if (!m || !separable) return invalid("kiln_module_batch_separable: module or separable is NULL");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    *separable = (*sig)->batch.separable ? 1 : 0;
    if (why) *why = (*sig)->batch.why.c_str();
    return nullptr;
  });
}

kiln_status *kiln_module_call(kiln_module *m, const char *function, kiln_tensor *const *inputs, size_t numInputs,
                              kiln_tensor **outputs, size_t numOutputs) {
  return guard("kiln_module_call", [&]() -> kiln_status * {
    if (!m) return invalid("kiln_module_call: module is NULL");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    if (numOutputs != (*sig)->results.size())
      return invalid("@" + (*sig)->name + " has " + std::to_string((*sig)->results.size()) + " results; " +
                     std::to_string(numOutputs) + " outputs were given");
    std::vector<kiln::Tensor> args;
    if (kiln_status *s = gatherInputs(inputs, numInputs, args)) return s;
    if (numOutputs > 0 && !outputs) return invalid("outputs is NULL with " + std::to_string(numOutputs) + " outputs");
    // Given outputs are written in place (an output not aligned to its
    // element size gets kiln's memory, copied over after the call).
    std::vector<kiln::Tensor> into(numOutputs);
    for (size_t i = 0; i < numOutputs; ++i)
      if (outputs[i] && outputs[i]->elementAligned) into[i] = outputs[i]->tensor;
    auto results = m->module->call((*sig)->name, args, std::move(into));
    if (!results) return fromError(results.takeError());
    return deliver(std::move(*results), outputs, numOutputs);
  });
}

kiln_status *kiln_module_call_named(kiln_module *m, const char *function, const char *const *names,
                                    kiln_tensor *const *inputs, size_t numInputs, kiln_tensor **outputs,
                                    size_t numOutputs) {
  return guard("kiln_module_call_named", [&]() -> kiln_status * {
    if (!m) return invalid("kiln_module_call_named: module is NULL");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    if (numInputs > 0 && (!names || !inputs)) return invalid("kiln_module_call_named: names or inputs is NULL");
    const FunctionNames &declared = namesOf(m, **sig);
    if (numInputs != declared.inputs.size())
      return invalid("@" + (*sig)->name + " takes " + std::to_string(declared.inputs.size()) + " inputs; " +
                     std::to_string(numInputs) + " were given");
    std::vector<kiln_tensor *> ordered(numInputs, nullptr);
    for (size_t i = 0; i < numInputs; ++i) {
      if (!names[i]) return invalid("input name " + std::to_string(i) + " is NULL");
      auto it = std::find(declared.inputs.begin(), declared.inputs.end(), names[i]);
      if (it == declared.inputs.end()) {
        std::string all;
        for (const auto &d : declared.inputs) all += (all.empty() ? "'" : ", '") + d + "'";
        return invalid("@" + (*sig)->name + " has no input named '" + names[i] + "' (its inputs: " + all + ")");
      }
      size_t index = size_t(it - declared.inputs.begin());
      if (ordered[index]) return invalid("input '" + declared.inputs[index] + "' is given twice");
      ordered[index] = inputs[i];
    }
    return kiln_module_call(m, (*sig)->name.c_str(), ordered.data(), numInputs, outputs, numOutputs);
  });
}

kiln_status *kiln_module_call_async(kiln_module *m, const char *function, kiln_tensor *const *inputs,
                                    size_t numInputs, double timeoutSeconds, kiln_call **out) {
  return guard("kiln_module_call_async", [&]() -> kiln_status * {
    if (!m || !out) return invalid("kiln_module_call_async: module and out must not be NULL");
    *out = nullptr;
    if (!(timeoutSeconds >= 0) || timeoutSeconds > 1e9)
      return invalid("kiln_module_call_async: timeout " + std::to_string(timeoutSeconds) +
                     " s: expected 0 (the runtime's) or a positive number of seconds");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    std::vector<kiln::Tensor> args;
    if (kiln_status *s = gatherInputs(inputs, numInputs, args)) return s;
    auto call = std::make_unique<kiln_call>();
    call->cancel = std::make_shared<kiln::CancellationToken>();
    double timeout = timeoutSeconds > 0 ? timeoutSeconds : m->callTimeoutSeconds;
    if (timeout > 0) call->cancel->setTimeout(std::chrono::nanoseconds(int64_t(timeout * 1e9)));
    call->results = m->module->callAsync((*sig)->name, args, call->cancel);
    // Busy (max_in_flight with when_busy=fail) is an error at once.
    if (call->results.size() >= 1 && call->results[0]->isError() &&
        call->results[0]->error().code == ErrorCode::kUnavailable &&
        llvm::StringRef(call->results[0]->error().message).starts_with("busy:")) {
      const Status &e = call->results[0]->error();
      return make(e.code, e.message, e.location);
    }
    *out = call.release();
    return nullptr;
  });
}

int kiln_call_ready(const kiln_call *c) {
  for (const auto &r : c->results)
    if (!r->isAvailable()) return 0;
  return 1;
}

void kiln_call_cancel(kiln_call *c) { c->cancel->cancel(); }

void kiln_call_on_ready(kiln_call *c, void (*callback)(void *), void *ctx) {
  if (!callback) return;
  kiln::whenAllAvailable(c->results, [callback, ctx] { callback(ctx); });
}

kiln_status *kiln_call_wait(kiln_call *c, kiln_tensor **outputs, size_t numOutputs) {
  return guard("kiln_call_wait", [&]() -> kiln_status * {
    if (!c) return invalid("kiln_call_wait: call is NULL");
    return awaitResults(c->results, outputs, numOutputs);
  });
}

void kiln_call_free(kiln_call *c) { delete c; }

kiln_status *kiln_module_prewarm(kiln_module *m, const char *function, const kiln_tensor_info *inputs,
                                 size_t numInputs) {
  return guard("kiln_module_prewarm", [&]() -> kiln_status * {
    if (!m) return invalid("kiln_module_prewarm: module is NULL");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    std::vector<kiln::TensorType> types;
    if (kiln_status *s = inputTypes(inputs, numInputs, types)) return s;
    // What will serve these types (batch 1 for every size of a function
    // that runs its batch as calls of batch 1), as Runtime::prewarm does.
    auto code = m->module->compile((*sig)->name, m->module->servingTypes((*sig)->name, std::move(types)));
    return code ? nullptr : fromError(code.takeError());
  });
}

kiln_status *kiln_module_compile_info(kiln_module *m, const char *function, const kiln_tensor_info *inputs,
                                      size_t numInputs, kiln_compile_info *out) {
  return guard("kiln_module_compile_info", [&]() -> kiln_status * {
    if (!m || !out) return invalid("kiln_module_compile_info: module and out must not be NULL");
    auto sig = resolve(*m->module, function);
    if (!sig) return fromError(sig.takeError());
    std::vector<kiln::TensorType> types;
    if (kiln_status *s = inputTypes(inputs, numInputs, types)) return s;
    auto code = m->module->compile((*sig)->name, m->module->servingTypes((*sig)->name, std::move(types)));
    if (!code) return fromError(code.takeError());
    const kiln::jit::CompileStats &st = (*code)->stats;
    *out = kiln_compile_info{};
    out->from_disk_cache = st.fromObject ? 1 : 0;
    out->kernels_compiled = st.kernelsCompiled;
    out->kernels_shared = st.kernelsShared;
    out->placements_measured = st.placementsMeasured;
    out->kernels_chosen = st.kernelsChosen;
    out->jit_fallbacks = st.jitFallbacks;
    out->compile_ms = st.totalMs;
    std::string key = (*sig)->name;
    for (const auto &t : types) key += "|" + t.str();
    std::lock_guard<std::mutex> lock(m->mu);
    std::string &summary = m->placements[key];
    summary = (*code)->placementSummary();
    out->placement = summary.c_str();
    return nullptr;
  });
}

void kiln_module_stats_get(const kiln_module *m, kiln_module_stats *out) {
  out->functions_compiled = m->module->numCompiled();
  out->pipeline_runs = m->module->pipelineRuns();
}

void kiln_module_tier_stats_get(const kiln_module *m, kiln_tier_stats *out) {
  kiln::Module::TierStats t = m->module->tierStats();
  out->kernel_plan_calls = t.kernelPlanCalls;
  out->background_compiles = t.backgroundCompiles;
  out->swaps = t.swaps;
  out->failures = t.backgroundFailures;
  out->range_calls = t.rangeCalls;
  out->hot_size_compiles = t.hotSizeCompiles;
  out->range_kept = t.rangeKept;
}

void kiln_module_wait_background_compiles(kiln_module *m) { m->module->waitForBackgroundCompiles(); }

// --- Profiling ---------------------------------------------------------------

kiln_status *kiln_profiler_start(kiln_runtime *r, kiln_profiler **out) {
  return guard("kiln_profiler_start", [&]() -> kiln_status * {
    if (!r || !out) return invalid("kiln_profiler_start: runtime and out must not be NULL");
    *out = new kiln_profiler{std::make_unique<kiln::Profiler>(*r->runtime)};
    return nullptr;
  });
}

namespace {
kiln_status *copyOut(const std::string &text, char **out, const char *what) {
  *out = static_cast<char *>(std::malloc(text.size() + 1));
  if (!*out) return make(ErrorCode::kResourceExhausted, std::string(what) + ": out of memory");
  std::memcpy(*out, text.c_str(), text.size() + 1);
  return nullptr;
}
}  // namespace

kiln_status *kiln_profiler_stop_json(kiln_profiler *p, const char *tracePath, const char *reportPath, char **table,
                                     char **tableJson) {
  return guard("kiln_profiler_stop", [&]() -> kiln_status * {
    if (!p) return invalid("kiln_profiler_stop: profiler is NULL");
    if (table) *table = nullptr;
    if (tableJson) *tableJson = nullptr;
    if (!p->profiler) return invalid("kiln_profiler_stop: the profiler was stopped already");
    kiln::Profile profile = p->profiler->stop();
    p->profiler.reset();
    if (tracePath && *tracePath)
      if (auto err = kiln::writeFileReplacing(tracePath, profile.chromeTraceJson())) return fromError(std::move(err));
    if (reportPath && *reportPath)
      if (auto err = kiln::writeFileReplacing(reportPath, profile.htmlReport())) return fromError(std::move(err));
    if (table)
      if (kiln_status *s = copyOut(profile.table(), table, "kiln_profiler_stop")) return s;
    if (tableJson)
      if (kiln_status *s = copyOut(profile.tableJson(), tableJson, "kiln_profiler_stop")) {
        if (table) {
          std::free(*table);
          *table = nullptr;
        }
        return s;
      }
    return nullptr;
  });
}

kiln_status *kiln_profiler_stop(kiln_profiler *p, const char *tracePath, const char *reportPath, char **table) {
  return kiln_profiler_stop_json(p, tracePath, reportPath, table, nullptr);
}

void kiln_profiler_free(kiln_profiler *p) { delete p; }
void kiln_string_free(char *text) { std::free(text); }

kiln_status *kiln_status_create(kiln_code code, const char *message) {
  if (code == KILN_OK || int(code) < 1 || int(code) > int(ErrorCode::kInternal) + 1) code = KILN_INTERNAL;
  return make(ErrorCode(int(code) - 1), message ? message : "");
}

// --- Built-in models -------------------------------------------------------

size_t kiln_builtin_model_count(void) { return kiln::models::builtinModelNames().size(); }

const char *kiln_builtin_model_name(size_t i) {
  static const std::vector<std::string> names = kiln::models::builtinModelNames();
  return i < names.size() ? names[i].c_str() : nullptr;
}

kiln_status *kiln_runtime_load_builtin(kiln_runtime *r, const char *name, kiln_module **out) {
  return guard("kiln_runtime_load_builtin", [&]() -> kiln_status * {
    if (!r || !name || !out) return invalid("kiln_runtime_load_builtin: runtime, name and out must not be NULL");
    *out = nullptr;
    const kiln::models::BuiltinModel *model = kiln::models::findBuiltinModel(name);
    if (!model) {
      std::string all;
      for (const std::string &n : kiln::models::builtinModelNames()) all += (all.empty() ? "" : ", ") + n;
      return invalid(std::string("no built-in model '") + name + "' (built in: " + all + ")");
    }
    auto program = model->build();
    if (!program) return fromError(program.takeError());
    auto m = r->runtime->loadProgram(std::move(*program));
    if (!m) return fromError(m.takeError());
    *out = newModule(r, std::move(*m));
    return nullptr;
  });
}

// --- Attributes ----------------------------------------------------------------

kiln_attrs *kiln_attrs_create(void) {
  try {
    return new kiln_attrs();
  } catch (...) {
    return nullptr;
  }
}
void kiln_attrs_free(kiln_attrs *a) { delete a; }

namespace {
template <typename T> kiln_status *setAttr(kiln_attrs *a, const char *name, T value) {
  return guard("kiln_attrs_set", [&]() -> kiln_status * {
    if (!a || !name || !*name) return invalid("kiln_attrs_set: attrs and name must not be NULL or empty");
    if (a->view) return invalid("kiln_attrs_set: a kernel's attributes are read-only");
    a->owned.set(name, kiln::ops::Attr(std::move(value)));
    return nullptr;
  });
}
}  // namespace

kiln_status *kiln_attrs_set_int(kiln_attrs *a, const char *name, int64_t v) { return setAttr(a, name, v); }
kiln_status *kiln_attrs_set_float(kiln_attrs *a, const char *name, double v) { return setAttr(a, name, v); }
kiln_status *kiln_attrs_set_ints(kiln_attrs *a, const char *name, const int64_t *values, size_t count) {
  if (count > 0 && !values) return invalid("kiln_attrs_set_ints: values is NULL");
  return setAttr(a, name, std::vector<int64_t>(values, values + count));
}
kiln_status *kiln_attrs_set_string(kiln_attrs *a, const char *name, const char *v) {
  if (!v) return invalid("kiln_attrs_set_string: value is NULL");
  return setAttr(a, name, std::string(v));
}

kiln_status *kiln_attrs_get_int(const kiln_attrs *a, const char *name, int64_t *out) {
  return guard("kiln_attrs_get_int", [&]() -> kiln_status * {
    if (!a || !name || !out) return invalid("kiln_attrs_get_int: attrs, name and out must not be NULL");
    auto v = a->map().getInt(name);
    if (!v) return fromError(v.takeError());
    *out = *v;
    return nullptr;
  });
}
kiln_status *kiln_attrs_get_float(const kiln_attrs *a, const char *name, double *out) {
  return guard("kiln_attrs_get_float", [&]() -> kiln_status * {
    if (!a || !name || !out) return invalid("kiln_attrs_get_float: attrs, name and out must not be NULL");
    auto v = a->map().getFloat(name);
    if (!v) return fromError(v.takeError());
    *out = *v;
    return nullptr;
  });
}
kiln_status *kiln_attrs_get_ints(const kiln_attrs *a, const char *name, int64_t *out, size_t capacity,
                                 size_t *count) {
  return guard("kiln_attrs_get_ints", [&]() -> kiln_status * {
    if (!a || !name || !count || (capacity && !out))
      return invalid("kiln_attrs_get_ints: attrs, name, count (and out, with a capacity) must not be NULL");
    auto v = a->map().getInts(name);
    if (!v) return fromError(v.takeError());
    *count = v->size();
    for (size_t i = 0; i < v->size() && i < capacity; ++i) out[i] = (*v)[i];
    return nullptr;
  });
}

// --- Eager -----------------------------------------------------------------------

kiln_status *kiln_eager_create(kiln_runtime *r, kiln_eager **out) {
  return guard("kiln_eager_create", [&]() -> kiln_status * {
    if (!r || !out) return invalid("kiln_eager_create: runtime and out must not be NULL");
    *out = new kiln_eager{r, std::make_unique<kiln::eager::Context>(*r->runtime)};
    return nullptr;
  });
}
void kiln_eager_free(kiln_eager *e) { delete e; }

kiln_status *kiln_value_from_tensor(const kiln_tensor *t, kiln_value **out) {
  return guard("kiln_value_from_tensor", [&]() -> kiln_status * {
    if (!t || !out) return invalid("kiln_value_from_tensor: tensor and out must not be NULL");
    *out = new kiln_value{kiln::eager::EagerTensor(t->tensor)};
    return nullptr;
  });
}
kiln_status *kiln_value_share(const kiln_value *v, kiln_value **out) {
  return guard("kiln_value_share", [&]() -> kiln_status * {
    if (!v || !out) return invalid("kiln_value_share: value and out must not be NULL");
    *out = new kiln_value{v->value};
    return nullptr;
  });
}
void kiln_value_free(kiln_value *v) { delete v; }

void kiln_value_info(const kiln_value *v, kiln_tensor_info *out) {
  out->name = nullptr;
  out->dtype = fromDType(v->value.type().dtype);
  out->rank = v->value.type().shape.size();
  out->shape = v->value.type().shape.data();
}

kiln_status *kiln_value_await(const kiln_value *v, kiln_tensor **out) {
  return guard("kiln_value_await", [&]() -> kiln_status * {
    if (!v || !out) return invalid("kiln_value_await: value and out must not be NULL");
    *out = nullptr;
    if (v->value.isSymbolic()) return invalid("kiln_value_await: a value being traced has no value yet");
    auto t = v->value.value();
    if (!t) return fromError(t.takeError());
    *out = new kiln_tensor{std::move(*t), true};
    return nullptr;
  });
}

kiln_status *kiln_eager_execute(kiln_eager *e, const char *op, kiln_value *const *inputs, size_t numInputs,
                                const kiln_attrs *attrs, kiln_value **out) {
  return guard("kiln_eager_execute", [&]() -> kiln_status * {
    if (!e || !op || !out) return invalid("kiln_eager_execute: eager, op and out must not be NULL");
    *out = nullptr;
    if (numInputs > 0 && !inputs) return invalid("kiln_eager_execute: inputs is NULL");
    std::vector<kiln::eager::EagerTensor> args;
    for (size_t i = 0; i < numInputs; ++i) {
      if (!inputs[i]) return invalid("kiln_eager_execute: input " + std::to_string(i) + " is NULL");
      args.push_back(inputs[i]->value);
    }
    static const kiln::ops::AttrMap none;
    kiln::eager::EagerTensor r = e->context->execute(op, args, attrs ? attrs->map() : none);
    // A dispatch that failed (unknown op, wrong types) is an error now; an
    // op that fails while it runs is one at kiln_value_await.
    if (!r.isSymbolic() && r.isError()) {
      auto v = r.value();
      if (!v) return fromError(v.takeError());
    }
    *out = new kiln_value{std::move(r)};
    return nullptr;
  });
}

kiln_status *kiln_values_push(kiln_values *outs, const kiln_value *v) {
  return guard("kiln_values_push", [&]() -> kiln_status * {
    if (!outs || !v) return invalid("kiln_values_push: outputs and value must not be NULL");
    outs->values.push_back(v->value);
    return nullptr;
  });
}

kiln_status *kiln_eager_trace(kiln_eager *e, kiln_trace_fn fn, void *user, const kiln_tensor_info *examples,
                              size_t numExamples, kiln_module **out, char **mlir) {
  return guard("kiln_eager_trace", [&]() -> kiln_status * {
    if (!e || !fn || !out) return invalid("kiln_eager_trace: eager, fn and out must not be NULL");
    *out = nullptr;
    if (mlir) *mlir = nullptr;
    std::vector<kiln::TensorType> types;
    if (kiln_status *s = inputTypes(examples, numExamples, types)) return s;
    kiln_status *failed = nullptr;
    auto traced = kiln::eager::trace(
        *e->context,
        [&](kiln::eager::Context &, llvm::ArrayRef<kiln::eager::EagerTensor> args) {
          std::vector<kiln_value> values;
          values.reserve(args.size());
          for (const auto &a : args) values.push_back(kiln_value{a});
          std::vector<kiln_value *> pointers;
          for (kiln_value &v : values) pointers.push_back(&v);
          kiln_values outs;
          failed = fn(e, pointers.data(), pointers.size(), &outs, user);
          return failed ? std::vector<kiln::eager::EagerTensor>() : std::move(outs.values);
        },
        types);
    if (failed) {
      if (!traced) llvm::consumeError(traced.takeError());
      return failed;
    }
    if (!traced) return fromError(traced.takeError());
    if (mlir) {
      *mlir = static_cast<char *>(std::malloc(traced->mlir.size() + 1));
      if (!*mlir) return make(ErrorCode::kResourceExhausted, "kiln_eager_trace: out of memory");
      std::memcpy(*mlir, traced->mlir.c_str(), traced->mlir.size() + 1);
    }
    *out = newModule(e->runtime, std::move(traced->module));
    return nullptr;
  });
}

// --- User kernels ------------------------------------------------------------------

namespace {

/// A kernel registered through the C API. KernelDef takes plain function
/// pointers (no user data), so each registration takes one of a fixed set
/// of trampolines, each reading its own slot.
struct CKernel {
  kiln_kernel_shape_fn shape = nullptr;
  kiln_kernel_compute_fn compute = nullptr;
  void *user = nullptr;
};
constexpr size_t kMaxCKernels = 64;
std::array<CKernel, kMaxCKernels> cKernels;
std::mutex cKernelsMu;
size_t cKernelsUsed = 0;

llvm::Error toError(kiln_status *s, const char *what) {
  if (!s) return llvm::Error::success();
  Status status = s->status;
  kiln_status_free(s);
  status.message = std::string(what) + ": " + status.message;
  return kiln::makeError(std::move(status));
}

template <size_t I>
llvm::Expected<std::vector<kiln::TensorType>> shapeTrampoline(llvm::ArrayRef<kiln::TensorType> inputs,
                                                              const kiln::ops::AttrMap &attrs) {
  std::vector<kiln_tensor_info> infos(inputs.size());
  static const std::string noName;
  for (size_t i = 0; i < inputs.size(); ++i) describe(noName, inputs[i], &infos[i]), infos[i].name = nullptr;
  kiln_attrs view;
  view.view = &attrs;
  kiln_types out;
  if (auto err = toError(cKernels[I].shape(infos.data(), infos.size(), &view, &out, cKernels[I].user),
                         "the kernel's shape function"))
    return std::move(err);
  return std::move(out.types);
}

template <size_t I> llvm::Error computeTrampoline(const kiln::KernelArgs &args) {
  kiln_kernel_context ctx{&args, {}};
  ctx.attrs.view = &args.attrs;
  return toError(cKernels[I].compute(&ctx, cKernels[I].user), "the kernel");
}

template <size_t... I>
constexpr std::array<std::pair<kiln::ShapeFn, kiln::ComputeFn>, sizeof...(I)> trampolines(std::index_sequence<I...>) {
  return {{{&shapeTrampoline<I>, &computeTrampoline<I>}...}};
}
const auto kTrampolines = trampolines(std::make_index_sequence<kMaxCKernels>());

}  // namespace

kiln_status *kiln_types_push(kiln_types *types, kiln_dtype dtype, const int64_t *shape, size_t rank) {
  return guard("kiln_types_push", [&]() -> kiln_status * {
    if (!types) return invalid("kiln_types_push: types is NULL");
    kiln::TensorType t;
    if (kiln_status *s = tensorType("kiln_types_push", dtype, shape, rank, t)) return s;
    types->types.push_back(std::move(t));
    return nullptr;
  });
}

size_t kiln_kernel_input_count(const kiln_kernel_context *c) { return c->args->inputs.size(); }
size_t kiln_kernel_output_count(const kiln_kernel_context *c) { return c->args->outputs.size(); }
const void *kiln_kernel_input(const kiln_kernel_context *c, size_t i, kiln_tensor_info *info) {
  if (i >= c->args->inputs.size()) return nullptr;
  static const std::string noName;
  if (info) describe(noName, c->args->inputTypes[i], info), info->name = nullptr;
  return c->args->inputs[i];
}
void *kiln_kernel_output(const kiln_kernel_context *c, size_t i, kiln_tensor_info *info) {
  if (i >= c->args->outputs.size()) return nullptr;
  static const std::string noName;
  if (info) describe(noName, c->args->outputTypes[i], info), info->name = nullptr;
  return c->args->outputs[i];
}
const kiln_attrs *kiln_kernel_attrs(const kiln_kernel_context *c) { return &c->attrs; }

kiln_status *kiln_register_kernel(const char *op, const char *impl, const kiln_dtype *dtypes, size_t numDtypes,
                                  kiln_kernel_shape_fn shape, kiln_kernel_compute_fn compute, void *user) {
  return guard("kiln_register_kernel", [&]() -> kiln_status * {
    if (!op || !impl || !shape || !compute)
      return invalid("kiln_register_kernel: op, impl, shape and compute must not be NULL");
    if (numDtypes > 0 && !dtypes) return invalid("kiln_register_kernel: dtypes is NULL");
    kiln::KernelDef def;
    def.op = op;
    def.impl = impl;
    for (size_t i = 0; i < numDtypes; ++i) {
      auto dt = toDType(dtypes[i]);
      if (!dt) return invalid("kiln_register_kernel: unknown dtype " + std::to_string(int(dtypes[i])));
      def.dtypes.push_back(*dt);
    }
    std::lock_guard<std::mutex> lock(cKernelsMu);
    if (cKernelsUsed == kMaxCKernels)
      return make(ErrorCode::kResourceExhausted,
                  "kiln_register_kernel: " + std::to_string(kMaxCKernels) + " kernels are registered through the C "
                  "API already, the most a process may have");
    size_t slot = cKernelsUsed;
    cKernels[slot] = CKernel{shape, compute, user};
    def.shape = kTrampolines[slot].first;
    def.compute = kTrampolines[slot].second;
    if (auto err = kiln::registerKernel(std::move(def))) return fromError(std::move(err));
    ++cKernelsUsed;  // the slot is taken only by a registration that stands
    return nullptr;
  });
}
