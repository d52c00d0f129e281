// The NVIDIA GPU target.
//   GpuCompile.*  need no GPU: clusters lower to kernels and a launch plan,
//                 PTX for sm_90 that ptxas assembles, objects that survive
//                 the cache's bytes and reject damage.
//   GpuDevice.* / GpuRun.*  need a GPU and skip without one (GTEST_SKIP
//                 with the reason): the CUDA device runtime, and models run on
//                 the GPU against the host's results.
//   GpuRuntime.*  what a user without a GPU sees.
#include "api/Kiln.h"
#include "jit/GpuTarget.h"
#include "lowering/graph/Program.h"
#include "runtime/Error.h"
#include "tests/TestUtil.h"
#include "lowering/models/BuiltinModels.h"

#if KILN_HAVE_CUDA
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaLibraries.h"
#endif

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <cstring>
#include <functional>

using namespace kiln;

namespace {

/// The GPU tests' reason to skip, or "" when a GPU is present.
std::string noGpu() {
#if KILN_HAVE_CUDA
  std::string why;
  if (cuda::gpuAvailable(&why)) return "";
  return why;
#else
  return "kiln was built without the CUDA toolkit";
#endif
}
#define SKIP_WITHOUT_GPU()                                       \
  do {                                                           \
    std::string why = noGpu();                                   \
    if (!why.empty()) GTEST_SKIP() << "no GPU: " << why;         \
  } while (0)

/// A runtime without a disk cache on `device` (`opModes`: --op-mode's text).
std::unique_ptr<Runtime> uncachedRuntime(const std::string &device, const char *opModes = "") {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.device = device;
  if (*opModes) o.placement = KILN_TAKE(ops::parseOpModes(opModes));
  return KILN_TAKE(Runtime::create(o));
}

struct Compiled {
  jit::GpuObject object;
  std::vector<char> bytes;
};

/// `mlir`'s @main specialized to its static types and compiled whole for
/// the GPU (no partitioning: every op on the GPU).
Compiled compileForGpu(const char *mlir, const std::string &arch = "sm_90", bool libraries = true) {
  auto program = KILN_TAKE(lowering::Program::parse(mlir, "gpu-test.mlir"));
  if (!program) return {};
  std::vector<TensorType> types;
  for (const auto &a : program->functions().front().args) types.push_back(a.type);
  lowering::StageTimes times;
  auto fn = KILN_TAKE(program->specialize("main", types, times));
  if (!fn) return {};
  jit::GpuTargetOptions options;
  options.arch = arch;
  options.tuning.cudnnConv = options.tuning.cublasMatmul = libraries;
  auto target = KILN_TAKE(jit::GpuTarget::create(options));
  if (!target) return {};
  auto object = KILN_TAKE(target->compile(*program, *fn, times));
  if (object.bytes.empty()) return {};
  Compiled c;
  c.bytes.assign(object.bytes.begin(), object.bytes.end());
  auto parsed = KILN_TAKE(jit::GpuObject::parse(object.bytes));
  c.object = std::move(parsed);
  return c;
}

bool hasPtxas() {
  return llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas") || bool(llvm::sys::findProgramByName("ptxas"));
}

const char *kElementwise = R"mlir(
func.func @main(%a: tensor<4x1000xf32>, %b: tensor<4x1000xf32>) -> tensor<4x1000xf32> {
  %0 = tosa.add %a, %b : (tensor<4x1000xf32>, tensor<4x1000xf32>) -> tensor<4x1000xf32>
  %1 = tosa.clamp %0 {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<4x1000xf32>) -> tensor<4x1000xf32>
  %2 = tosa.exp %1 : (tensor<4x1000xf32>) -> tensor<4x1000xf32>
  return %2 : tensor<4x1000xf32>
})mlir";

const char *kMatmulBias = R"mlir(
func.func @main(%a: tensor<1x64x96xf32>, %b: tensor<1x96x48xf32>, %bias: tensor<1x1x48xf32>) -> tensor<1x64x1xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = tosa.matmul %a, %b, %z, %z : (tensor<1x64x96xf32>, tensor<1x96x48xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x48xf32>
  %1 = tosa.add %0, %bias : (tensor<1x64x48xf32>, tensor<1x1x48xf32>) -> tensor<1x64x48xf32>
  %2 = tosa.reduce_sum %1 {axis = 2 : i32} : (tensor<1x64x48xf32>) -> tensor<1x64x1xf32>
  return %2 : tensor<1x64x1xf32>
})mlir";

const char *kSmallConstant = R"mlir(
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf32>}> : () -> tensor<1x3xf32>
  %0 = tosa.mul %a, %c, %s : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<1xi8>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
})mlir";

const char *kConv = R"mlir(
func.func @main(%x: tensor<1x9x9x5xf32>, %w: tensor<7x3x3x5xf32>, %bias: tensor<7xf32>) -> tensor<1x5x5x7xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x9x9x5xf32>, tensor<7x3x3x5xf32>, tensor<7xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x5x5x7xf32>
  %1 = tosa.clamp %0 {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x5x5x7xf32>) -> tensor<1x5x5x7xf32>
  return %1 : tensor<1x5x5x7xf32>
})mlir";

// A strided 1x1 conv (a ResNet projection shortcut): TOSA slices its input
// to the rows and columns it reads.
const char *kStridedPointwise = R"mlir(
func.func @main(%x: tensor<1x8x8x6xf32>, %w: tensor<4x1x1x6xf32>, %bias: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %start = tosa.const_shape {values = dense<0> : tensor<4xindex>} : () -> !tosa.shape<4>
  %size = tosa.const_shape {values = dense<[1, 7, 7, 6]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s = tosa.slice %x, %start, %size : (tensor<1x8x8x6xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x7x7x6xf32>
  %0 = tosa.conv2d %s, %w, %bias, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x7x7x6xf32>, tensor<4x1x1x6xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
})mlir";

// FP16 buffers (TOSA's f16 accumulator: the conv is FP16 throughout in
// linalg; cuDNN and cuBLAS accumulate in FP32).
const char *kConvF16 = R"mlir(
func.func @main(%x: tensor<1x9x9x5xf16>, %w: tensor<7x3x3x5xf16>, %bias: tensor<7xf16>) -> tensor<1x5x5x7xf16> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf16>}> : () -> tensor<1xf16>
  %0 = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f16, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x9x9x5xf16>, tensor<7x3x3x5xf16>, tensor<7xf16>, tensor<1xf16>, tensor<1xf16>) -> tensor<1x5x5x7xf16>
  return %0 : tensor<1x5x5x7xf16>
})mlir";
const char *kMatmulF16 = R"mlir(
func.func @main(%a: tensor<2x64x96xf16>, %b: tensor<2x96x48xf16>) -> tensor<2x64x48xf16> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf16>}> : () -> tensor<1xf16>
  %0 = tosa.matmul %a, %b, %z, %z : (tensor<2x64x96xf16>, tensor<2x96x48xf16>, tensor<1xf16>, tensor<1xf16>) -> tensor<2x64x48xf16>
  return %0 : tensor<2x64x48xf16>
})mlir";
/// `mlir` with every f16 spelled f32 (the host's reference of an FP16 model).
std::string asF32(const char *mlir) {
  std::string s = mlir;
  for (size_t at; (at = s.find("f16")) != std::string::npos;) s.replace(at, 3, "f32");
  return s;
}
/// An f16 copy of an f32 tensor (values rounded to FP16).
Tensor toHalf(const Tensor &t) {
  std::vector<uint16_t> v(size_t(t.numElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = floatToHalf(t.data<float>()[i]);
  return Tensor::fromVector<uint16_t>(DType::f16, t.shape(), v);
}
/// An f32 copy with the values rounded to FP16 and back.
Tensor roundedToHalf(const Tensor &t) {
  Tensor out = Tensor::empty(DType::f32, t.shape());
  for (int64_t i = 0; i < t.numElements(); ++i) out.data<float>()[i] = halfToFloat(floatToHalf(t.data<float>()[i]));
  return out;
}

const char *kGather = R"mlir(
func.func @main(%v: tensor<1x6x4xf32>, %i: tensor<1x3xi32>) -> tensor<1x3x4xf32> {
  %0 = tosa.gather %v, %i : (tensor<1x6x4xf32>, tensor<1x3xi32>) -> tensor<1x3x4xf32>
  return %0 : tensor<1x3x4xf32>
})mlir";

std::string fixShift(const char *mlir) {
  // tosa.mul's shift operand: a constant i8 zero.
  std::string s = mlir;
  size_t at = s.find("  %0 = tosa.mul");
  if (at != std::string::npos)
    s.insert(at, "  %s = \"tosa.const\"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n");
  return s;
}

}  // namespace

TEST(GpuCompile, ElementwiseChainIsOneKernelInPtxForSm90) {
  Compiled c = compileForGpu(kElementwise);
  ASSERT_FALSE(c.bytes.empty());
  const lowering::GpuPlan &plan = c.object.plan;
  EXPECT_EQ(c.object.arch, "sm_90");
  EXPECT_EQ(plan.numArguments, 3u);  // a, b, result
  EXPECT_EQ(plan.argumentBytes, (std::vector<uint64_t>{16000, 16000, 16000}));
  ASSERT_EQ(plan.launches.size(), 1u);
  const lowering::GpuLaunch &l = plan.launches[0];
  EXPECT_EQ(l.kernel, "kiln_main_k0");
  // Enough threads for every element, in blocks of 256.
  EXPECT_EQ(l.block[0], 256u);
  EXPECT_GE(uint64_t(l.grid[0]) * l.block[0], 4000u);
  EXPECT_NE(c.object.ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(c.object.ptx.find(".entry kiln_main_k0"), std::string::npos);
  // libdevice's expf was linked and inlined: no call remains.
  EXPECT_EQ(c.object.ptx.find("__nv_expf"), std::string::npos);
  EXPECT_NE(c.object.ptx.find("ex2.approx"), std::string::npos);
  if (hasPtxas()) {
    ASSERT_GE(c.object.cubin.size(), 4u) << "ptxas is installed but no cubin was made";
    EXPECT_EQ(std::memcmp(c.object.cubin.data(), "\x7f" "ELF", 4), 0);
  }
  // The object survives the cache's bytes.
  llvm::SmallVector<char, 0> again = c.object.serialize();
  EXPECT_EQ(std::vector<char>(again.begin(), again.end()), c.bytes);
}

namespace {
/// The plan's library launches, checked to name buffers of the plan.
std::vector<const lowering::GpuLaunch *> libraryLaunches(const Compiled &c) {
  std::vector<const lowering::GpuLaunch *> out;
  for (const lowering::GpuLaunch &l : c.object.plan.launches) {
    if (l.kind != lowering::GpuLaunch::Kind::kLibrary) continue;
    out.push_back(&l);
    EXPECT_EQ(l.args.size(), 3u);
    for (const lowering::GpuKernelArg &a : l.args) {
      EXPECT_GE(a.buffer, 0);
      EXPECT_LT(a.buffer, c.object.plan.numBuffers());
    }
  }
  return out;
}
}  // namespace

TEST(GpuCompile, MatmulIsACublasCallBiasAndReductionAreKernels) {
  Compiled c = compileForGpu(kMatmulBias);
  ASSERT_FALSE(c.bytes.empty());
  const lowering::GpuPlan &plan = c.object.plan;
  int kernels = 0;
  for (const lowering::GpuLaunch &l : plan.launches) {
    if (l.kind != lowering::GpuLaunch::Kind::kKernel) continue;
    EXPECT_NE(c.object.ptx.find(".entry " + l.kernel), std::string::npos) << l.kernel;
    ++kernels;
    for (const lowering::GpuKernelArg &a : l.args)
      if (a.kind == lowering::GpuKernelArg::Kind::kBuffer) {
        EXPECT_GE(a.buffer, 0);
        EXPECT_LT(a.buffer, plan.numBuffers());
      }
  }
  EXPECT_GE(kernels, 2);  // the zero fill, the bias add and the reduction (some fused)
  auto calls = libraryLaunches(c);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]->kernel, lowering::GpuLaunch::kMatmul);
  EXPECT_EQ(calls[0]->params, (std::vector<int64_t>{1, 64, 48, 96, 0}));  // batch, M, N, K, f32
  EXPECT_EQ(calls[0]->args[0].buffer, 0);  // A is the first argument
  EXPECT_EQ(calls[0]->args[1].buffer, 1);
  // Generated instead when the libraries are off: one more kernel, no call.
  Compiled g = compileForGpu(kMatmulBias, "sm_90", /*libraries=*/false);
  ASSERT_FALSE(g.bytes.empty());
  EXPECT_TRUE(libraryLaunches(g).empty());
  EXPECT_GE(g.object.plan.launches.size(), 3u);
}

TEST(GpuCompile, SmallConstantsAreUploadedOnceAtLoad) {
  std::string mlir = fixShift(kSmallConstant);
  Compiled c = compileForGpu(mlir.c_str());
  ASSERT_FALSE(c.bytes.empty());
  ASSERT_EQ(c.object.plan.constants.size(), 1u);
  const std::vector<char> &bytes = c.object.plan.constants[0];
  ASSERT_EQ(bytes.size(), 12u);
  float v[3];
  std::memcpy(v, bytes.data(), sizeof v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[2], 3.0f);
  bool used = false;
  for (const lowering::GpuLaunch &l : c.object.plan.launches)
    for (const lowering::GpuKernelArg &a : l.args) used |= a.buffer == c.object.plan.firstConstant();
  EXPECT_TRUE(used) << "no kernel reads the constant";
}

TEST(GpuCompile, PaddedStridedConvIsACudnnCallOnThePaddedInput) {
  Compiled c = compileForGpu(kConv);
  ASSERT_FALSE(c.bytes.empty());
  EXPECT_FALSE(c.object.plan.temporaries.empty());  // the padded input
  auto calls = libraryLaunches(c);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]->kernel, lowering::GpuLaunch::kConv2dNhwcFhwc);
  // N,H,W,C of the padded input, K,R,S, P,Q, strides, dilations, f32
  EXPECT_EQ(calls[0]->params, (std::vector<int64_t>{1, 11, 11, 5, 7, 3, 3, 5, 5, 2, 2, 1, 1, 0}));
  EXPECT_GE(calls[0]->args[0].buffer, c.object.plan.firstTemporary());
  EXPECT_EQ(calls[0]->args[1].buffer, 1);  // the filter argument
  // The object survives the cache's bytes.
  llvm::SmallVector<char, 0> again = c.object.serialize();
  EXPECT_EQ(std::vector<char>(again.begin(), again.end()), c.bytes);
  Compiled g = compileForGpu(kConv, "sm_90", /*libraries=*/false);
  ASSERT_FALSE(g.bytes.empty());
  EXPECT_TRUE(libraryLaunches(g).empty());
  EXPECT_GE(g.object.plan.launches.size(), 2u);
}

TEST(GpuCompile, StridedConvOnASlicedInputReadsTheWholeBuffer) {
  Compiled c = compileForGpu(kStridedPointwise);
  ASSERT_FALSE(c.bytes.empty());
  auto calls = libraryLaunches(c);
  ASSERT_EQ(calls.size(), 1u);
  // A 7x7 corner of the 8x8 input argument, whose last row and column no
  // stride-2 window reaches: the conv over the whole 8x8 argument, no copy.
  EXPECT_EQ(calls[0]->params, (std::vector<int64_t>{1, 8, 8, 6, 4, 1, 1, 4, 4, 2, 2, 1, 1, 0}));
  EXPECT_EQ(calls[0]->args[0].buffer, 0);
  EXPECT_TRUE(c.object.plan.temporaries.empty() ||
              c.object.plan.launches.size() <= 2);  // the bias fill and the call
}

TEST(GpuCompile, Fp16ConvAndMatmulAreLibraryCallsOfFp16) {
  Compiled conv = compileForGpu(kConvF16);
  ASSERT_FALSE(conv.bytes.empty());
  auto c = libraryLaunches(conv);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]->params, (std::vector<int64_t>{1, 11, 11, 5, 7, 3, 3, 5, 5, 2, 2, 1, 1, 1}));
  Compiled mm = compileForGpu(kMatmulF16);
  ASSERT_FALSE(mm.bytes.empty());
  auto m = libraryLaunches(mm);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->params, (std::vector<int64_t>{2, 64, 48, 96, 1}));
  EXPECT_EQ(mm.object.plan.argumentBytes[0], 2u * 64 * 96 * 2);  // FP16 buffers
}

TEST(GpuCompile, OutOfRangeIndicesReportFaultsFromTheDevice) {
  Compiled c = compileForGpu(kGather);
  ASSERT_FALSE(c.bytes.empty());
  ASSERT_FALSE(c.object.plan.faultSites.empty());
  EXPECT_NE(c.object.plan.faultSites[0].find("gpu-test.mlir:3:8: index out of range"), std::string::npos)
      << c.object.plan.faultSites[0];
  EXPECT_NE(c.object.ptx.find(lowering::GpuPlan::kFaultWord), std::string::npos);
  EXPECT_NE(c.object.ptx.find("atom"), std::string::npos);  // the first fault wins
}

TEST(GpuCompile, OtherArchitecturesGetTheirPtxVersion) {
  Compiled c = compileForGpu(kElementwise, "sm_100");
  ASSERT_FALSE(c.bytes.empty());
  EXPECT_NE(c.object.ptx.find(".target sm_100"), std::string::npos);
  EXPECT_NE(c.object.ptx.find(".version 8.6"), std::string::npos);
  jit::GpuTargetOptions bad;
  bad.arch = "sm_17";
  std::string msg = test::errorOf(jit::GpuTarget::create(bad));
  EXPECT_NE(msg.find("sm_17"), std::string::npos) << msg;
}

TEST(GpuCompile, DamagedObjectsAreErrors) {
  Compiled c = compileForGpu(kElementwise);
  ASSERT_FALSE(c.bytes.empty());
  std::vector<char> b = c.bytes;
  auto damaged = [](llvm::ArrayRef<char> bytes) {
    auto o = jit::GpuObject::parse(bytes);
    if (o) return std::string("accepted");
    return llvm::toString(o.takeError());
  };
  EXPECT_NE(damaged(llvm::ArrayRef<char>(b).take_front(b.size() - 1)).find("damaged"), std::string::npos);
  EXPECT_NE(damaged(llvm::ArrayRef<char>(b).take_front(10)).find("damaged"), std::string::npos);
  std::vector<char> magic = b;
  magic[0] = 'X';
  EXPECT_NE(damaged(magic).find("damaged"), std::string::npos);
  // A launch naming a buffer that does not exist.
  jit::GpuObject o = c.object;
  o.plan.launches[0].args.back().buffer = 99;
  llvm::SmallVector<char, 0> bad = o.serialize();
  EXPECT_NE(damaged(bad).find("does not exist"), std::string::npos);

  // Library calls: sizes the buffers cannot hold, a window past the input,
  // the wrong parameters, an unknown operation.
  Compiled conv = compileForGpu(kConv);
  ASSERT_FALSE(conv.bytes.empty());
  auto withCall = [&](const std::function<void(lowering::GpuLaunch &)> &edit) {
    jit::GpuObject d = conv.object;
    for (lowering::GpuLaunch &l : d.plan.launches)
      if (l.kind == lowering::GpuLaunch::Kind::kLibrary) edit(l);
    llvm::SmallVector<char, 0> bytes = d.serialize();
    return damaged(bytes);
  };
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.params[4] = 70; }).find("smaller than its sizes"),
            std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.params[9] = 3; }).find("leaves its input"), std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.params.pop_back(); }).find("number of parameters"),
            std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.params[0] = -1; }).find("out of range"), std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.params.back() = 7; }).find("unknown element type"),
            std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.kernel = "fft"; }).find("unknown library"), std::string::npos);
  EXPECT_NE(withCall([](lowering::GpuLaunch &l) { l.args.pop_back(); }).find("number of buffers"),
            std::string::npos);
  EXPECT_EQ(withCall([](lowering::GpuLaunch &) {}), "accepted");
}

TEST(GpuRuntime, DeviceOptionsAreChecked) {
  RuntimeOptions o;
  o.device = "tpu";
  std::string msg = test::errorOf(Runtime::create(o));
  EXPECT_NE(msg.find("expected cpu, cuda or cuda:N"), std::string::npos) << msg;
  o.device = "cuda";
  o.gpuArch = "hopper";
  msg = test::errorOf(Runtime::create(o));
  EXPECT_NE(msg.find("sm_XY"), std::string::npos) << msg;
}

// The GPU's switches are runtime options (RuntimeOptions::gpuGraphs,
// gpuTf32, gpuProfile, gpuConvAlgo; kiln_options_set gpu_*), completed from
// $KILN_GPU_* and checked when a runtime is made: a typo is an error naming
// the variable, not a silent "off".
TEST(GpuRuntime, GpuSwitchesAreOptionsCheckedAtCreation) {
  auto defaults = test::takeOrFail(RuntimeOptions::fromEnvironment());
  EXPECT_FALSE(*defaults.gpuGraphs);
  EXPECT_FALSE(*defaults.gpuTf32);
  EXPECT_FALSE(*defaults.gpuProfile);
  EXPECT_EQ(defaults.gpuConvAlgo, "find");
  {
    setenv("KILN_GPU_TF32", "1", 1);
    setenv("KILN_GPU_CONV_ALGO", "heuristic", 1);
    llvm::scope_exit unset([] {
      unsetenv("KILN_GPU_TF32");
      unsetenv("KILN_GPU_CONV_ALGO");
    });
    auto fromEnv = test::takeOrFail(RuntimeOptions::fromEnvironment());
    EXPECT_TRUE(*fromEnv.gpuTf32);
    EXPECT_EQ(fromEnv.gpuConvAlgo, "heuristic");
    RuntimeOptions given;  // what the caller sets wins
    given.gpuTf32 = false;
    given.gpuConvAlgo = "find";
    auto explicitOnes = test::takeOrFail(RuntimeOptions::fromEnvironment(given));
    EXPECT_FALSE(*explicitOnes.gpuTf32);
    EXPECT_EQ(explicitOnes.gpuConvAlgo, "find");
  }
  for (const char *name : {"KILN_GPU_GRAPHS", "KILN_GPU_TF32", "KILN_GPU_PROFILE"}) {
    setenv(name, "yes", 1);
    std::string msg = test::errorOf(RuntimeOptions::fromEnvironment());
    unsetenv(name);
    EXPECT_NE(msg.find(std::string(name) + "='yes': expected 0 or 1"), std::string::npos) << msg;
  }
  setenv("KILN_GPU_CONV_ALGO", "fastest", 1);
  std::string msg = test::errorOf(RuntimeOptions::fromEnvironment());
  unsetenv("KILN_GPU_CONV_ALGO");
  EXPECT_NE(msg.find("'fastest' (KILN_GPU_CONV_ALGO): expected find"), std::string::npos) << msg;
  RuntimeOptions o;
  o.device = "cuda";
  o.gpuConvAlgo = "best";
  msg = test::errorOf(Runtime::create(o));
  EXPECT_NE(msg.find("'best'"), std::string::npos) << msg;
}

TEST(GpuRuntime, WithoutAGpuRunningIsAnUnavailableError) {
  if (noGpu().empty()) GTEST_SKIP() << "a GPU is present";
  auto rt = uncachedRuntime("cuda");
  ASSERT_TRUE(rt);
  auto m = KILN_TAKE(rt->loadModule(kElementwise));
  ASSERT_TRUE(m);
  auto out = m->call("main", {test::randomTensor({4, 1000}, 1), test::randomTensor({4, 1000}, 2)});
  ASSERT_FALSE(bool(out));
  Status s = toStatus(out.takeError());
  EXPECT_EQ(s.code, ErrorCode::kUnavailable) << s.str();
  EXPECT_TRUE(s.message.find("CUDA") != std::string::npos || s.message.find("GPU") != std::string::npos) << s.str();
}

#if KILN_HAVE_CUDA
TEST(GpuLibraries, CudnnAndCublasLoadWhereInstalled) {
  // No GPU needed: the libraries load and have every function kiln calls.
  if (std::getenv("KILN_CUDNN_LIBRARY") || std::getenv("KILN_CUBLAS_LIBRARY"))
    GTEST_SKIP() << "KILN_CUDNN_LIBRARY or KILN_CUBLAS_LIBRARY chooses the libraries";
  for (const char *lib : {"libcudnn.so.9", "libcublas.so.13"}) {
    bool installed = llvm::sys::fs::exists(std::string("/usr/local/cuda/lib64/") + lib);
    std::string why;
    bool ok = std::string(lib).find("cudnn") != std::string::npos ? cuda::cudnnAvailable(&why)
                                                                   : cuda::cublasAvailable(&why);
    if (!installed && !ok) {
      EXPECT_NE(why.find("tosa."), std::string::npos) << why;  // says how to do without
      continue;
    }
    EXPECT_TRUE(ok) << lib << ": " << why;
  }
}

TEST(GpuLibrariesDeathTest, AMissingLibraryNamesWhereItLookedAndHowToDoWithout) {
  // In a child of its own: the library table is loaded once per process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KILN_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9", 1);
        std::string why;
        bool ok = cuda::cudnnAvailable(&why);
        std::fprintf(stderr, "%s\n", why.c_str());
        std::_Exit(ok ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "tried /nonexistent/libcudnn.so.9 .*--op-mode tosa.conv2d=jit");
}

TEST(GpuDevice, CopiesCallbacksAndTheCachingAllocator) {
  SKIP_WITHOUT_GPU();
  auto dev = KILN_TAKE(cuda::CudaDevice::open(0));
  ASSERT_TRUE(dev);
  EXPECT_GE(dev->info().computeCapability, 50);
  std::printf("GPU 0: %s (%s), %zu MiB, driver %d\n", dev->info().name.c_str(), dev->info().arch().c_str(),
              dev->info().totalMemory >> 20, dev->info().driverVersion);
  auto host = KILN_TAKE(dev->allocatePinned(1 << 20));
  auto *p = static_cast<uint32_t *>(host.data());
  for (uint32_t i = 0; i < (1 << 18); ++i) p[i] = i * 2654435761u;
  std::vector<uint32_t> want(p, p + (1 << 18));
  auto a = KILN_TAKE(dev->allocate(1 << 20));
  auto b = KILN_TAKE(dev->allocate(1 << 20));
  cuda::CudaStream &s = dev->stream();
  ASSERT_FALSE(bool(s.copyToDevice(a.ptr(), host.data(), 1 << 20)));
  ASSERT_FALSE(bool(s.copyOnDevice(b.ptr(), a.ptr(), 1 << 20)));
  std::memset(host.data(), 0, 1 << 20);
  ASSERT_FALSE(bool(s.copyToHost(host.data(), b.ptr(), 1 << 20)));
  std::atomic<bool> called{false};
  ASSERT_FALSE(bool(s.onComplete([&] { called = true; })));
  ASSERT_FALSE(bool(s.synchronize()));
  EXPECT_TRUE(called.load());
  EXPECT_EQ(std::vector<uint32_t>(p, p + (1 << 18)), want);
  // Released blocks are reused without the driver.
  auto before = dev->allocator().stats();
  CUdeviceptr first = a.ptr();
  a = cuda::DeviceBuffer();
  auto c = KILN_TAKE(dev->allocate((1 << 20) - 100));
  EXPECT_EQ(c.ptr(), first);
  EXPECT_EQ(dev->allocator().stats().driverAllocations, before.driverAllocations);
  // Too much memory is an error, not a crash.
  auto huge = dev->allocate(size_t(1) << 49);
  ASSERT_FALSE(bool(huge));
  EXPECT_EQ(toStatus(huge.takeError()).code, ErrorCode::kResourceExhausted);
}

namespace {
/// Runs `mlir`'s @main on the host and on the GPU and compares.
void expectGpuMatchesHost(const std::string &mlir, const std::vector<Tensor> &inputs, double rtol = 1e-4,
                          double atol = 1e-5, const char *gpuOpModes = "") {
  auto hrt = uncachedRuntime("cpu");
  auto grt = uncachedRuntime("cuda", gpuOpModes);
  ASSERT_TRUE(hrt && grt);
  auto hm = KILN_TAKE(hrt->loadModule(mlir));
  auto gm = KILN_TAKE(grt->loadModule(mlir));
  ASSERT_TRUE(hm && gm);
  auto want = KILN_TAKE(hm->call("main", inputs));
  for (int run = 0; run < 3; ++run) {  // the first call compiles and loads; later ones reuse
    auto got = KILN_TAKE(gm->call("main", inputs));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(test::allClose(test::asDoubles(got[i]), test::asDoubles(want[i]), rtol, atol))
          << "result " << i << ", run " << run;
  }
}
}  // namespace

TEST(GpuRun, ElementwiseMatmulConvMatchTheHost) {
  SKIP_WITHOUT_GPU();
  expectGpuMatchesHost(kElementwise, {test::randomTensor({4, 1000}, 1), test::randomTensor({4, 1000}, 2)});
  expectGpuMatchesHost(kMatmulBias, {test::randomTensor({1, 64, 96}, 3), test::randomTensor({1, 96, 48}, 4),
                                     test::randomTensor({1, 1, 48}, 5)});
  expectGpuMatchesHost(fixShift(kSmallConstant), {test::randomTensor({2, 3}, 6)});
  expectGpuMatchesHost(kConv, {test::randomTensor({1, 9, 9, 5}, 7), test::randomTensor({7, 3, 3, 5}, 8),
                               test::randomTensor({7}, 9)});
  expectGpuMatchesHost(kStridedPointwise, {test::randomTensor({1, 8, 8, 6}, 10), test::randomTensor({4, 1, 1, 6}, 11),
                                           test::randomTensor({4}, 12)});
}

TEST(GpuRun, CudaGraphReplaysMatchTheHost) {
  SKIP_WITHOUT_GPU();
  // KILN_GPU_GRAPHS=1 is read when a runtime is made: the plan is captured
  // on the first call and replayed as one graph on the later ones.
  setenv("KILN_GPU_GRAPHS", "1", 1);
  llvm::scope_exit unset([] { unsetenv("KILN_GPU_GRAPHS"); });
  expectGpuMatchesHost(kConv, {test::randomTensor({1, 9, 9, 5}, 7), test::randomTensor({7, 3, 3, 5}, 8),
                               test::randomTensor({7}, 9)});
  expectGpuMatchesHost(kMatmulBias, {test::randomTensor({1, 64, 96}, 3), test::randomTensor({1, 96, 48}, 4),
                                     test::randomTensor({1, 1, 48}, 5)});
  // Other inputs on every call of one module: the graph reads the new ones.
  auto hrt = uncachedRuntime("cpu");
  auto grt = uncachedRuntime("cuda");
  ASSERT_TRUE(hrt && grt);
  auto hm = KILN_TAKE(hrt->loadModule(kElementwise));
  auto gm = KILN_TAKE(grt->loadModule(kElementwise));
  ASSERT_TRUE(hm && gm);
  for (uint64_t seed : {21, 23, 21, 25}) {
    std::vector<Tensor> in = {test::randomTensor({4, 1000}, seed), test::randomTensor({4, 1000}, seed + 1)};
    auto want = KILN_TAKE(hm->call("main", in));
    auto got = KILN_TAKE(gm->call("main", in));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(test::allClose(test::asDoubles(got[0]), test::asDoubles(want[0]), 1e-4, 1e-5)) << "seed " << seed;
  }
}

TEST(GpuRun, GeneratedConvAndMatmulMatchTheHost) {
  SKIP_WITHOUT_GPU();
  // --op-mode ...=jit: generated kernels instead of cuDNN and cuBLAS.
  const char *jit = "tosa.conv2d=jit,tosa.matmul=jit";
  expectGpuMatchesHost(kMatmulBias,
                       {test::randomTensor({1, 64, 96}, 3), test::randomTensor({1, 96, 48}, 4),
                        test::randomTensor({1, 1, 48}, 5)},
                       1e-4, 1e-5, jit);
  expectGpuMatchesHost(kConv,
                       {test::randomTensor({1, 9, 9, 5}, 7), test::randomTensor({7, 3, 3, 5}, 8),
                        test::randomTensor({7}, 9)},
                       1e-4, 1e-5, jit);
}

TEST(GpuRun, Fp16ConvAndMatmulMatchTheHostsFp32) {
  SKIP_WITHOUT_GPU();
  // The GPU on FP16 buffers (cuDNN / cuBLAS, FP32 accumulation) against the
  // host in FP32 on the same FP16-rounded values: within FP16 rounding.
  auto check = [](const char *mlir, std::vector<Tensor> inputs) {
    auto hrt = uncachedRuntime("cpu");
    auto grt = uncachedRuntime("cuda");
    ASSERT_TRUE(hrt && grt);
    auto hm = KILN_TAKE(hrt->loadModule(asF32(mlir)));
    auto gm = KILN_TAKE(grt->loadModule(mlir));
    ASSERT_TRUE(hm && gm);
    std::vector<Tensor> half, rounded;
    for (const Tensor &t : inputs) {
      half.push_back(toHalf(t));
      rounded.push_back(roundedToHalf(t));
    }
    auto want = KILN_TAKE(hm->call("main", rounded));
    auto got = KILN_TAKE(gm->call("main", half));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].dtype(), DType::f16);
    EXPECT_TRUE(test::allClose(test::asDoubles(got[0]), test::asDoubles(want[0]), 1e-2, 1e-2));
  };
  check(kConvF16, {test::randomTensor({1, 9, 9, 5}, 7), test::randomTensor({7, 3, 3, 5}, 8), test::randomTensor({7}, 9)});
  check(kMatmulF16, {test::randomTensor({2, 64, 96}, 3), test::randomTensor({2, 96, 48}, 4)});
}

TEST(GpuRun, OutOfRangeGatherIsAnErrorNamingTheOp) {
  SKIP_WITHOUT_GPU();
  auto rt = uncachedRuntime("cuda");
  ASSERT_TRUE(rt);
  auto m = KILN_TAKE(rt->loadModule(kGather));
  ASSERT_TRUE(m);
  Tensor idx = Tensor::fromVector<int32_t>(DType::i32, {1, 3}, std::vector<int32_t>{0, 5, 2});
  auto ok = KILN_TAKE(m->call("main", {test::randomTensor({1, 6, 4}, 1), idx}));
  EXPECT_EQ(ok.size(), 1u);
  Tensor bad = Tensor::fromVector<int32_t>(DType::i32, {1, 3}, std::vector<int32_t>{0, 6, 2});
  std::string msg = test::errorOf(m->call("main", {test::randomTensor({1, 6, 4}, 1), bad}));
  EXPECT_NE(msg.find("index out of range"), std::string::npos) << msg;
  // The runtime stays usable.
  auto again = KILN_TAKE(m->call("main", {test::randomTensor({1, 6, 4}, 1), idx}));
  EXPECT_EQ(again.size(), 1u);
}

TEST(GpuRun, BuiltinResNet50MatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const auto *model = models::findBuiltinModel("resnet50");
  ASSERT_TRUE(model);
  auto hrt = uncachedRuntime("cpu");
  auto grt = uncachedRuntime("cuda");
  ASSERT_TRUE(hrt && grt);
  auto hm = KILN_TAKE(hrt->loadProgram(KILN_TAKE(model->build())));
  auto gm = KILN_TAKE(grt->loadProgram(KILN_TAKE(model->build())));
  ASSERT_TRUE(hm && gm);
  Tensor x = test::randomTensor({1, 224, 224, 3}, 11);
  auto want = KILN_TAKE(hm->call("main", {x}));
  auto got = KILN_TAKE(gm->call("main", {x}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(got[0]), test::asDoubles(want[0]), 1e-3, 1e-4));
}
#endif
