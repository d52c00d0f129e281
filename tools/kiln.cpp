// kiln: the command-line driver.
//   kiln run <file.mlir | built-in model> [--function NAME] [--input ARG=FILE.npy]...
//            [--output DIR] [--iterations N] [--warmup N] [--explain] [--op-mode OP=MODE,...]
//   kiln import <model.onnx | model.pt2> [-o model.mlir | model.mlirbc]
//   kiln profile <model> [--input ARG=FILE.npy]... [--iterations N] [--out DIR] [--serial]
//   kiln prewarm <model> [--function NAME] [--shape ARG=DIMS]...
//   kiln cache stats | ls | clear | explain <model> [--shape ARG=DIMS]...
//   kiln models            list the built-in models
#include "cache/CacheKey.h"
#include "jit/CompileService.h"
#include "jit/Compiler.h"
#include "runtime/Clock.h"
#include "api/Kiln.h"
#include "api/Profiler.h"
#include "tools/Import.h"
#include "runtime/FileIO.h"
#include "runtime/Npy.h"
#include "lowering/models/BuiltinModels.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <optional>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <exception>
#include <new>
#include <system_error>
#include <sys/resource.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <limits>
#include <map>
#include <random>

namespace {
using kiln::Clock;
using kiln::msSince;


int fail(const std::string &msg) {
  std::fprintf(stderr, "kiln: error: %s\n", msg.c_str());
  return 1;
}
/// A command line kiln cannot take: one line, exit 1, like a parse error.
int usage(const std::string &msg) { return fail(msg + " (see kiln --help)"); }

/// Deterministic inputs: floats in [-1, 1), integers in [0, 8), booleans.
llvm::Expected<kiln::Tensor> randomTensor(const kiln::TensorType &type, unsigned seed, const std::string &what) {
  auto allocated = kiln::Tensor::allocate(type.dtype, type.shape, what);
  if (!allocated) return allocated.takeError();
  kiln::Tensor t = std::move(*allocated);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = real(rng);
    int iv = int(rng() % 8);
    switch (type.dtype) {
    case kiln::DType::f32: t.data<float>()[i] = v; break;
    case kiln::DType::f64: t.data<double>()[i] = v; break;
    case kiln::DType::f16: t.data<uint16_t>()[i] = kiln::floatToHalf(v); break;
    case kiln::DType::bf16: t.data<uint16_t>()[i] = kiln::floatToBf16(v); break;
    case kiln::DType::i64: t.data<int64_t>()[i] = iv; break;
    case kiln::DType::i32: t.data<int32_t>()[i] = iv; break;
    case kiln::DType::i16: t.data<int16_t>()[i] = int16_t(iv); break;
    case kiln::DType::i8: t.data<int8_t>()[i] = int8_t(iv); break;
    case kiln::DType::u8: t.data<uint8_t>()[i] = uint8_t(iv); break;
    case kiln::DType::i1: t.data<uint8_t>()[i] = iv & 1; break;
    }
  }
  return t;
}

struct CommonOptions {
  int optLevel = 3;
  std::string cacheDir;   // --cache-dir
  std::string cacheMode;  // --cache off|ro|rw
  std::string opModes;    // --op-mode tosa.conv2d=kernel,...
  std::string dumpIR;     // --dump-ir DIR
  bool dumpIRPasses = false;  // --dump-ir-passes
  std::string device;     // --device cpu|cuda[:N]
  std::string gpuArch;    // --gpu-arch sm_90
  double timeout = 0;     // --timeout SEC: the whole run (first call and iterations)
  int threads = 0;        // --threads N: executor workers (0 = the machine's cores)
  int warmup = 0;         // --warmup N: untimed calls after the first
  bool serial = false;    // profile --serial: one step at a time
  std::string memoryLimit;  // --memory-limit BYTES[K|M|G]
  std::string placement;    // --placement measure|fixed
  std::string compilePolicy;  // --compile-policy wait|tiered|kernels-only
  std::string batchRanges;    // --batch-ranges on|off
};

llvm::Expected<std::unique_ptr<kiln::Runtime>> makeRuntime(const CommonOptions &o) {
  kiln::RuntimeOptions options;
  options.optLevel = o.optLevel;
  options.threads = o.threads;
  options.serialSteps = o.serial;
  options.cacheDir = o.cacheDir;
  options.device = o.device;
  options.gpuArch = o.gpuArch;
  if (!o.memoryLimit.empty()) {
    auto bytes = kiln::parseByteSize(o.memoryLimit);
    if (!bytes) return llvm::createStringError("--memory-limit %s: expected bytes, e.g. 512M or 2G", o.memoryLimit.c_str());
    options.memoryLimitBytes = *bytes;
  }
  if (!o.dumpIR.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(o.dumpIR))
      return llvm::createStringError("--dump-ir %s: %s", o.dumpIR.c_str(), ec.message().c_str());
    options.dumpIRDir = o.dumpIR;
  }
  if (o.dumpIRPasses) {
    if (o.dumpIR.empty()) return llvm::createStringError("--dump-ir-passes needs --dump-ir DIR");
    options.dumpIRPasses = true;
  }
  if (!o.cacheMode.empty()) {
    auto mode = kiln::parseCacheMode(o.cacheMode);
    if (!mode)
      return llvm::createStringError("--cache %s: expected off, ro or rw", o.cacheMode.c_str());
    options.cacheMode = *mode;
  }
  if (!o.opModes.empty()) {
    auto modes = kiln::ops::parseOpModes(o.opModes);
    if (!modes) return llvm::createStringError("--op-mode: %s", llvm::toString(modes.takeError()).c_str());
    options.placement = *modes;
  }
  if (!o.placement.empty()) {
    if (o.placement != "measure" && o.placement != "fixed")
      return llvm::createStringError("--placement %s: expected measure or fixed", o.placement.c_str());
    options.placement.measure = o.placement == "measure";
  }
  if (!o.compilePolicy.empty()) {
    options.compilePolicy = kiln::parseCompilePolicy(o.compilePolicy);
    if (!options.compilePolicy)
      return llvm::createStringError("--compile-policy %s: expected wait, tiered or kernels-only",
                                     o.compilePolicy.c_str());
  }
  if (!o.batchRanges.empty()) {
    if (o.batchRanges != "on" && o.batchRanges != "off")
      return llvm::createStringError("--batch-ranges %s: expected on or off", o.batchRanges.c_str());
    options.batchRanges = o.batchRanges == "on";
  }
  return kiln::Runtime::create(options);
}

llvm::Expected<std::unique_ptr<kiln::Module>> loadModel(kiln::Runtime &rt, const std::string &model) {
  if (const auto *m = kiln::models::findBuiltinModel(model)) {  // built in memory, no text
    auto program = m->build();
    if (!program) return program.takeError();
    return rt.loadProgram(std::move(*program));
  }
  if (!llvm::sys::fs::exists(model))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "'%s' is neither a file nor a built-in model (built-in: %s)",
                                   model.c_str(), llvm::join(kiln::models::builtinModelNames(), ", ").c_str());
  return rt.loadModuleFromFile(model);
}

/// Input types of `function` from --shape ARG=1x224x224x3 flags (ARG: name or
/// position); arguments without a flag must have static shapes.
llvm::Expected<std::vector<kiln::TensorType>> typesFromShapes(const kiln::FunctionSignature &sig,
                                                              const std::vector<std::string> &specs) {
  std::vector<kiln::TensorType> types;
  for (const auto &a : sig.args) types.push_back(a.type);
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return llvm::createStringError("--shape '%s' is not ARG=DIMS (e.g. x=1x224x224x3)", spec.c_str());
    std::string arg = spec.substr(0, eq);
    int index = -1;
    for (size_t i = 0; i < sig.args.size(); ++i)
      if (sig.args[i].name == arg || std::to_string(i) == arg) index = int(i);
    if (index < 0)
      return llvm::createStringError("--shape %s: @%s has no argument '%s'", arg.c_str(),
                                     sig.name.c_str(), arg.c_str());
    auto shape = kiln::parseShape(spec.substr(eq + 1));
    if (!shape) return llvm::createStringError("--shape %s: %s", arg.c_str(),
                                               llvm::toString(shape.takeError()).c_str());
    types[index].shape = *shape;
  }
  for (size_t i = 0; i < types.size(); ++i)
    if (!types[i].isStatic())
      return llvm::createStringError("argument %zu%s of @%s is tensor<%s>: give its shape with --shape %s=...",
                                     i, sig.args[i].name.empty() ? "" : (" ('" + sig.args[i].name + "')").c_str(),
                                     sig.name.c_str(), types[i].str().c_str(),
                                     sig.args[i].name.empty() ? std::to_string(i).c_str() : sig.args[i].name.c_str());
  if (auto err = kiln::checkInputs(sig, types)) return std::move(err);
  return types;
}

/// The function --function names; without one, @main, or the module's only
/// public function (an ONNX import's @main_graph). `function` is set to the
/// name found.
const kiln::FunctionSignature *findFunction(kiln::Module &m, std::string &function, const std::string &model,
                                            std::string &error) {
  if (const kiln::FunctionSignature *sig = m.resolve(function)) {
    function = sig->name;
    return sig;
  }
  bool given = !function.empty();
  error = "no public function @" + (given ? function : "main") + " in '" + model + "' (it has: " +
          kiln::functionNames(m.functions()) + ")" +
          (given || m.functions().empty() ? "" : "; name one with --function");
  return nullptr;
}

/// "tosa.conv2d x53, tosa.add x16, ..." (program order of first use) for
/// long lists; short ones as they are.
static std::string opList(const std::vector<std::string> &ops) {
  if (ops.size() <= 12) return llvm::join(ops, ", ");
  std::vector<std::pair<std::string, int>> counts;
  for (const std::string &op : ops) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto &c) { return c.first == op; });
    if (it == counts.end()) counts.push_back({op, 1});
    else ++it->second;
  }
  std::string s = std::to_string(ops.size()) + " ops: ";
  for (size_t i = 0; i < counts.size(); ++i)
    s += (i ? ", " : "") + counts[i].first + (counts[i].second > 1 ? " x" + std::to_string(counts[i].second) : "");
  return s;
}

/// Whether calls of `sig` may be split along the batch (range code), and
/// why not.
std::string describeBatch(const kiln::FunctionSignature &sig) {
  const kiln::BatchDimension &b = sig.batch;
  if (!b.separable) return "not separable (" + b.why + "): each batch size compiles on its own";
  std::string in, out;
  for (size_t i = 0; i < b.inputs.size(); ++i)
    if (b.inputs[i]) in += (in.empty() ? "" : ", ") + std::to_string(i);
  for (size_t i = 0; i < b.results.size(); ++i)
    out += (out.empty() ? "" : ", ") + std::to_string(i) + "@" + std::to_string(b.results[i]);
  return "separable along dimension 0 of input(s) " + in + " (result@dim: " + out +
         "): one compile at batch 1 serves every batch size";
}

/// `kiln run`, and `kiln profile` (with `profileDir`: the calls are
/// recorded, the per-kernel table printed and the trace written there).
int runCommand(const std::string &model, std::string function,
               const std::vector<std::string> &inputSpecs, const std::string &outputDir,
               int iterations, bool explain, const CommonOptions &common,
               const std::optional<std::string> &profileDir = std::nullopt) {
  auto rt = makeRuntime(common);
  if (!rt) return fail(llvm::toString(rt.takeError()));
  std::unique_ptr<kiln::Profiler> profiler;  // from the load on
  if (profileDir) profiler = std::make_unique<kiln::Profiler>(**rt);
  auto loadStart = Clock::now();
  auto module = loadModel(**rt, model);
  if (!module) return fail(llvm::toString(module.takeError()));
  double loadMs = msSince(loadStart);
  std::string error;
  const kiln::FunctionSignature *sig = findFunction(**module, function, model, error);
  if (!sig) return fail(error);

  // Inputs: ARG=FILE.npy where ARG is a position or an argument name.
  std::vector<kiln::Tensor> inputs(sig->args.size());
  std::vector<bool> bound(sig->args.size(), false);
  for (const std::string &spec : inputSpecs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      return fail("--input '" + spec + "' is not ARG=FILE.npy");
    std::string arg = spec.substr(0, eq), file = spec.substr(eq + 1);
    if (arg.empty()) return usage("--input '" + spec + "' names no argument (ARG=FILE.npy, ARG a position or a name)");
    if (file.empty()) return usage("--input '" + spec + "' names no file");
    int index = -1;
    for (size_t i = 0; i < sig->args.size(); ++i)  // a position, else a name (unnamed arguments have none)
      if (std::to_string(i) == arg) index = int(i);
    for (size_t i = 0; index < 0 && i < sig->args.size(); ++i)
      if (!sig->args[i].name.empty() && sig->args[i].name == arg) index = int(i);
    if (index < 0)
      return fail("--input " + arg + ": @" + function + " has no argument '" + arg + "'");
    if (inputs[index].valid() || bound[index])
      return usage("--input " + arg + ": argument " + std::to_string(index) +
                   (sig->args[index].name.empty() ? "" : " ('" + sig->args[index].name + "')") +
                   " is given twice");
    bound[index] = true;
    auto t = kiln::readNpy(file);
    if (!t) return fail("--input " + arg + ": " + llvm::toString(t.takeError()));
    inputs[index] = *t;
  }
  if (!sig->unsupported.empty()) return fail(llvm::toString(kiln::checkInputs(*sig, {})));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].valid()) continue;
    kiln::TensorType type = sig->args[i].type;
    for (int64_t &d : type.shape)
      if (d == kiln::kDynamic) d = 1;
    if (auto err = kiln::checkAllocatable(type.byteSize(), "random input " + std::to_string(i) + " (tensor<" +
                                                               type.str() + ">)"))
      return fail(llvm::toString(std::move(err)));
    auto random = randomTensor(type, unsigned(1234 + i), "random input " + std::to_string(i));
    if (!random) return fail(llvm::toString(random.takeError()));
    inputs[i] = std::move(*random);
    std::printf("input %zu%s: random tensor<%s>%s\n", i,
                sig->args[i].name.empty() ? "" : (" (" + sig->args[i].name + ")").c_str(),
                type.str().c_str(), sig->args[i].type.isStatic() ? "" : " (dynamic dims set to 1)");
  }

  std::vector<kiln::TensorType> types;
  for (auto &t : inputs) types.push_back(t.type());
  if (auto err = kiln::checkInputs(*sig, types))
    return fail(llvm::toString(std::move(err)));

  auto t0 = Clock::now();
  // --timeout: one deadline for the whole run; a call past it is cancelled
  // (between steps and inside loops of unknown length).
  auto token = std::make_shared<kiln::CancellationToken>();
  if (common.timeout > 0) token->setDeadline(t0 + std::chrono::nanoseconds(int64_t(common.timeout * 1e9)));
  auto call = [&]() -> llvm::Expected<std::vector<kiln::Tensor>> {
    std::vector<kiln::Tensor> out;
    for (auto &f : (*module)->callAsync(function, inputs, token)) {
      auto v = f.awaitValue();
      if (!v) return v.takeError();
      out.push_back(std::move(*v));
    }
    return out;
  };
  auto result = call();
  double firstMs = msSince(t0);
  if (!result) return fail(llvm::toString(result.takeError()));
  // Tiered: the first call ran on a kernel plan; the steady state is the
  // compiled code's, once it is swapped in.
  // Also the weights' move into huge pages that the first call left to the
  // background: the timed calls run after it.
  bool onPlan = (*module)->tierStats().kernelPlanCalls > 0;
  (*module)->waitForBackgroundCompiles();
  // The code that serves the steady state: at a batch size that runs as
  // calls of batch 1, batch 1's (compiling the size's own code here would
  // time code the calls never get, and break kernels-only's promise of no
  // JIT compile).
  auto compiled = (*module)->compile(function, (*module)->servingTypes(function, types));
  if (!compiled) return fail(llvm::toString(compiled.takeError()));

  // `count` more calls (`what` names them in a timeout's message), each
  // one's milliseconds into `times` when given; kiln's exit status when one
  // fails or the deadline passes.
  auto repeat = [&](int count, const char *what, std::vector<double> *times) -> std::optional<int> {
    auto timedOut = [&](int done) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "--timeout %g s passed after %d of %d %s", common.timeout, done, count, what);
      return fail(msg);
    };
    for (int i = 0; i < count; ++i) {
      if (token->cancelled()) return timedOut(i);
      auto t1 = Clock::now();
      auto r = call();
      if (times) times->push_back(msSince(t1));
      if (!r && token->cancelled()) {  // the deadline passed during this call
        llvm::consumeError(r.takeError());
        return timedOut(i);
      }
      if (!r) return fail(llvm::toString(r.takeError()));
    }
    return std::nullopt;
  };
  if (auto status = repeat(common.warmup, "warm-up calls", nullptr)) return *status;
  std::vector<double> times;
  if (auto status = repeat(iterations, "iterations", &times)) return *status;
  std::sort(times.begin(), times.end());

  for (size_t i = 0; i < result->size(); ++i) {
    const kiln::Tensor &out = (*result)[i];
    double sum = 0, absSum = 0;
    for (int64_t j = 0; j < out.numElements(); ++j) {
      double v = out.elementAsDouble(j);
      sum += v;
      absSum += std::abs(v);
    }
    std::printf("output %zu: tensor<%s> sum=%.6g abs_sum=%.6g first=[", i, out.type().str().c_str(),
                sum, absSum);
    for (int64_t j = 0; j < std::min<int64_t>(out.numElements(), 8); ++j)
      std::printf("%s%.6g", j ? ", " : "", out.elementAsDouble(j));
    std::printf("%s]\n", out.numElements() > 8 ? ", ..." : "");
  }
  if (explain) {
    std::printf("graph rewrites at load: %s\n", (*module)->graphRewrites().c_str());
    std::printf("batch: %s\n", describeBatch(*sig).c_str());
    std::printf("placement: %s\n", (*compiled)->placementSummary().c_str());
    for (const auto &step : (*compiled)->plan.steps) {
      bool jit = step.kind == kiln::lowering::PlanStep::kJit;
      // Provenance: where the step's first op comes from in the model.
      std::string from = step.locations.empty() || step.locations.front() == "<unknown location>"
                             ? ""
                             : "  [" + step.locations.front() + (step.locations.size() > 1 ? ", ..." : "") + "]";
      std::printf("  step %-12s %s%s\n", jit ? step.name.c_str() : "kernel",
                  jit ? ("JIT (" + step.target + "): " + opList(step.ops)).c_str()
                      : (step.kernel + " (" + step.op + ", " + step.reason + ")").c_str(),
                  from.c_str());
    }
  }
  const auto &stats = (*compiled)->stats;
  std::printf("load: %.2f ms (read, parse and rewrite the model; before the first call)  [", loadMs);
  {
    auto phases = (*module)->loadTimes();
    for (size_t i = 0; i < phases.size(); ++i)
      std::printf("%s%s %.1f", i ? ", " : "", phases[i].first.c_str(), phases[i].second);
  }
  std::printf("]\n");
  if (onPlan) {
    std::printf("first call (kernel plan + run, the JIT compile in the background): %.2f ms\n", firstMs);
    for (const std::string &e : (*module)->tierStats().events) std::printf("  tiers: %s\n", e.c_str());
    std::printf("background ");
  } else {
    std::printf("first call ");
  }
  std::printf("(%s%s): %.2f ms  [", stats.fromObject ? "load from disk cache" : "compile", onPlan ? "" : " + run",
              onPlan ? stats.totalMs : firstMs);
  for (size_t i = 0; i < stats.stages.size(); ++i)
    std::printf("%s%s %.1f", i ? ", " : "", stats.stages[i].stage.c_str(), stats.stages[i].ms);
  std::printf("]\n");
  if (!stats.fromObject && stats.kernelsCompiled > 0)
    std::printf("  (lowering and LLVM stages summed over %d JIT kernels compiled on %d threads; %d more shared "
                "an identical kernel's code)\n",
                stats.kernelsCompiled, stats.compileThreads, stats.kernelsShared);
  if (kiln::jit::CompileServiceStats service = (**rt).compileService().stats(); service.hugePageBytes)
    std::printf("  weights into huge pages after the first call, in the background: %.1f MB in %.1f ms\n",
                double(service.hugePageBytes) / 1e6, service.hugePageMs);
  if (!times.empty())
    std::printf("steady state: median %.4f ms, min %.4f ms, p90 %.4f ms over %d iterations\n",
                times[times.size() / 2], times.front(), times[std::min(times.size() - 1, times.size() * 9 / 10)],
                iterations);

  if (profiler) {
    kiln::Profile prof = profiler->stop();
    if (common.serial)
      std::printf("\nsteps ran one at a time (--serial): each kernel's time is its own, each call's the sum\n");
    std::printf("\n%s", prof.table().c_str());
    if (!profileDir->empty()) {
      if (auto ec = llvm::sys::fs::create_directories(*profileDir))
        return fail("cannot create profile directory '" + *profileDir + "': " + ec.message());
      for (auto [name, text] : {std::pair<std::string, std::string>{"trace.json", prof.chromeTraceJson()},
                                {"kernels.txt", prof.table(SIZE_MAX)},
                                {"report.html", prof.htmlReport()}}) {
        std::string path = *profileDir + "/" + name;
        if (auto err = kiln::writeFileReplacing(path, text)) return fail(llvm::toString(std::move(err)));
      }
      std::printf("wrote %s/trace.json (open in https://ui.perfetto.dev or chrome://tracing), %s/kernels.txt and "
                  "%s/report.html\n",
                  profileDir->c_str(), profileDir->c_str(), profileDir->c_str());
    }
  }

  if (!outputDir.empty()) {
    if (auto ec = llvm::sys::fs::create_directories(outputDir))
      return fail("cannot create output directory '" + outputDir + "': " + ec.message());
    for (size_t i = 0; i < result->size(); ++i) {
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, "out" + std::to_string(i) + ".npy");
      if (auto err = kiln::writeNpy(path, (*result)[i])) return fail(llvm::toString(std::move(err)));
      std::printf("wrote %s\n", path.c_str());
    }
  }
  return 0;
}

/// A runtime, the model and `function`'s input types from --shape flags.
struct ShapedFunction {
  std::unique_ptr<kiln::Runtime> rt;
  std::unique_ptr<kiln::Module> module;
  std::vector<kiln::TensorType> types;
};
llvm::Expected<ShapedFunction> loadShaped(const std::string &model, std::string &function,
                                          const std::vector<std::string> &shapes, const CommonOptions &common) {
  ShapedFunction out;
  auto rt = makeRuntime(common);
  if (!rt) return rt.takeError();
  out.rt = std::move(*rt);
  auto module = loadModel(*out.rt, model);
  if (!module) return module.takeError();
  out.module = std::move(*module);
  std::string error;
  const kiln::FunctionSignature *sig = findFunction(*out.module, function, model, error);
  if (!sig) return llvm::createStringError("%s", error.c_str());
  auto types = typesFromShapes(*sig, shapes);
  if (!types) return types.takeError();
  out.types = std::move(*types);
  return out;
}

/// --shape flags as signatures to prewarm: a flag for an argument the
/// current signature already has starts the next signature (`--shape
/// 0=5x16 --shape 0=7x16` is two), and a dimension LO..HI stands for every
/// size from LO to HI (`--shape 0=1..4x16` is four). At most 256 in all.
llvm::Expected<std::vector<std::vector<std::string>>> shapeSignatures(const std::vector<std::string> &specs) {
  constexpr size_t kMaxSignatures = 256;
  std::vector<std::vector<std::string>> groups(1);
  std::vector<std::string> seen;
  for (const std::string &spec : specs) {
    std::string arg = spec.substr(0, spec.find('='));
    if (llvm::is_contained(seen, arg)) {
      groups.emplace_back();
      seen.clear();
    }
    seen.push_back(arg);
    groups.back().push_back(spec);
  }
  std::vector<std::vector<std::string>> out;
  for (const auto &group : groups) {
    std::vector<std::vector<std::string>> expanded(1);
    for (const std::string &spec : group) {
      size_t eq = spec.find('=');
      if (eq == std::string::npos) {  // typesFromShapes says what is wrong with it
        for (auto &e : expanded) e.push_back(spec);
        continue;
      }
      // Each dimension: a size, or LO..HI.
      std::vector<std::string> variants = {""};
      llvm::SmallVector<llvm::StringRef> dims;
      llvm::StringRef(spec).substr(eq + 1).split(dims, 'x');
      for (size_t d = 0; d < dims.size(); ++d) {
        std::vector<std::string> next;
        auto [lo, hi] = dims[d].split("..");
        int64_t a = 0, b = 0;
        if (dims[d].contains("..")) {
          if (lo.getAsInteger(10, a) || hi.getAsInteger(10, b) || a < 0 || b < a)
            return llvm::createStringError("--shape %s: '%s' is not a range LO..HI of sizes (0 <= LO <= HI)",
                                           spec.c_str(), dims[d].str().c_str());
          if (uint64_t(b - a) >= kMaxSignatures)
            return llvm::createStringError("--shape %s: %s is more than %zu sizes", spec.c_str(),
                                           dims[d].str().c_str(), kMaxSignatures);
        }
        for (const std::string &v : variants) {
          std::string sep = d == 0 ? "" : "x";
          if (!dims[d].contains("..")) next.push_back(v + sep + dims[d].str());
          else
            for (int64_t n = a; n <= b; ++n) next.push_back(v + sep + std::to_string(n));
          if (next.size() > kMaxSignatures)
            return llvm::createStringError("--shape %s: more than %zu shapes", spec.c_str(), kMaxSignatures);
        }
        variants = std::move(next);
      }
      std::vector<std::vector<std::string>> grown;
      for (const auto &e : expanded)
        for (const std::string &v : variants) {
          grown.push_back(e);
          grown.back().push_back(spec.substr(0, eq + 1) + v);
        }
      expanded = std::move(grown);
      if (expanded.size() + out.size() > kMaxSignatures)
        return llvm::createStringError("--shape flags give more than %zu signatures to prewarm", kMaxSignatures);
    }
    for (auto &e : expanded) out.push_back(std::move(e));
  }
  return out;
}

int prewarmCommand(const std::string &model, std::string function,
                   const std::vector<std::string> &shapes, const CommonOptions &common) {
  auto signatures = shapeSignatures(shapes);
  if (!signatures) return usage(llvm::toString(signatures.takeError()));
  auto target = loadShaped(model, function, signatures->front(), common);
  if (!target) return fail(llvm::toString(target.takeError()));
  kiln::Runtime *rt = target->rt.get();
  kiln::Module *module = target->module.get();
  const kiln::FunctionSignature *sig = module->signature(function);
  // Every signature's types first: a bad one fails before anything compiles.
  std::vector<std::vector<kiln::TensorType>> all = {target->types};
  for (size_t i = 1; i < signatures->size(); ++i) {
    auto types = typesFromShapes(*sig, (*signatures)[i]);
    if (!types) return fail(llvm::toString(types.takeError()));
    all.push_back(std::move(*types));
  }
  auto &cc = rt->compileService();
  std::vector<std::vector<kiln::TensorType>> served;  // the signatures compiled (or found) so far
  for (size_t i = 0; i < all.size(); ++i) {
    const std::vector<kiln::TensorType> &types = all[i];
    std::string sigText = kiln::cache::ShapeSignature::of(types).str();
    if (std::find(all.begin(), all.begin() + i, types) != all.begin() + i) {
      std::printf("prewarmed @%s (%s): given twice\n", function.c_str(), sigText.c_str());
      continue;
    }
    // Range code: a batch-separable function's batch sizes share batch 1's code.
    std::vector<kiln::TensorType> serving = module->servingTypes(function, types);
    bool again = std::find(served.begin(), served.end(), serving) != served.end();
    if (serving != types) {
      std::string servingText = kiln::cache::ShapeSignature::of(serving).str();
      std::printf("prewarmed @%s (%s): runs as calls of batch 1 (%s)%s\n", function.c_str(), sigText.c_str(),
                  servingText.c_str(), again ? ", prewarmed above" : "");
      sigText = servingText;
    } else if (again) {
      std::printf("prewarmed @%s (%s): prewarmed above\n", function.c_str(), sigText.c_str());
    }
    if (again) continue;
    served.push_back(serving);
    auto before = cc.stats();
    auto t0 = Clock::now();
    if (auto err = rt->prewarm(*module, function, {types})) return fail(llvm::toString(std::move(err)));
    auto st = cc.stats();
    bool fromDisk = st.diskHits > before.diskHits;
    bool stored = st.disk.writes > before.disk.writes;
    if (!fromDisk && !stored)
      return fail("the compile cache in '" + cc.disk().dir() + "' is " +
                  kiln::cache::cacheModeName(cc.disk().mode()).str() + "; nothing was stored");
    std::printf("prewarmed @%s (%s) in %.1f ms: %s; cache %s (%s)\n", function.c_str(), sigText.c_str(),
                msSince(t0), fromDisk ? "already on disk" : "compiled and stored", cc.disk().dir().c_str(),
                kiln::cache::cacheModeName(cc.disk().mode()).str().c_str());
    std::fflush(stdout);
  }
  if (all.size() > 1) std::printf("prewarmed %zu signatures of @%s\n", all.size(), function.c_str());
  return 0;
}

int cacheCommand(const std::string &what, const CommonOptions &common) {
  auto rt = makeRuntime(common);
  if (!rt) return fail(llvm::toString(rt.takeError()));
  auto &disk = (*rt)->compileService().disk();
  if (what == "clear") {
    auto n = disk.clear();
    if (!n) return fail(llvm::toString(n.takeError()));
    std::printf("removed %zu entries from %s\n", *n, disk.dir().c_str());
    return 0;
  }
  auto entries = disk.list();
  if (what == "stats") {
    uint64_t bytes = 0;
    size_t bad = 0;
    for (auto &e : entries) {
      bytes += e.bytes;
      bad += !e.valid;
    }
    std::printf("directory: %s\nmode: %s\nentries: %zu (%zu unreadable or corrupt)\nbytes: %llu\nsize cap: %llu\n",
                disk.dir().c_str(), kiln::cache::cacheModeName(disk.mode()).str().c_str(), entries.size(),
                bad, (unsigned long long)bytes, (unsigned long long)(*rt)->options().cacheMaxBytes);
    return 0;
  }
  for (auto &e : entries)
    std::printf("%s  %8llu B  %6llds  %s\n", e.digest.c_str(), (unsigned long long)e.bytes,
                (long long)e.ageSeconds,
                e.valid ? ("@" + e.key.function + "(" + e.key.signature + ")").c_str()
                        : ("INVALID: " + e.problem).c_str());
  return 0;
}

int cacheExplainCommand(const std::string &model, std::string function,
                        const std::vector<std::string> &shapes, const CommonOptions &common) {
  auto target = loadShaped(model, function, shapes, common);
  if (!target) return fail(llvm::toString(target.takeError()));
  kiln::Runtime *rt = target->rt.get();
  kiln::Module *module = target->module.get();
  // Range code: a batch-separable function's call runs on batch 1's code.
  std::vector<kiln::TensorType> serving = module->servingTypes(function, target->types);
  if (serving != target->types)
    std::printf("runs as calls of batch 1 (%s): the key of that code\n",
                kiln::cache::ShapeSignature::of(serving).str().c_str());
  const std::vector<kiln::TensorType> *types = &serving;
  auto key = module->cacheKey(function, *types);
  if (!key) return fail(llvm::toString(key.takeError()));
  std::printf("key %s\n", key->digest().c_str());
  for (auto [name, value] : key->fields()) {
    std::string v = *value;
    if (v.size() > 100) v = v.substr(0, 97) + "...";
    std::printf("  %-13s %s\n", name, v.c_str());
  }
  std::printf("%s\n", rt->compileService().disk().explain(*key).c_str());
  return 0;
}

}  // namespace

/// Memory that runs out outside kiln's own tensor allocations (which are
/// errors naming their size): inside LLVM or MLIR while compiling, a thread
/// stack, a container. Nothing can continue then; the process says so and
/// exits 1 instead of aborting with "std::bad_alloc" or "LLVM ERROR".
[[noreturn]] void outOfMemory(const char *where, const char *detail = "") {
  // No allocation here: this runs when there is none to be had.
  char limit[96] = "";
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    std::snprintf(limit, sizeof limit, " (the address-space limit, ulimit -v, is %llu MiB)",
                  (unsigned long long)(rl.rlim_cur >> 20));
  char msg[640];
  int n = std::snprintf(msg, sizeof msg,
                        "kiln: error: out of memory %s%s%s: this run needs more memory than the process may have; "
                        "raise the limit or use fewer --threads\n",
                        where, detail, limit);
  if (n > 0) (void)!::write(2, msg, size_t(std::min<int>(n, int(sizeof msg) - 1)));
  ::_exit(1);
}

int runMain(int argc, char **argv) {
  std::set_new_handler([] { outOfMemory("(an allocation failed)"); });
  // A thread that cannot be created for want of memory (its stack does not
  // fit the address-space limit) ends in std::terminate with a system_error:
  // the same one line. Any other uncaught exception still aborts.
  static std::terminate_handler previous = std::set_terminate([] {
    if (std::exception_ptr e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::bad_alloc &) {
        outOfMemory("(an allocation failed)");
      } catch (const std::system_error &s) {
        if (s.code() == std::errc::resource_unavailable_try_again || s.code() == std::errc::not_enough_memory)
          outOfMemory("(a thread could not be created)");
      } catch (const std::runtime_error &r) {  // TBB's "pthread_create has failed: ..."
        if (std::strstr(r.what(), "pthread_create")) outOfMemory("(a thread could not be created)");
      } catch (...) {
      }
    }
    if (previous) previous();
    std::abort();
  });
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { outOfMemory("in LLVM: ", reason); });
  // A file-size limit (ulimit -f) makes writes fail with EFBIG, reported as
  // kiln errors, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"kiln: a JIT-compiling ML runtime (MLIR -> LLVM ORC)"};
  app.require_subcommand(1);

  std::string model, function, outputDir;  // function: empty = @main or the only one
  std::vector<std::string> inputs;
  int iterations = 10, optLevel = 3;
  CLI::App *run = app.add_subcommand("run", "compile on first call and run a model");
  run->add_option("model", model, "MLIR file (text or bytecode) or built-in model (mlp, cnn)")
      ->required();
  run->add_option("--function,-f", function, "function to call (default: @main, or the module's only public function)");
  run->add_option("--input,-i", inputs, "ARG=FILE.npy (ARG: position or argument name)");
  run->add_option("--output,-o", outputDir, "write outputs as DIR/out0.npy, ...");
  run->add_option("--iterations,-n", iterations, "timed calls after the first")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  run->add_option("--opt-level,-O", optLevel, "LLVM optimization level")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();

  CommonOptions common;
  bool explain = false;
  run->add_flag("--explain", explain, "print where each op runs (JIT cluster or handwritten kernel)");
  auto addCommon = [&](CLI::App *cmd) {
    cmd->add_option("--op-mode", common.opModes,
                    "per-op placement, e.g. tosa.conv2d=kernel,tosa.gather=jit,*=auto; measure=off: no timing of auto ops JIT against kernel (also $KILN_OP_MODE)");
    cmd->add_option("--placement", common.placement,
                    "measure: ops both JIT and a kernel can run go where timing says is faster (the default; another "
                    "process may choose differently, so results may differ in the last bits); fixed: no timing, the "
                    "same placement and bit-identical results in every process (= --op-mode measure=off)");
    cmd->add_option("--compile-policy", common.compilePolicy,
                    "a call of a new shape: wait for its compile (wait, the default), run at once on handwritten "
                    "kernels while the JIT compile runs in the background (tiered), or kernels only (kernels-only); "
                    "also $KILN_COMPILE_POLICY");
    cmd->add_option("--batch-ranges", common.batchRanges,
                    "on (the default): a function that computes its batch item by item runs every batch size as "
                    "calls of batch 1, one compile for all; off: each batch size compiles (also $KILN_BATCH_RANGES)");
    cmd->add_option("--cache-dir", common.cacheDir,
                    "compile cache directory (default: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln)");
    cmd->add_option("--cache", common.cacheMode, "compile cache mode: off, ro, rw (default: $KILN_CACHE or rw)");
    cmd->add_option("--dump-ir", common.dumpIR,
                    "write each kernel's IR after every stage to DIR/<kernel>.<n>.<stage> (1-4 MLIR, 5 LLVM IR, "
                    "6 optimized, 7 assembly; compiles, so use it with --cache off for cached models)");
    cmd->add_flag("--dump-ir-passes", common.dumpIRPasses,
                  "with --dump-ir: also the IR after every MLIR pass that changed it (<kernel>.<n>.<stage>.passes/)");
    cmd->add_option("--device", common.device,
                    "where generated code runs: cpu, cuda or cuda:N (default: $KILN_DEVICE, else cpu)");
    cmd->add_option("--gpu-arch", common.gpuArch, "GPU architecture to compile for, e.g. sm_90 (default: the GPU's)");
    cmd->add_option("--threads", common.threads, "executor threads that run steps and parallel loops (default: the machine's cores)")
        ->check(CLI::Range(0, 1024));
    cmd->add_option("--memory-limit", common.memoryLimit,
                    "most tensor memory kiln may hold, e.g. 512M or 2G (default: $KILN_MEMORY_LIMIT, else what the "
                    "system gives); past it a call fails saying what needed how much");
  };
  addCommon(run);
  run->add_option("--warmup", common.warmup, "untimed calls after the first, before the timed ones")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  auto addTimeout = [&](CLI::App *cmd) {
    cmd->add_option("--timeout", common.timeout,
                    "stop after SEC seconds (the first call and all iterations; a running call is cancelled)")
        ->check(CLI::Range(0.0, 1e9));
  };
  addTimeout(run);

  kiln::tools::ImportOptions importOptions;
  CLI::App *importCmd = app.add_subcommand(
      "import", "convert an ONNX file or a saved torch.export program (.pt2) to MLIR kiln loads (needs torch-mlir)");
  importCmd->add_option("model", importOptions.input, "model.onnx or model.pt2")->required();
  importCmd->add_option("--output,-o", importOptions.output, "output file (.mlir text, .mlirbc bytecode; default: MODEL.mlir)");
  importCmd->add_flag("--force,-f", importOptions.force, "replace an existing output file");

  std::string profileDir;
  CLI::App *profile = app.add_subcommand("profile", "run a model and profile its kernels (per-kernel table, trace)");
  profile->add_option("model", model, "MLIR file (text or bytecode) or built-in model")->required();
  profile->add_option("--function,-f", function, "function to call (default: @main, or the module's only public function)");
  profile->add_option("--input,-i", inputs, "ARG=FILE.npy (ARG: position or argument name)");
  profile->add_option("--iterations,-n", iterations, "profiled calls after the first")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  profile->add_option("--out", profileDir, "write trace.json (Chrome trace events) and kernels.txt here");
  profile->add_option("--opt-level,-O", optLevel, "LLVM optimization level")->check(CLI::Range(0, 3));
  addCommon(profile);
  profile->add_flag("--serial", common.serial,
                    "run one step at a time (each still on all threads): every kernel's time is its own, not "
                    "shared with independent steps running beside it");
  addTimeout(profile);

  std::vector<std::string> shapes;
  CLI::App *prewarm = app.add_subcommand(
      "prewarm", "compile a model into the persistent cache (--model-repository DIR: every model kiln serve would serve)");
  prewarm->add_option("model", model, "MLIR file or built-in model")->required();
  prewarm->add_option("--function,-f", function, "function to compile (default: @main, or the module's only public function)");
  prewarm->add_option("--shape,-s", shapes,
                      "ARG=DIMS for each argument with dynamic dims (e.g. x=1x64); repeat an argument's flag for "
                      "another signature (--shape x=1x64 --shape x=8x64), LO..HI for a range of sizes (x=1..8x64)");
  prewarm->add_option("--opt-level,-O", optLevel, "LLVM optimization level")->check(CLI::Range(0, 3));
  addCommon(prewarm);

  CLI::App *cacheCmd = app.add_subcommand("cache", "inspect the persistent compile cache");
  cacheCmd->require_subcommand(1);
  addCommon(cacheCmd);
  CLI::App *cacheStats = cacheCmd->add_subcommand("stats", "entries, bytes, size cap");
  CLI::App *cacheLs = cacheCmd->add_subcommand("ls", "list entries");
  CLI::App *cacheClear = cacheCmd->add_subcommand("clear", "remove every entry");
  CLI::App *cacheExplain = cacheCmd->add_subcommand("explain", "why a model's call would hit or miss");
  cacheExplain->add_option("model", model, "MLIR file or built-in model")->required();
  cacheExplain->add_option("--function,-f", function, "function (default: @main, or the module's only public function)");
  cacheExplain->add_option("--shape,-s", shapes, "ARG=DIMS for each argument with dynamic dims");
  cacheExplain->add_option("--opt-level,-O", optLevel, "LLVM optimization level")->check(CLI::Range(0, 3));
  for (CLI::App *sub : {cacheStats, cacheLs, cacheClear, cacheExplain})
    sub->fallthrough();  // --cache-dir / --cache may follow the subcommand

  CLI::App *list = app.add_subcommand("models", "list the built-in models");
  app.add_subcommand("serve", "serve a model repository over the Open Inference Protocol (kiln serve --help)")
      ->allow_extras();  // (main() hands `kiln serve` to kiln-serve before parsing)

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {  // usage errors: one line, exit 1, like every other error
    return fail(e.what() + std::string(" (see kiln --help)"));
  }
  common.optLevel = optLevel;
  // Compiling needs memory beyond what the libraries map: under an
  // address-space limit that leaves less, a run would fail at some
  // allocation inside LLVM or MLIR (not all of which are checked), so it is
  // refused at once with the same one line.
  if (*run || *profile || *prewarm) {
    constexpr uint64_t kCompileHeadroomBytes = uint64_t(160) << 20;
    struct rlimit rl;
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      uint64_t mapped = 0;
      if (FILE *f = std::fopen("/proc/self/statm", "re")) {
        unsigned long long pages = 0;
        if (std::fscanf(f, "%llu", &pages) == 1) mapped = uint64_t(pages) * uint64_t(::sysconf(_SC_PAGE_SIZE));
        std::fclose(f);
      }
      if (mapped && uint64_t(rl.rlim_cur) < mapped + kCompileHeadroomBytes) {
        char detail[160];
        std::snprintf(detail, sizeof detail, ": the limit leaves %llu MiB beyond kiln's libraries, it needs at least %llu MiB",
                      (unsigned long long)((uint64_t(rl.rlim_cur) > mapped ? uint64_t(rl.rlim_cur) - mapped : 0) >> 20),
                      (unsigned long long)(kCompileHeadroomBytes >> 20));
        outOfMemory("(before starting)", detail);
      }
    }
  }
  if (*run) return runCommand(model, function, inputs, outputDir, iterations, explain, common);
  if (*importCmd) {
    auto r = kiln::tools::importModel(importOptions);
    if (!r) return fail(llvm::toString(r.takeError()));
    std::printf("imported %s -> %s (%s)\n", importOptions.input.c_str(), r->output.c_str(), r->route.c_str());
    for (const std::string &f : r->functions) std::printf("  %s\n", f.c_str());
    std::printf("graph rewrites at load: %s\n", r->graphRewrites.c_str());
    return 0;
  }
  if (*profile) return runCommand(model, function, inputs, "", iterations, false, common, profileDir);
  if (*prewarm) return prewarmCommand(model, function, shapes, common);
  if (*cacheCmd) {
    if (*cacheExplain) return cacheExplainCommand(model, function, shapes, common);
    return cacheCommand(*cacheStats ? "stats" : *cacheLs ? "ls" : *cacheClear ? "clear" : "", common);
  }
  if (*list) {
    for (const std::string &name : kiln::models::builtinModelNames())
      std::printf("%-9s %s\n", name.c_str(),
                  kiln::models::findBuiltinModel(name)->description.c_str());
    return 0;
  }
  return 0;
}

/// `kiln serve ...` and `kiln prewarm --model-repository DIR ...` run
/// kiln-serve (installed beside kiln): the server sits on libkiln.so's public
/// API, not on the static libraries this program links.
static int execServer(int argc, char **argv, bool prewarmOnly) {
  std::string self = "kiln";
  if (char *exe = ::realpath("/proc/self/exe", nullptr)) {
    self = exe;
    std::free(exe);
  }
  std::string server = self.substr(0, self.rfind('/') + 1) + "kiln-serve";
  std::vector<char *> args{const_cast<char *>(server.c_str())};
  std::string flag = "--prewarm-only";
  if (prewarmOnly) args.push_back(flag.data());
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(server.c_str(), args.data());
  std::fprintf(stderr, "kiln: error: cannot run %s: %s (kiln serve is built with -DKILN_BUILD_SERVER=ON)\n",
               server.c_str(), std::strerror(errno));
  return 1;
}

int main(int argc, char **argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return execServer(argc, argv, false);
  if (argc >= 2 && std::strcmp(argv[1], "prewarm") == 0)
    for (int i = 2; i < argc; ++i)
      if (std::strncmp(argv[i], "--model-repository", 18) == 0) return execServer(argc, argv, true);
  int rc = runMain(argc, argv);
  // What was printed must have reached stdout (a full disk or /dev/full):
  // a clear error and a failing exit, not silence.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "kiln: error: cannot write standard output: %s\n", std::strerror(errno));
    return rc ? rc : 1;
  }
  return rc;
}
