#include "jit/GpuTarget.h"
#include "runtime/FileIO.h"
#include "runtime/Error.h"
#include "runtime/Executable.h"
#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"

#if KILN_HAVE_CUDA
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaLibraries.h"
#endif

#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

namespace kiln::jit {

llvm::Error faultError(int64_t fault, llvm::ArrayRef<std::string> sites);  // HostTarget.cpp

// ---------------------------------------------------------------------------
// The object: "KILNGPU1", a little-endian u64 header length, the JSON
// header, then the blobs it gives offsets for (PTX, cubin, constants).

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'G', 'P', 'U', '1'};

nlohmann::json launchJson(const lowering::GpuLaunch &l) {
  nlohmann::json j;
  if (l.kind == lowering::GpuLaunch::Kind::kCopy) {
    j = {{"copy", {l.src, l.dst, l.bytes}}};
    return j;
  }
  nlohmann::json args = nlohmann::json::array();
  for (const lowering::GpuKernelArg &a : l.args) {
    if (a.kind == lowering::GpuKernelArg::Kind::kBuffer) args.push_back({{"buffer", a.buffer}});
    else args.push_back({{"bits", a.bits}, {"bytes", a.bytes}});
  }
  if (l.kind == lowering::GpuLaunch::Kind::kLibrary) {
    j = {{"library", l.kernel}, {"params", l.params}, {"args", args}};
    return j;
  }
  j = {{"kernel", l.kernel}, {"grid", l.grid}, {"block", l.block}, {"shared", l.sharedBytes}, {"args", args}};
  return j;
}
}  // namespace

llvm::SmallVector<char, 0> GpuObject::serialize() const {
  nlohmann::json h;
  h["arch"] = arch;
  h["arguments"] = plan.argumentBytes;
  h["temporaries"] = plan.temporaries;
  h["faultSites"] = plan.faultSites;
  nlohmann::json launches = nlohmann::json::array();
  for (const lowering::GpuLaunch &l : plan.launches) launches.push_back(launchJson(l));
  h["launches"] = launches;
  std::vector<uint64_t> blobs = {ptx.size(), cubin.size()};
  for (const auto &c : plan.constants) blobs.push_back(c.size());
  h["blobs"] = blobs;
  std::string header = h.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  llvm::SmallVector<char, 0> out;
  out.append(kMagic, kMagic + 8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  out.append(header.begin(), header.end());
  out.append(ptx.begin(), ptx.end());
  out.append(cubin.begin(), cubin.end());
  for (const auto &c : plan.constants) out.append(c.begin(), c.end());
  return out;
}

llvm::Expected<GpuObject> GpuObject::parse(llvm::ArrayRef<char> bytes) {
  auto bad = [](const char *why) { return error(ErrorCode::kIO, "GPU object is damaged: %s", why); };
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, 8) != 0) return bad("no KILNGPU1 header");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[8 + i])) << (8 * i);
  if (n > bytes.size() - 16) return bad("header length past the end");
  GpuObject o;
  try {
    nlohmann::json h = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + n);
    o.arch = h.at("arch").get<std::string>();
    o.plan.argumentBytes = h.at("arguments").get<std::vector<uint64_t>>();
    o.plan.numArguments = uint32_t(o.plan.argumentBytes.size());
    o.plan.temporaries = h.at("temporaries").get<std::vector<uint64_t>>();
    o.plan.faultSites = h.at("faultSites").get<std::vector<std::string>>();
    std::vector<uint64_t> blobs = h.at("blobs").get<std::vector<uint64_t>>();
    if (blobs.size() < 2) return bad("too few blobs");
    size_t at = 16 + n;
    auto take = [&](uint64_t size, auto &into) -> bool {
      if (size > bytes.size() - at) return false;
      into.assign(bytes.begin() + at, bytes.begin() + at + size);
      at += size;
      return true;
    };
    if (!take(blobs[0], o.ptx) || !take(blobs[1], o.cubin)) return bad("blob past the end");
    for (size_t i = 2; i < blobs.size(); ++i) {
      o.plan.constants.emplace_back();
      if (!take(blobs[i], o.plan.constants.back())) return bad("constant past the end");
    }
    if (at != bytes.size()) return bad("trailing bytes");
    int numBuffers = o.plan.numBuffers();
    auto validBuffer = [&](int b) { return b >= 0 && b < numBuffers; };
    for (const nlohmann::json &j : h.at("launches")) {
      lowering::GpuLaunch l;
      if (j.contains("copy")) {
        l.kind = lowering::GpuLaunch::Kind::kCopy;
        l.src = j["copy"].at(0).get<int>();
        l.dst = j["copy"].at(1).get<int>();
        l.bytes = j["copy"].at(2).get<uint64_t>();
        if (!validBuffer(l.src) || !validBuffer(l.dst)) return bad("copy of a buffer that does not exist");
      } else if (j.contains("library")) {
        l.kind = lowering::GpuLaunch::Kind::kLibrary;
        l.kernel = j["library"].get<std::string>();
        l.params = j.at("params").get<std::vector<int64_t>>();
        size_t want = l.kernel == lowering::GpuLaunch::kConv2dNhwcFhwc ? lowering::GpuLaunch::kConvParams
                      : l.kernel == lowering::GpuLaunch::kMatmul       ? lowering::GpuLaunch::kMatmulParams
                                                                        : 0;
        if (!want) return bad("call of an unknown library operation");
        if (l.params.size() != want) return bad("library call with the wrong number of parameters");
        uint64_t elementBytes = lowering::GpuLaunch::elementBytes(l.params.back());
        if (!elementBytes) return bad("library call of an unknown element type");
        for (size_t i = 0; i + 1 < l.params.size(); ++i)
          if (l.params[i] < 1 || l.params[i] > INT32_MAX) return bad("library call with a size out of range");
        for (const nlohmann::json &a : j.at("args")) {
          lowering::GpuKernelArg arg;
          arg.buffer = a.at("buffer").get<int>();
          if (!validBuffer(arg.buffer)) return bad("library call on a buffer that does not exist");
          l.args.push_back(arg);
        }
        if (l.args.size() != 3) return bad("library call with the wrong number of buffers");
        // Each buffer holds what the call reads or writes (4-byte floats).
        auto bytesOf = [&](int b) -> uint64_t {
          if (b < o.plan.firstTemporary()) return o.plan.argumentBytes[size_t(b)];
          if (b < o.plan.firstConstant()) return o.plan.temporaries[size_t(b - o.plan.firstTemporary())];
          return o.plan.constants[size_t(b - o.plan.firstConstant())].size();
        };
        const std::vector<int64_t> &p = l.params;
        uint64_t need[3];
        if (l.kernel == lowering::GpuLaunch::kConv2dNhwcFhwc) {
          need[0] = uint64_t(p[0]) * p[1] * p[2] * p[3];  // N*H*W*C
          need[1] = uint64_t(p[4]) * p[5] * p[6] * p[3];  // K*R*S*C
          need[2] = uint64_t(p[0]) * p[7] * p[8] * p[4];  // N*P*Q*K
          // the window inside the input
          if ((p[7] - 1) * p[9] + (p[5] - 1) * p[11] >= p[1] || (p[8] - 1) * p[10] + (p[6] - 1) * p[12] >= p[2])
            return bad("convolution whose window leaves its input");
        } else {
          need[0] = uint64_t(p[0]) * p[1] * p[3];  // batch*M*K
          need[1] = uint64_t(p[0]) * p[3] * p[2];  // batch*K*N
          need[2] = uint64_t(p[0]) * p[1] * p[2];  // batch*M*N
        }
        for (int i = 0; i < 3; ++i)
          if (need[i] > (uint64_t(1) << 40) || need[i] * elementBytes > bytesOf(l.args[size_t(i)].buffer))
            return bad("library call on a buffer smaller than its sizes");
      } else {
        l.kernel = j.at("kernel").get<std::string>();
        l.grid = j.at("grid").get<std::array<uint32_t, 3>>();
        l.block = j.at("block").get<std::array<uint32_t, 3>>();
        l.sharedBytes = j.at("shared").get<uint32_t>();
        for (const nlohmann::json &a : j.at("args")) {
          lowering::GpuKernelArg arg;
          if (a.contains("buffer")) {
            arg.buffer = a["buffer"].get<int>();
            if (!validBuffer(arg.buffer)) return bad("kernel argument of a buffer that does not exist");
          } else {
            arg.kind = lowering::GpuKernelArg::Kind::kScalar;
            arg.bits = a.at("bits").get<uint64_t>();
            arg.bytes = a.at("bytes").get<uint8_t>();
            if (arg.bytes == 0 || arg.bytes > 8) return bad("scalar of a bad size");
          }
          l.args.push_back(arg);
        }
      }
      o.plan.launches.push_back(std::move(l));
    }
  } catch (const nlohmann::json::exception &e) {
    return error(ErrorCode::kIO, "GPU object is damaged: %s", e.what());
  }
  return std::move(o);
}

// ---------------------------------------------------------------------------
// Compiling (no GPU needed).

llvm::Expected<std::unique_ptr<GpuTarget>> GpuTarget::create(GpuTargetOptions options) {
  std::unique_ptr<GpuTarget> t(new GpuTarget());
  if (options.arch.empty()) {
    options.arch = "sm_90";
#if KILN_HAVE_CUDA
    if (auto dev = cuda::CudaDevice::open(options.device)) options.arch = (*dev)->info().arch();
    else llvm::consumeError(dev.takeError());  // no GPU: compile for sm_90
#endif
  }
  options.codegen.chip = options.arch;
  // PTX ISA versions the architectures need (LLVM refuses older ones).
  if (options.codegen.features.empty() || options.codegen.features == "+ptx80") {
    int cc = std::atoi(options.arch.c_str() + (llvm::StringRef(options.arch).starts_with("sm_") ? 3 : 0));
    options.codegen.features = cc >= 120 ? "+ptx87" : cc >= 100 ? "+ptx86" : "+ptx80";
  }
  t->options_ = std::move(options);
  auto cg = codegen::NvptxCodegen::create(t->options_.codegen);
  if (!cg) return cg.takeError();
  t->codegen_ = std::move(*cg);
  return std::move(t);
}

std::string GpuTarget::description() const { return codegen_->description(); }

std::string GpuTarget::pipelineText() const {
  std::string text = "opt-level=" + std::to_string(options_.codegen.optLevel) +
                     " hoist-min-elements=" + std::to_string(lowering::kDefaultHoistMinElements) +
                     " anchors-per-cluster=" + std::to_string(anchorsPerCluster());
  for (const auto &stage : lowering::gpuPipelineStages(lowering::CpuTuning(), options_.tuning))
    text += "\n" + stage.name + ": " + stage.pipeline;
  return text;
}

llvm::Expected<TargetObject> GpuTarget::compile(lowering::Program &program, lowering::SpecializedFunction &cluster,
                                                lowering::StageTimes &times) {
  llvm::LLVMContext llvmContext;
  auto lowered =
      program.lowerToGpu(cluster, lowering::CpuTuning(), options_.tuning, llvmContext, times, options_.dumpIRDir,
                         options_.dumpIRPasses);
  if (!lowered) return lowered.takeError();
  auto dump = [&](const char *stage, llvm::StringRef text) {
    if (options_.dumpIRDir.empty()) return;
    // Best effort (a full disk skips it), never through a link at the name.
    llvm::consumeError(writeFileReplacing(options_.dumpIRDir + "/" + cluster.function + "." + stage, text));
  };
  if (!options_.dumpIRDir.empty()) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    lowered->device->print(os, nullptr);
    dump("5.device.ll", ir);
  }
  codegen::DeviceTimes dt;
  codegen::ObjectDumps dumps;
  auto device = codegen_->compile(*lowered->device, &dt, options_.dumpIRDir.empty() ? nullptr : &dumps);
  if (!device) return device.takeError();
  dump("6.device-opt.ll", dumps.optimizedIR);
  dump("7.kernels.ptx", device->ptx);
  times.push_back({"libdevice-link", dt.linkMs});
  times.push_back({"llvm-opt", dt.optimizeMs});
  times.push_back({"ptx-emit", dt.emitMs});
  if (!device->cubin.empty()) times.push_back({"ptxas", dt.assembleMs});
  GpuObject o;
  o.arch = options_.codegen.chip;
  o.ptx = std::move(device->ptx);
  o.cubin = std::move(device->cubin);
  o.plan = std::move(lowered->plan);
  TargetObject out;
  out.faultSites = o.plan.faultSites;
  out.entry = "kiln_gpu." + cluster.function;
  out.bytes = o.serialize();
  return std::move(out);
}

// ---------------------------------------------------------------------------
// Loading and running (a GPU needed).

#if KILN_HAVE_CUDA
namespace {

/// A loaded object: the module, its kernels, its constants on the device.
/// Where one run's buffers are: a device address per plan buffer, which
/// arguments are weights already on the device, the workspace, and the
/// pinned staging of inputs, outputs and the fault word.
struct RunLayout {
  std::vector<CUdeviceptr> ptrs;
  std::vector<bool> uploaded;
  CUdeviceptr workspace = 0;
  char *pinned = nullptr;
  std::vector<size_t> stagingOffset;  // per argument
  size_t faultOffset = 0;
};

class GpuCode final : public LoadedCode {
public:
  std::shared_ptr<cuda::CudaDevice> device;
  std::shared_ptr<cuda::CudaModule> module;
  lowering::GpuPlan plan;
  std::vector<CUfunction> functions;         // by launch (null for copies)
  /// Library calls set up at load, by launch (null for others), and the
  /// scratch the biggest needs (one buffer per run).
  std::vector<std::unique_ptr<cuda::GpuConv>> convs;
  std::vector<std::unique_ptr<cuda::GpuGemm>> gemms;
  size_t workspaceBytes = 0;

  /// gpuProfile (KILN_GPU_PROFILE=1): every launch is timed with CUDA events (the step
  /// then waits for the GPU), and the totals go to stderr when the code is
  /// unloaded, slowest first.
  std::string name;
  std::mutex profileMu;
  struct LaunchTime {
    double ms = 0;
    uint64_t calls = 0;
  };
  /// gpuGraphs (KILN_GPU_GRAPHS=1): the plan captured once as a CUDA graph over
  /// buffers of its own, replayed by one run at a time (`busy`); others
  /// take plain launches meanwhile.
  struct Graph {
    const cuda::Driver *driver = nullptr;
    std::unique_ptr<cuda::CudaStream> stream;
    std::vector<cuda::DeviceBuffer> buffers;
    cuda::PinnedBuffer staging;
    RunLayout layout;
    /// The weights the graph reads, by input (null buffer: not a weight):
    /// code shared by executables with other weights takes plain launches.
    std::vector<std::pair<const Buffer *, size_t>> weights;
    bool sameWeights(const StepContext &ctx) const {
      for (unsigned i = 0; i < ctx.numInputs(); ++i) {
        const Tensor *w = ctx.constantInput(i);
        std::pair<const Buffer *, size_t> key{w ? w->buffer().get() : nullptr, w ? w->byteOffset() : 0};
        if (key != weights[i]) return false;
      }
      return true;
    }
    CUgraphExec exec = nullptr;
    std::atomic<bool> busy{false};
    ~Graph() {
      if (stream) llvm::consumeError(stream->synchronize());
      if (exec) driver->cuGraphExecDestroy(exec);
    }
  };
  std::mutex graphMu;
  std::unique_ptr<Graph> graph;
  bool graphFailed = false;
  std::vector<LaunchTime> profile;  // by launch, runs after the first
  uint64_t profiledRuns = 0;        // the first included (its lazy loading is not counted)
  double gpuMs = 0, hostMs = 0;     // first launch to last on the GPU; the host's enqueueing
  ~GpuCode() override { printProfile(); }
  void printProfile() const {
    if (profile.empty() || !profile[0].calls) return;
    std::vector<size_t> order;
    double total = 0;
    for (size_t k = 0; k < profile.size(); ++k) {
      if (!profile[k].calls) continue;
      order.push_back(k);
      total += profile[k].ms;
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return profile[a].ms > profile[b].ms; });
    uint64_t runs = profile[order.front()].calls;
    char head[256];
    std::snprintf(head, sizeof head,
                  "kiln GPU profile of %s: %llu runs after the first; a run: %.3f ms on the GPU from its first "
                  "launch to its last, %.3f ms for the host to enqueue it; launch by launch (mean, share):\n",
                  name.c_str(), (unsigned long long)runs, gpuMs / double(runs), hostMs / double(runs));
    std::string text = head;
    for (size_t i = 0; i < order.size() && i < 25; ++i) {
      size_t k = order[i];
      const lowering::GpuLaunch &l = plan.launches[k];
      std::string what = l.kernel;
      if (l.kind == lowering::GpuLaunch::Kind::kCopy) what = "copy " + std::to_string(l.bytes) + " B";
      if (l.kind == lowering::GpuLaunch::Kind::kKernel)
        what += " (" + std::to_string(l.grid[0] * l.grid[1] * l.grid[2]) + " blocks of " +
                std::to_string(l.block[0] * l.block[1] * l.block[2]) + ")";
      if (l.kind == lowering::GpuLaunch::Kind::kLibrary) {
        what += " [";
        for (size_t j = 0; j < l.params.size(); ++j) what += (j ? "," : "") + std::to_string(l.params[j]);
        what += "]";
        if (convs[k]) what += " algo " + std::to_string(convs[k]->algorithm());
      }
      char line[96];
      std::snprintf(line, sizeof line, "  %3zu %8.1f us %5.1f%%  ", k, 1000.0 * profile[k].ms / double(profile[k].calls),
                    100.0 * profile[k].ms / total);
      text += line + what + "\n";
    }
    std::fputs(text.c_str(), stderr);
  }
  std::vector<cuda::DeviceBuffer> constants;  // by constant
  CUdeviceptr faultWord = 0;

  /// Device copies of the steps' constant inputs (weights), made on first
  /// use, by host buffer and offset (not address: a weight's buffer may move
  /// into huge pages, Buffer::relocate). The host tensor is kept, so its
  /// buffer stays its own.
  struct Weight {
    Tensor host;
    cuda::DeviceBuffer device;
  };
  using WeightKey = std::pair<const Buffer *, size_t>;
  std::mutex weightsMu;
  std::map<WeightKey, Weight> weights;

  /// The device copy of `t`, uploading it the first time (waits for the
  /// copy: once per weight).
  llvm::Expected<CUdeviceptr> weight(const Tensor &t) {
    std::lock_guard<std::mutex> lock(weightsMu);
    WeightKey key{t.buffer().get(), t.byteOffset()};
    auto it = weights.find(key);
    if (it != weights.end()) return it->second.device.ptr();
    auto b = device->allocate(t.byteSize());
    if (!b) return b.takeError();
    cuda::CudaStream &s = device->stream();
    if (auto err = s.copyToDevice(b->ptr(), t.rawData(), t.byteSize())) return std::move(err);
    if (auto err = s.synchronize()) return std::move(err);
    CUdeviceptr p = b->ptr();
    weights.emplace(key, Weight{t, std::move(*b)});
    return p;
  }
  llvm::Expected<void *> lookup(llvm::StringRef) const override { return const_cast<GpuCode *>(this); }
};

/// What one step run keeps alive until its stream reaches the callback.
struct GpuRun {
  std::vector<cuda::DeviceBuffer> buffers;  // arguments, then temporaries
  /// Pinned staging: the inputs, then the outputs, then the fault word (so
  /// that no copy makes the worker wait for the GPU).
  cuda::PinnedBuffer staging;
  std::vector<size_t> stagingOffset;  // per argument
  size_t faultOffset = 0;
};

}  // namespace
#endif

llvm::Expected<std::shared_ptr<LoadedCode>> GpuTarget::load(llvm::ArrayRef<char> object, llvm::StringRef name) {
  auto o = GpuObject::parse(object);
  if (!o) return o.takeError();
#if !KILN_HAVE_CUDA
  return error(ErrorCode::kUnavailable, "%s: kiln was built without CUDA, so it cannot run GPU code",
               name.str().c_str());
#else
  auto device = cuda::CudaDevice::open(options_.device);
  if (!device) return device.takeError();
  auto code = std::make_shared<GpuCode>();
  code->device = *device;
  code->name = name.str();
  auto module = code->device->loadModule(o->cubin, o->arch, o->ptx);
  if (!module) return module.takeError();
  code->module = *module;
  for (const lowering::GpuLaunch &l : o->plan.launches) {
    CUfunction fn = nullptr;
    std::unique_ptr<cuda::GpuConv> conv;
    std::unique_ptr<cuda::GpuGemm> gemm;
    if (l.kind == lowering::GpuLaunch::Kind::kKernel) {
      auto f = code->module->function(l.kernel);
      if (!f) return f.takeError();
      fn = *f;
    } else if (l.kind == lowering::GpuLaunch::Kind::kLibrary) {
      const std::vector<int64_t> &p = l.params;
      if (l.kernel == lowering::GpuLaunch::kConv2dNhwcFhwc) {
        cuda::ConvShape shape;
        shape.n = int(p[0]), shape.h = int(p[1]), shape.w = int(p[2]), shape.c = int(p[3]);
        shape.k = int(p[4]), shape.r = int(p[5]), shape.s = int(p[6]), shape.p = int(p[7]), shape.q = int(p[8]);
        shape.stride = {int(p[9]), int(p[10])};
        shape.dilation = {int(p[11]), int(p[12])};
        shape.half = p[13] == lowering::GpuLaunch::kF16;
        auto c = cuda::GpuConv::create(*code->device, shape, {options_.convTimed, options_.tf32});
        if (!c) return withContext(c.takeError(), name.str() + ": ");
        code->workspaceBytes = std::max(code->workspaceBytes, (*c)->workspaceBytes());
        conv = std::move(*c);
      } else {
        cuda::GemmShape shape;
        shape.batch = int(p[0]), shape.m = int(p[1]), shape.n = int(p[2]), shape.k = int(p[3]);
        shape.half = p[4] == lowering::GpuLaunch::kF16;
        auto g = cuda::GpuGemm::create(*code->device, shape);
        if (!g) return withContext(g.takeError(), name.str() + ": ");
        gemm = std::move(*g);
      }
    }
    code->functions.push_back(fn);
    code->convs.push_back(std::move(conv));
    code->gemms.push_back(std::move(gemm));
  }
  code->faultWord = code->module->global(lowering::GpuPlan::kFaultWord).first;
  // Constants are uploaded once, at load.
  cuda::CudaStream &stream = code->device->stream();
  for (const std::vector<char> &c : o->plan.constants) {
    auto b = code->device->allocate(c.size());
    if (!b) return b.takeError();
    if (auto err = stream.copyToDevice(b->ptr(), c.data(), c.size())) return std::move(err);
    code->constants.push_back(std::move(*b));
  }
  if (auto err = stream.synchronize()) return std::move(err);
  code->plan = std::move(o->plan);
  return code;
#endif
}

#if KILN_HAVE_CUDA
namespace {

/// Staging offsets for `plan`'s arguments and the fault word; returns the
/// bytes.
size_t layStaging(const lowering::GpuPlan &plan, RunLayout &r) {
  size_t bytes = 0;
  r.stagingOffset.clear();
  for (uint64_t b : plan.argumentBytes) {
    r.stagingOffset.push_back(bytes);
    bytes += (b + 63) / 64 * 64;
  }
  r.faultOffset = bytes;
  return bytes + sizeof(int64_t);
}

/// Device buffers for the arguments that are not weights, the temporaries
/// and the workspace (into `keep`), the weights' device copies and the
/// constants: `r.ptrs`.
llvm::Error placeBuffers(GpuCode &code, const StepContext &ctx, RunLayout &r, std::vector<cuda::DeviceBuffer> &keep) {
  const lowering::GpuPlan &plan = code.plan;
  cuda::CudaDevice &dev = *code.device;
  r.ptrs.assign(size_t(plan.numBuffers()), 0);
  r.uploaded.assign(plan.numArguments, false);
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (const Tensor *w = ctx.constantInput(i)) {
      auto p = code.weight(*w);
      if (!p) return p.takeError();
      r.ptrs[i] = *p;
      r.uploaded[i] = true;
    }
  auto take = [&](uint64_t bytes) -> llvm::Expected<CUdeviceptr> {
    auto b = dev.allocate(bytes);
    if (!b) return b.takeError();
    CUdeviceptr p = b->ptr();
    keep.push_back(std::move(*b));
    return p;
  };
  for (unsigned i = 0; i < plan.numArguments; ++i) {
    if (r.uploaded[i]) continue;
    auto p = take(plan.argumentBytes[i]);
    if (!p) return p.takeError();
    r.ptrs[i] = *p;
  }
  for (size_t t = 0; t < plan.temporaries.size(); ++t) {
    auto p = take(plan.temporaries[t]);
    if (!p) return p.takeError();
    r.ptrs[size_t(plan.firstTemporary()) + t] = *p;
  }
  for (size_t c = 0; c < code.constants.size(); ++c) r.ptrs[size_t(plan.firstConstant()) + c] = code.constants[c].ptr();
  if (code.workspaceBytes) {
    auto p = take(code.workspaceBytes);
    if (!p) return p.takeError();
    r.workspace = *p;
  }
  return llvm::Error::success();
}

/// Enqueues on `stream`: the inputs from staging, the fault word cleared,
/// the plan's launches (`mark(k)` before launch k and after the last), the
/// outputs and the fault word back into staging.
llvm::Error enqueuePlan(GpuCode &code, cuda::CudaStream &stream, unsigned numInputs, const RunLayout &r,
                        const std::function<llvm::Error(size_t)> &mark) {
  const lowering::GpuPlan &plan = code.plan;
  for (unsigned i = 0; i < numInputs; ++i)
    if (!r.uploaded[i])
      if (auto err = stream.copyToDevice(r.ptrs[i], r.pinned + r.stagingOffset[i], plan.argumentBytes[i])) return err;
  if (code.faultWord)
    if (auto err = stream.zero(code.faultWord, sizeof(int64_t))) return err;
  std::vector<uint64_t> scalars;
  std::vector<void *> params;
  std::vector<CUdeviceptr> ptrs = r.ptrs;  // the parameters point into this copy
  for (size_t k = 0; k < plan.launches.size(); ++k) {
    const lowering::GpuLaunch &l = plan.launches[k];
    if (auto err = mark(k)) return err;
    if (l.kind == lowering::GpuLaunch::Kind::kCopy) {
      if (auto err = stream.copyOnDevice(ptrs[size_t(l.dst)], ptrs[size_t(l.src)], l.bytes)) return err;
      continue;
    }
    if (l.kind == lowering::GpuLaunch::Kind::kLibrary) {
      CUdeviceptr a = ptrs[size_t(l.args[0].buffer)], b = ptrs[size_t(l.args[1].buffer)],
                  c = ptrs[size_t(l.args[2].buffer)];
      if (const auto &conv = code.convs[k]) {
        if (auto err = conv->enqueue(stream, a, b, c, r.workspace, code.workspaceBytes)) return err;
      } else if (auto err = code.gemms[k]->enqueue(stream, a, b, c)) {
        return err;
      }
      continue;
    }
    scalars.assign(l.args.size(), 0);
    params.clear();
    for (size_t a = 0; a < l.args.size(); ++a) {
      const lowering::GpuKernelArg &arg = l.args[a];
      if (arg.kind == lowering::GpuKernelArg::Kind::kBuffer) {
        params.push_back(&ptrs[size_t(arg.buffer)]);
      } else {
        scalars[a] = arg.bits;  // little-endian: the low bytes first
        params.push_back(&scalars[a]);
      }
    }
    unsigned grid[3] = {l.grid[0], l.grid[1], l.grid[2]}, block[3] = {l.block[0], l.block[1], l.block[2]};
    // cuLaunchKernel copies the parameter values before it returns.
    if (auto err = stream.launch(code.functions[k], grid, block, l.sharedBytes, params.data(), l.kernel)) return err;
  }
  if (auto err = mark(plan.launches.size())) return err;
  for (unsigned arg = numInputs; arg < plan.numArguments; ++arg)
    if (auto err = stream.copyToHost(r.pinned + r.stagingOffset[arg], r.ptrs[arg], plan.argumentBytes[arg]))
      return err;
  if (code.faultWord)
    if (auto err = stream.copyToHost(r.pinned + r.faultOffset, code.faultWord, sizeof(int64_t))) return err;
  return llvm::Error::success();
}

/// Builds `code`'s CUDA graph (gpuGraphs): its own stream, buffers
/// and staging, and the plan captured once; the weights' device copies are
/// fixed from then on.
llvm::Error buildGraph(GpuCode &code, const StepContext &ctx) {
  auto g = std::make_unique<GpuCode::Graph>();
  g->driver = &code.device->driver();
  auto stream = code.device->newStream();
  if (!stream) return stream.takeError();
  g->stream = std::move(*stream);
  bool convs = false, gemms = false;
  for (size_t k = 0; k < code.plan.launches.size(); ++k) {
    convs |= bool(code.convs[k]);
    gemms |= bool(code.gemms[k]);
  }
  if (auto err = cuda::prepareLibraryHandles(*g->stream, convs, gemms)) return err;
  if (auto err = placeBuffers(code, ctx, g->layout, g->buffers)) return err;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    const Tensor *w = ctx.constantInput(i);
    g->weights.push_back({w ? w->buffer().get() : nullptr, w ? w->byteOffset() : 0});
  }
  auto staging = code.device->allocatePinned(layStaging(code.plan, g->layout));
  if (!staging) return staging.takeError();
  g->staging = std::move(*staging);
  g->layout.pinned = static_cast<char *>(g->staging.data());
  const cuda::Driver &d = *g->driver;
  CUstream s = g->stream->handle();
  if (auto err = KILN_CU(d, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capturing a GPU plan"))
    return err;
  llvm::Error enqueued = enqueuePlan(code, *g->stream, ctx.numInputs(), g->layout,
                                     [](size_t) { return llvm::Error::success(); });
  CUgraph graph = nullptr;
  CUresult ended = d.cuStreamEndCapture(s, &graph);
  llvm::scope_exit destroyGraph([&] {
    if (graph) d.cuGraphDestroy(graph);
  });
  if (enqueued) return enqueued;
  if (auto err = d.check(ended, "cuStreamEndCapture", "capturing a GPU plan")) return err;
  if (auto err = KILN_CU(d, cuGraphInstantiateWithFlags(&g->exec, graph, 0), "instantiating a GPU plan's graph"))
    return err;
  code.graph = std::move(g);
  return llvm::Error::success();
}

}  // namespace
#endif

llvm::Expected<Launch> GpuTarget::launch(std::shared_ptr<LoadedCode> loaded, llvm::StringRef symbol,
                                         std::vector<std::string> faultSites) {
#if !KILN_HAVE_CUDA
  return error(ErrorCode::kUnavailable, "kiln was built without CUDA, so it cannot run GPU code");
#else
  auto code = std::static_pointer_cast<GpuCode>(loaded);
  Launch l;
  l.fn = [code, sites = std::move(faultSites), graphs = options_.graphs,
          profiling = options_.profile](const StepContext &ctx) -> llvm::Error {
    const lowering::GpuPlan &plan = code->plan;
    if (ctx.numInputs() + ctx.numOutputs() != plan.numArguments)
      return error(ErrorCode::kInternal, "GPU step %s has %u buffers, its code takes %u", ctx.stepName().c_str(),
                   ctx.numInputs() + ctx.numOutputs(), plan.numArguments);
    cuda::CudaDevice &dev = *code->device;
    if (auto err = dev.makeCurrent()) return err;
    unsigned numInputs = ctx.numInputs();
    std::vector<void *> outputs;
    for (unsigned i = 0; i < ctx.numOutputs(); ++i) outputs.push_back(ctx.out(i));

    // gpuGraphs: the plan replayed as one CUDA graph (captured on the
    // first run) when no other run of this code holds it; a capture that
    // fails says why once and leaves the code on plain launches.
    if (graphs && !profiling) {
      {
        std::lock_guard<std::mutex> lock(code->graphMu);
        if (!code->graph && !code->graphFailed)
          if (llvm::Error err = buildGraph(*code, ctx)) {
            code->graphFailed = true;
            std::fprintf(stderr, "kiln: %s runs without a CUDA graph: %s\n", code->name.c_str(),
                         llvm::toString(std::move(err)).c_str());
          }
      }
      GpuCode::Graph *g = code->graph.get();
      bool idle = false;
      if (g && g->sameWeights(ctx) && g->busy.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
        const RunLayout &r = g->layout;
        for (unsigned i = 0; i < numInputs; ++i)
          if (!r.uploaded[i]) std::memcpy(r.pinned + r.stagingOffset[i], ctx.in(i), plan.argumentBytes[i]);
        std::memset(r.pinned + r.faultOffset, 0, sizeof(int64_t));
        StepCompletion done = ctx.defer();
        llvm::Error err = KILN_CU(dev.driver(), cuGraphLaunch(g->exec, g->stream->handle()), "launching a GPU plan");
        if (!err)
          err = g->stream->onComplete([g, code, done, sites, outputs = std::move(outputs), numInputs] {
            // On the driver's callback thread: no CUDA calls here.
            const RunLayout &r = g->layout;
            for (size_t i = 0; i < outputs.size(); ++i)
              std::memcpy(outputs[i], r.pinned + r.stagingOffset[numInputs + i],
                          code->plan.argumentBytes[numInputs + i]);
            int64_t fault;
            std::memcpy(&fault, r.pinned + r.faultOffset, sizeof fault);
            g->busy.store(false, std::memory_order_release);
            done(faultError(fault, sites));
          });
        if (err) {
          llvm::consumeError(g->stream->synchronize());
          g->busy.store(false, std::memory_order_release);
          done(llvm::Error::success());
          return err;
        }
        return llvm::Error::success();
      }
    }

    // Device memory for this run (from the caching allocator: no driver call
    // in steady state), released when the stream is done with it.
    // Weights stay on the device from their first use on.
    auto run = std::make_shared<GpuRun>();
    RunLayout layout;
    if (auto err = placeBuffers(*code, ctx, layout, run->buffers)) return err;
    // Pinned staging for the step's inputs and outputs and the fault word.
    auto staging = dev.allocatePinned(layStaging(plan, layout));
    if (!staging) return staging.takeError();
    run->staging = std::move(*staging);
    layout.pinned = static_cast<char *>(run->staging.data());
    run->stagingOffset = layout.stagingOffset;
    run->faultOffset = layout.faultOffset;
    for (unsigned i = 0; i < numInputs; ++i)
      if (!layout.uploaded[i]) std::memcpy(layout.pinned + layout.stagingOffset[i], ctx.in(i), plan.argumentBytes[i]);
    std::memset(layout.pinned + layout.faultOffset, 0, sizeof(int64_t));

    cuda::CudaStream &stream = dev.stream();
    // Profiling: an event before each launch and one after the last.
    std::vector<CUevent> events;
    llvm::scope_exit destroyEvents([&] {
      for (CUevent e : events) dev.driver().cuEventDestroy(e);
    });
    if (profiling) {
      events.resize(plan.launches.size() + 1, nullptr);
      for (CUevent &e : events)
        if (auto err = KILN_CU(dev.driver(), cuEventCreate(&e, CU_EVENT_DEFAULT), "creating a profiling event"))
          return err;
    }
    auto mark = [&](size_t k) -> llvm::Error {
      if (!profiling) return llvm::Error::success();
      return KILN_CU(dev.driver(), cuEventRecord(events[k], stream.handle()), "recording a profiling event");
    };
    StepCompletion done = ctx.defer();
    auto enqueueStart = std::chrono::steady_clock::now();
    llvm::Error err = enqueuePlan(*code, stream, numInputs, layout, mark);
    if (!err)
      err = stream.onComplete([run, done, sites, outputs = std::move(outputs), numInputs, code] {
        // On the driver's callback thread: no CUDA calls here.
        const char *pinned = static_cast<const char *>(run->staging.data());
        for (size_t i = 0; i < outputs.size(); ++i)
          std::memcpy(outputs[i], pinned + run->stagingOffset[numInputs + i], code->plan.argumentBytes[numInputs + i]);
        int64_t fault;
        std::memcpy(&fault, pinned + run->faultOffset, sizeof fault);
        run->buffers.clear();  // back to the caches (no CUDA call)
        run->staging = cuda::PinnedBuffer();
        done(faultError(fault, sites));
      });
    if (err) {
      // Work already enqueued may still use this run's memory: wait for it
      // before the completion lets the buffers go.
      llvm::consumeError(stream.synchronize());
      run->buffers.clear();
      run->staging = cuda::PinnedBuffer();
      done(llvm::Error::success());
      return err;
    }
    if (profiling) {
      double host = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - enqueueStart).count();
      if (auto err = KILN_CU(dev.driver(), cuEventSynchronize(events.back()), "waiting for a profiled step"))
        return err;
      std::lock_guard<std::mutex> lock(code->profileMu);
      code->profile.resize(plan.launches.size());
      if (code->profiledRuns++ == 0) return llvm::Error::success();  // loads kernels lazily: not counted
      float span = 0;
      if (dev.driver().cuEventElapsedTime(&span, events.front(), events.back()) == CUDA_SUCCESS) code->gpuMs += span;
      code->hostMs += host;
      for (size_t k = 0; k < plan.launches.size(); ++k) {
        float ms = 0;
        if (dev.driver().cuEventElapsedTime(&ms, events[k], events[k + 1]) != CUDA_SUCCESS) continue;
        code->profile[k].ms += ms;
        ++code->profile[k].calls;
      }
    }
    return llvm::Error::success();
  };
  return l;
#endif
}

}  // namespace kiln::jit
