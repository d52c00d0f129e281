#include "api/Options.h"
#include "runtime/Error.h"

#include <cstdio>
#include <cstdlib>
#include <tuple>

namespace kiln {

std::optional<uint64_t> parseByteSize(llvm::StringRef text) {
  text = text.trim();
  uint64_t scale = 1;
  if (!text.empty()) {
    char c = text.back() | 0x20;
    if (c == 'k' || c == 'm' || c == 'g') {
      scale = c == 'k' ? 1ull << 10 : c == 'm' ? 1ull << 20 : 1ull << 30;
      text = text.drop_back();
    }
  }
  uint64_t v;
  if (text.empty() || text.getAsInteger(10, v) || v == 0 || v > UINT64_MAX / scale) return std::nullopt;
  return v * scale;
}
namespace {
/// The value of an environment variable, or null when unset or empty.
const char *env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// `flag` from $`name` where it is not set (`otherwise` where that is
/// unset too): 0 or 1, nothing else (a typo must not pass as either).
llvm::Error switchFromEnvironment(std::optional<bool> &flag, const char *name, bool otherwise) {
  if (flag) return llvm::Error::success();
  const char *v = env(name);
  if (v && llvm::StringRef(v) != "0" && llvm::StringRef(v) != "1")
    return error(ErrorCode::kInvalidArgument, "%s='%s': expected 0 or 1", name, v);
  flag = v ? llvm::StringRef(v) == "1" : otherwise;
  return llvm::Error::success();
}

}  // namespace

std::optional<CacheMode> parseCacheMode(llvm::StringRef t) {
  if (t == "off" || t == "0" || t == "none") return CacheMode::kOff;
  if (t == "ro" || t == "read-only" || t == "readonly") return CacheMode::kReadOnly;
  if (t == "rw" || t == "read-write" || t == "on" || t == "1") return CacheMode::kReadWrite;
  return std::nullopt;
}

const char *cacheModeName(CacheMode m) {
  switch (m) {
  case CacheMode::kOff: return "off";
  case CacheMode::kReadOnly: return "read-only";
  case CacheMode::kReadWrite: return "read-write";
  }
  return "?";
}

const char *compilePolicyName(RuntimeOptions::CompilePolicy policy) {
  switch (policy) {
  case RuntimeOptions::CompilePolicy::kWait: return "wait";
  case RuntimeOptions::CompilePolicy::kTiered: return "tiered";
  case RuntimeOptions::CompilePolicy::kKernelsOnly: return "kernels-only";
  }
  return "?";
}

std::optional<RuntimeOptions::CompilePolicy> parseCompilePolicy(llvm::StringRef text) {
  if (text == "wait") return RuntimeOptions::CompilePolicy::kWait;
  if (text == "tiered") return RuntimeOptions::CompilePolicy::kTiered;
  if (text == "kernels-only") return RuntimeOptions::CompilePolicy::kKernelsOnly;
  return std::nullopt;
}

void warnToStderr(const std::string &message) { std::fprintf(stderr, "kiln: warning: %s\n", message.c_str()); }

llvm::Expected<RuntimeOptions> RuntimeOptions::fromEnvironment(RuntimeOptions o) {
  if (o.cacheDir.empty()) {
    if (const char *d = env("KILN_CACHE_DIR")) o.cacheDir = d;
    else if (const char *x = env("XDG_CACHE_HOME")) o.cacheDir = std::string(x) + "/kiln";
    else if (const char *h = env("HOME")) o.cacheDir = std::string(h) + "/.cache/kiln";
    else o.cacheDir = "/tmp/kiln-cache";
  }
  if (!o.cacheMode) {
    if (const char *m = env("KILN_CACHE")) {
      o.cacheMode = parseCacheMode(m);
      if (!o.cacheMode)
        return error(ErrorCode::kInvalidArgument, "KILN_CACHE='%s': expected off, ro or rw", m);
    } else {
      o.cacheMode = CacheMode::kReadWrite;
    }
  }
  if (const char *m = env("KILN_OP_MODE")) {
    auto parsed = ops::parseOpModes(m);
    if (!parsed) return withContext(parsed.takeError(), "KILN_OP_MODE: ");
    parsed->merge(o.placement);  // explicit entries win
    o.placement = std::move(*parsed);
  }
  if (o.dumpIRDir.empty())
    if (const char *d = env("KILN_DUMP_IR")) o.dumpIRDir = d;
  if (!o.dumpIRPasses) {
    const char *p = env("KILN_DUMP_IR_PASSES");
    o.dumpIRPasses = p && llvm::StringRef(p) == "1";
  }
  if (!o.jitSymbols) {
    const char *p = env("KILN_PERF");
    o.jitSymbols = p && llvm::StringRef(p) == "1";
  }
  if (o.memoryLimitBytes == 0)
    if (const char *m = env("KILN_MEMORY_LIMIT")) {
      auto bytes = parseByteSize(m);
      if (!bytes) return error(ErrorCode::kInvalidArgument, "KILN_MEMORY_LIMIT='%s': expected bytes, e.g. 512M or 2G", m);
      o.memoryLimitBytes = *bytes;
    }
  if (!o.compilePolicy) {
    const char *p = env("KILN_COMPILE_POLICY");
    o.compilePolicy = p ? parseCompilePolicy(p) : RuntimeOptions::CompilePolicy::kWait;
    if (!o.compilePolicy)
      return error(ErrorCode::kInvalidArgument, "KILN_COMPILE_POLICY='%s': expected wait, tiered or kernels-only", p);
  }
  for (auto [flag, name, otherwise] :
       {std::tuple{&o.gpuGraphs, "KILN_GPU_GRAPHS", false}, std::tuple{&o.gpuTf32, "KILN_GPU_TF32", false},
        std::tuple{&o.gpuProfile, "KILN_GPU_PROFILE", false}, std::tuple{&o.batchRanges, "KILN_BATCH_RANGES", true},
        std::tuple{&o.hugePageWeights, "KILN_HUGE_PAGES", true}})
    if (llvm::Error e = switchFromEnvironment(*flag, name, otherwise)) return std::move(e);
  if (o.gpuConvAlgo.empty())
    if (const char *a = env("KILN_GPU_CONV_ALGO")) o.gpuConvAlgo = a;
  if (o.gpuConvAlgo.empty()) o.gpuConvAlgo = "find";
  if (o.gpuConvAlgo != "find" && o.gpuConvAlgo != "heuristic")
    return error(ErrorCode::kInvalidArgument,
                 "GPU convolution algorithm choice '%s' (KILN_GPU_CONV_ALGO): expected find (each algorithm timed once) or heuristic",
                 o.gpuConvAlgo.c_str());
  if (!o.hotBatchCalls) {
    const char *h = env("KILN_HOT_BATCH_CALLS");
    int64_t calls = 8;
    if (h && (llvm::StringRef(h).getAsInteger(10, calls) || calls < 0 || calls > (1 << 30)))
      return error(ErrorCode::kInvalidArgument, "KILN_HOT_BATCH_CALLS='%s': expected a number of calls (0 = never)", h);
    o.hotBatchCalls = int(calls);
  }
  if (!o.prefetchBytes)
    if (const char *p = env("KILN_PREFETCH_BYTES")) {
      int bytes = 0;
      if (llvm::StringRef(p).getAsInteger(10, bytes) || bytes < 0 || bytes > kMaxPrefetchBytes)
        return error(ErrorCode::kInvalidArgument, "KILN_PREFETCH_BYTES='%s': expected bytes from 0 (off) to %d",
                     p, kMaxPrefetchBytes);
      o.prefetchBytes = bytes;
    }
  if (o.prefetchBytes && (*o.prefetchBytes < 0 || *o.prefetchBytes > kMaxPrefetchBytes))
    return error(ErrorCode::kInvalidArgument, "prefetch distance %d bytes: expected 0 (off) to %d",
                 *o.prefetchBytes, kMaxPrefetchBytes);
  if (!o.hotShapeCalls) {
    const char *h = env("KILN_HOT_SHAPE_CALLS");
    int64_t calls = 2;
    if (h && (llvm::StringRef(h).getAsInteger(10, calls) || calls < 1 || calls > (1 << 30)))
      return error(ErrorCode::kInvalidArgument, "KILN_HOT_SHAPE_CALLS='%s': expected a number of calls (at least 1)", h);
    o.hotShapeCalls = int(calls);
  }
  if (o.maxVectorBits == 0)
    if (const char *b = env("KILN_MAX_VECTOR_BITS")) {
      llvm::StringRef text(b);
      if (text.getAsInteger(10, o.maxVectorBits))
        return error(ErrorCode::kInvalidArgument, "KILN_MAX_VECTOR_BITS='%s': expected 128, 256 or 512", b);
    }
  if (o.maxVectorBits != 0 && o.maxVectorBits != 128 && o.maxVectorBits != 256 && o.maxVectorBits != 512)
    return error(ErrorCode::kInvalidArgument, "maximum vector width %d bits: expected 128, 256 or 512",
                 o.maxVectorBits);
  if (!(o.callTimeoutSeconds >= 0) || o.callTimeoutSeconds > 1e9)
    return error(ErrorCode::kInvalidArgument, "call timeout %g s: expected 0 (none) or a positive number of seconds",
                 o.callTimeoutSeconds);
  if (o.maxCallsInFlight < 0)
    return error(ErrorCode::kInvalidArgument, "maximum calls in flight %d: expected 0 (no limit) or more",
                 o.maxCallsInFlight);
  if (o.device.empty()) {
    const char *d = env("KILN_DEVICE");
    o.device = d ? d : "cpu";
  }
  {
    llvm::StringRef d(o.device);
    unsigned ordinal = 0;
    bool ok = d == "cpu" || d == "cuda" || (d.consume_front("cuda:") && !d.getAsInteger(10, ordinal) && ordinal < 64);
    if (!ok)
      return error(ErrorCode::kInvalidArgument, "device '%s': expected cpu, cuda or cuda:N", o.device.c_str());
  }
  if (!o.gpuArch.empty()) {
    llvm::StringRef a(o.gpuArch);
    unsigned cc = 0;
    if (!a.consume_front("sm_") || a.consumeInteger(10, cc) || !(a.empty() || a == "a") || cc < 50)
      return error(ErrorCode::kInvalidArgument, "GPU architecture '%s': expected sm_XY, e.g. sm_90",
                   o.gpuArch.c_str());
  }
  if (!o.warnings) o.warnings = warnToStderr;
  return o;
}

int RuntimeOptions::gpuOrdinal() const {
  llvm::StringRef d(device);
  if (d == "cuda") return 0;
  unsigned n = 0;
  if (d.consume_front("cuda:") && !d.getAsInteger(10, n)) return int(n);
  return -1;
}

}  // namespace kiln
