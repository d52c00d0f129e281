// Range code for batches (RuntimeOptions::batchRanges): the batch analysis
// (lowering/graph/BatchDimension.h) on functions it must accept and refuse,
// and, for every op class it lets through, calls at batch sizes inside and
// at the ends of a range served by batch-1 code against code specialized
// to each size (differential). Also: outputs the caller gives, errors of
// one item, a module closed under range calls, and hot sizes getting code
// of their own.
#include "api/Kiln.h"
#include "api/Profiler.h"
#include "jit/CompileService.h"
#include "tests/TestUtil.h"

#include "llvm/ADT/ScopeExit.h"

#include <atomic>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <regex>

using namespace kiln;

namespace {

/// A tosa.const of `shape` with values from `seed` (hex blob: any shape).
std::string constant(const std::string &name, std::vector<int64_t> shape, unsigned seed, float scale = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  int64_t n = 1;
  std::string type = "tensor<";
  for (int64_t d : shape) {
    n *= d;
    type += std::to_string(d) + "x";
  }
  type += "f32>";
  std::string hex = "0x";
  for (int64_t i = 0; i < n; ++i) {
    float v = u(rng);
    unsigned char b[4];
    std::memcpy(b, &v, 4);
    char buf[9];
    std::snprintf(buf, sizeof buf, "%02X%02X%02X%02X", b[0], b[1], b[2], b[3]);
    hex += buf;
  }
  return "    %" + name + " = \"tosa.const\"() <{values = dense<\"" + hex + "\"> : " + type + "}> : () -> " + type +
         "\n";
}

std::string shape(const std::string &name, std::vector<int64_t> v) {
  std::string list;
  for (size_t i = 0; i < v.size(); ++i) list += (i ? ", " : "") + std::to_string(v[i]);
  std::string n = std::to_string(v.size());
  return "    %" + name + " = tosa.const_shape {values = dense<[" + list + "]> : tensor<" + n + "xindex>} : () -> !tosa.shape<" +
         n + ">\n";
}

const char *kZp = "    %zp = \"tosa.const\"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n";

/// Functions whose batch is separable, one op class or more each.
std::string separableModel() {
  std::string m = "module {\n";
  // Convolutions and pools over NHWC, with a clamp between.
  m += "  func.func @convs(%x: tensor<?x8x8x3xf32>) -> tensor<?x2x2x6xf32> {\n" + std::string(kZp) +
       constant("w", {6, 3, 3, 3}, 1) + constant("b", {6}, 2) + constant("dw", {3, 3, 6, 1}, 3) +
       constant("db", {6}, 4) +
       "    %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = "
       "array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<?x8x8x3xf32>, tensor<6x3x3x3xf32>, tensor<6xf32>, "
       "tensor<1xf32>, tensor<1xf32>) -> tensor<?x8x8x6xf32>\n"
       "    %r = tosa.clamp %c {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<?x8x8x6xf32>) -> "
       "tensor<?x8x8x6xf32>\n"
       "    %d = tosa.depthwise_conv2d %r, %dw, %db, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = "
       "array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<?x8x8x6xf32>, tensor<3x3x6x1xf32>, tensor<6xf32>, "
       "tensor<1xf32>, tensor<1xf32>) -> tensor<?x8x8x6xf32>\n"
       "    %p = tosa.max_pool2d %d {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, "
       "0>} : (tensor<?x8x8x6xf32>) -> tensor<?x4x4x6xf32>\n"
       "    %a = tosa.avg_pool2d %p, %zp, %zp {acc_type = f32, kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, "
       "pad = array<i64: 0, 0, 0, 0>} : (tensor<?x4x4x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<?x2x2x6xf32>\n"
       "    return %a : tensor<?x2x2x6xf32>\n  }\n";
  // A dense layer with the batch in the matmul's H (reshapes around it), a
  // second input passed whole and broadcast, two results.
  m += "  func.func @dense(%x: tensor<?x16xf32>, %t: tensor<16xf32>) -> (tensor<?x5xf32>, tensor<?x1xf32>) {\n" +
       std::string(kZp) + constant("w", {1, 16, 5}, 5) + shape("s1", {1, 16}) + shape("s2", {1, -1, 16}) +
       shape("s3", {-1, 5}) +
       "    %t1 = tosa.reshape %t, %s1 : (tensor<16xf32>, !tosa.shape<2>) -> tensor<1x16xf32>\n"
       "    %y = tosa.add %x, %t1 : (tensor<?x16xf32>, tensor<1x16xf32>) -> tensor<?x16xf32>\n"
       "    %y3 = tosa.reshape %y, %s2 : (tensor<?x16xf32>, !tosa.shape<3>) -> tensor<1x?x16xf32>\n"
       "    %mm = tosa.matmul %y3, %w, %zp, %zp : (tensor<1x?x16xf32>, tensor<1x16x5xf32>, tensor<1xf32>, "
       "tensor<1xf32>) -> tensor<1x?x5xf32>\n"
       "    %o = tosa.reshape %mm, %s3 : (tensor<1x?x5xf32>, !tosa.shape<2>) -> tensor<?x5xf32>\n"
       "    %sg = tosa.sigmoid %o : (tensor<?x5xf32>) -> tensor<?x5xf32>\n"
       "    %sum = tosa.reduce_sum %y {axis = 1 : i32} : (tensor<?x16xf32>) -> tensor<?x1xf32>\n"
       "    return %sg, %sum : tensor<?x5xf32>, tensor<?x1xf32>\n  }\n";
  // A batched matmul (the batch in N of both operands).
  m += "  func.func @bmm(%a: tensor<?x4x8xf32>, %b: tensor<?x8x3xf32>) -> tensor<?x4x3xf32> {\n" + std::string(kZp) +
       "    %r = tosa.matmul %a, %b, %zp, %zp : (tensor<?x4x8xf32>, tensor<?x8x3xf32>, tensor<1xf32>, tensor<1xf32>) "
       "-> tensor<?x4x3xf32>\n    return %r : tensor<?x4x3xf32>\n  }\n";
  // Layout ops along other dims: transpose, pad, concat, slice, tile,
  // reduce_max, argmax.
  m += "  func.func @layout(%x: tensor<?x3x4x5xf32>) -> (tensor<?x4x1x12xf32>, tensor<?x4x1xi32>) {\n" +
       shape("pads", {0, 0, 0, 0, 2, 2, 0, 0}) + shape("st", {0, 0, 1, 0}) + shape("sz", {-1, 4, 7, 6}) +
       shape("mult", {1, 1, 1, 2}) +
       "    %pv = \"tosa.const\"() <{values = dense<0.5> : tensor<1xf32>}> : () -> tensor<1xf32>\n"
       "    %t = tosa.transpose %x {perms = array<i32: 0, 2, 3, 1>} : (tensor<?x3x4x5xf32>) -> tensor<?x4x5x3xf32>\n"
       "    %p = tosa.pad %t, %pads, %pv : (tensor<?x4x5x3xf32>, !tosa.shape<8>, tensor<1xf32>) -> "
       "tensor<?x4x9x3xf32>\n"
       "    %c = tosa.concat %p, %p {axis = 3 : i32} : (tensor<?x4x9x3xf32>, tensor<?x4x9x3xf32>) -> "
       "tensor<?x4x9x6xf32>\n"
       "    %s = tosa.slice %c, %st, %sz : (tensor<?x4x9x6xf32>, !tosa.shape<4>, !tosa.shape<4>) -> "
       "tensor<?x4x7x6xf32>\n"
       "    %tl = tosa.tile %s, %mult : (tensor<?x4x7x6xf32>, !tosa.shape<4>) -> tensor<?x4x7x12xf32>\n"
       "    %m = tosa.reduce_max %tl {axis = 2 : i32} : (tensor<?x4x7x12xf32>) -> tensor<?x4x1x12xf32>\n"
       "    %am = tosa.argmax %m {axis = 3 : i32} : (tensor<?x4x1x12xf32>) -> tensor<?x4x1xi32>\n"
       "    return %m, %am : tensor<?x4x1x12xf32>, tensor<?x4x1xi32>\n  }\n";
  // A table lookup: the batch merged with the sequence into the indices' W.
  m += "  func.func @lookup(%ids: tensor<?x6xi32>) -> tensor<?x6x4xf32> {\n" + constant("table", {1, 10, 4}, 6) +
       shape("s1", {1, -1}) + shape("s2", {-1, 6, 4}) +
       "    %i = tosa.reshape %ids, %s1 : (tensor<?x6xi32>, !tosa.shape<2>) -> tensor<1x?xi32>\n"
       "    %g = tosa.gather %table, %i : (tensor<1x10x4xf32>, tensor<1x?xi32>) -> tensor<1x?x4xf32>\n"
       "    %r = tosa.reshape %g, %s2 : (tensor<1x?x4xf32>, !tosa.shape<3>) -> tensor<?x6x4xf32>\n"
       "    return %r : tensor<?x6x4xf32>\n  }\n";
  return m + "}\n";
}

/// Functions the analysis must refuse, and a word of why.
std::string refusedModel() {
  std::string m = "module {\n";
  m += "  func.func @sum_over_batch(%x: tensor<?x4xf32>) -> tensor<1x4xf32> {\n"
       "    %r = tosa.reduce_sum %x {axis = 0 : i32} : (tensor<?x4xf32>) -> tensor<1x4xf32>\n"
       "    return %r : tensor<1x4xf32>\n  }\n";
  m += "  func.func @flip(%x: tensor<?x4xf32>) -> tensor<4x?xf32> {\n"
       "    %r = tosa.transpose %x {perms = array<i32: 1, 0>} : (tensor<?x4xf32>) -> tensor<4x?xf32>\n"
       "    return %r : tensor<4x?xf32>\n  }\n";
  m += "  func.func @gram(%x: tensor<1x?x4xf32>, %y: tensor<1x4x?xf32>) -> tensor<1x?x?xf32> {\n" + std::string(kZp) +
       "    %r = tosa.matmul %x, %y, %zp, %zp : (tensor<1x?x4xf32>, tensor<1x4x?xf32>, tensor<1xf32>, tensor<1xf32>) "
       "-> tensor<1x?x?xf32>\n    return %r : tensor<1x?x?xf32>\n  }\n";
  m += "  func.func @interleave(%x: tensor<?x6xf32>) -> tensor<?x4xf32> {\n" + shape("s", {-1, 4}) +
       "    %r = tosa.reshape %x, %s : (tensor<?x6xf32>, !tosa.shape<2>) -> tensor<?x4xf32>\n"
       "    return %r : tensor<?x4xf32>\n  }\n";
  m += "  func.func @fixed(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {\n"
       "    %r = tosa.abs %x : (tensor<2x4xf32>) -> tensor<2x4xf32>\n    return %r : tensor<2x4xf32>\n  }\n";
  return m + "}\n";
}

RuntimeOptions options(bool ranges, int hotCalls = 1000) {
  RuntimeOptions o;
  o.cacheMode = CacheMode::kOff;
  o.placement.measure = false;
  o.compilePolicy = RuntimeOptions::CompilePolicy::kWait;
  o.batchRanges = ranges;
  o.hotBatchCalls = hotCalls;
  return o;
}

/// Inputs of `function` at batch `n` (dynamic dims -> n), random values
/// (indices in [0, 10) for i32).
std::vector<Tensor> inputsAt(const FunctionSignature &s, int64_t n, unsigned seed) {
  std::vector<Tensor> out;
  for (const auto &arg : s.args) {
    std::vector<int64_t> dims(arg.type.shape.begin(), arg.type.shape.end());
    for (int64_t &d : dims)
      if (d == kDynamic) d = n;
    if (arg.type.dtype == DType::i32) {
      Tensor t = Tensor::empty(DType::i32, dims);
      std::mt19937 rng(seed);
      for (int64_t i = 0; i < t.numElements(); ++i) t.data<int32_t>()[i] = int32_t(rng() % 10);
      out.push_back(std::move(t));
    } else {
      out.push_back(test::randomTensor(dims, seed++));
    }
  }
  return out;
}

TEST(BatchRange, AnalysisAcceptsBatchSeparableFunctions) {
  auto rt = test::takeOrFail(Runtime::create(options(true)));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  for (const char *fn : {"convs", "dense", "bmm", "layout", "lookup"}) {
    const FunctionSignature *s = m->signature(fn);
    ASSERT_NE(s, nullptr) << fn;
    EXPECT_TRUE(s->batch.separable) << fn << ": " << s->batch.why;
  }
  const BatchDimension &dense = m->signature("dense")->batch;
  EXPECT_EQ(dense.inputs, (std::vector<bool>{true, false}));  // the second input is passed whole
  EXPECT_EQ(dense.results, (std::vector<int>{0, 0}));
}

TEST(BatchRange, AnalysisRefusesWhatMixesTheBatch) {
  auto rt = test::takeOrFail(Runtime::create(options(true)));
  auto m = test::takeOrFail(rt->loadModule(refusedModel()));
  std::vector<std::pair<const char *, const char *>> cases = {
      {"sum_over_batch", "tosa.reduce_sum"},   // reduces over the batch
      {"flip", "before the batch"},            // a transpose that interleaves items
      {"gram", "dimension 0"},                 // no dynamic dim 0
      {"interleave", "splits the items"},      // a reshape that splits items
      {"fixed", "no argument has a dynamic"}};
  for (auto [fn, why] : cases) {
    const FunctionSignature *s = m->signature(fn);
    ASSERT_NE(s, nullptr) << fn;
    EXPECT_FALSE(s->batch.separable) << fn;
    EXPECT_NE(s->batch.why.find(why), std::string::npos) << fn << ": " << s->batch.why;
  }
  // Refused functions still run at any batch, compiled per size.
  auto x = test::randomTensor({3, 4}, 1);
  auto r = test::takeOrFail(m->call("sum_over_batch", {x}));
  EXPECT_EQ(r[0].shape()[0], 1);
  EXPECT_EQ(m->tierStats().rangeCalls, 0u);
}

// Differential: every separable function at batch sizes 1..8 (the ends
// and inside) as calls of batch 1 against code specialized to the size.
TEST(BatchRange, RangeCodeMatchesSpecializedCodeForEveryOpClass) {
  auto ranged = test::takeOrFail(Runtime::create(options(true)));
  auto plain = test::takeOrFail(Runtime::create(options(false)));
  auto mr = test::takeOrFail(ranged->loadModule(separableModel()));
  auto mp = test::takeOrFail(plain->loadModule(separableModel()));
  uint64_t splitCalls = 0;
  for (const char *fn : {"convs", "dense", "bmm", "layout", "lookup"}) {
    size_t compiledBefore = mr->numCompiled();
    for (int64_t n : {1, 2, 5, 8, 3}) {
      SCOPED_TRACE(std::string(fn) + " at batch " + std::to_string(n));
      auto in = inputsAt(*mr->signature(fn), n, unsigned(n) * 7);
      auto got = test::takeOrFail(mr->call(fn, in));
      auto want = test::takeOrFail(mp->call(fn, in));
      ASSERT_EQ(got.size(), want.size());
      for (size_t r = 0; r < got.size(); ++r) {
        EXPECT_EQ(got[r].type(), want[r].type());
        EXPECT_TRUE(test::allClose(test::asDoubles(got[r]), test::asDoubles(want[r]), 1e-5, 1e-5));
      }
      splitCalls += n > 1;
    }
    EXPECT_EQ(mr->numCompiled(), compiledBefore + 1) << fn << ": one compile (batch 1) serves every size";
  }
  EXPECT_EQ(mr->tierStats().rangeCalls, splitCalls);
  EXPECT_EQ(mp->tierStats().rangeCalls, 0u);
}

TEST(BatchRange, OutputsTheCallerGivesAreWrittenInPlace) {
  auto rt = test::takeOrFail(Runtime::create(options(true)));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  auto in = inputsAt(*m->signature("convs"), 4, 3);
  auto want = test::takeOrFail(m->call("convs", in));
  Tensor out = Tensor::empty(DType::f32, {4, 2, 2, 6});
  auto got = test::takeOrFail(m->call("convs", in, {out}));
  EXPECT_EQ(got[0].rawData(), out.rawData());
  EXPECT_TRUE(test::allClose(test::asDoubles(out), test::asDoubles(want[0]), 0, 0));
  // A given output of the wrong shape is the call's error, naming both.
  Tensor wrong = Tensor::empty(DType::f32, {3, 2, 2, 6});
  std::string err = test::errorOf(m->call("convs", in, {wrong}));
  EXPECT_NE(err.find("3x2x2x6xf32"), std::string::npos) << err;
  EXPECT_NE(err.find("4x2x2x6xf32"), std::string::npos) << err;
}

TEST(BatchRange, AnItemsErrorIsTheCallsErrorNamingTheItem) {
  auto rt = test::takeOrFail(Runtime::create(options(true)));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  auto in = inputsAt(*m->signature("convs"), 3, 5);
  ASSERT_TRUE(bool(m->call("convs", inputsAt(*m->signature("convs"), 1, 5))));  // batch-1 code compiled
  auto cancel = std::make_shared<CancellationToken>();
  cancel->cancel();
  auto results = m->callAsync("convs", in, cancel);
  auto v = results[0].awaitValue();
  ASSERT_FALSE(bool(v));
  std::string err = llvm::toString(v.takeError());
  EXPECT_NE(err.find("item 0 of a batch of 3"), std::string::npos) << err;
  EXPECT_NE(err.find("cancelled"), std::string::npos) << err;
  // The next call is served.
  EXPECT_TRUE(bool(m->call("convs", in)));
}

TEST(BatchRange, ClosingTheModuleWaitsForRangeCallsInFlight) {
  auto rt = test::takeOrFail(Runtime::create(options(true)));
  std::vector<AsyncValueRef<Tensor>> results;
  {
    auto m = test::takeOrFail(rt->loadModule(separableModel()));
    ASSERT_TRUE(bool(m->call("convs", inputsAt(*m->signature("convs"), 1, 5))));
    for (int i = 0; i < 4; ++i) {
      auto r = m->callAsync("convs", inputsAt(*m->signature("convs"), 6, unsigned(i)));
      results.insert(results.end(), r.begin(), r.end());
    }
  }  // the module goes while items still start
  for (auto &r : results) EXPECT_TRUE(bool(r.awaitValue()));
}

TEST(BatchRange, AHotSizeGetsItsOwnCodeOnlyIfFaster) {
  auto rt = test::takeOrFail(Runtime::create(options(true, /*hotCalls=*/2)));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  auto in = inputsAt(*m->signature("dense"), 6, 9);
  auto first = test::takeOrFail(m->call("dense", in));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(bool(m->call("dense", in)));
  m->waitForBackgroundCompiles();
  Module::TierStats t = m->tierStats();
  EXPECT_EQ(t.hotSizeCompiles, 1u);
  EXPECT_EQ(t.swaps + t.rangeKept, 1u);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_NE(t.events[0].find("as calls of batch 1"), std::string::npos) << t.events[0];
  // Whichever serves it now, the results are the same.
  auto later = test::takeOrFail(m->call("dense", in));
  for (size_t r = 0; r < first.size(); ++r)
    EXPECT_TRUE(test::allClose(test::asDoubles(later[r]), test::asDoubles(first[r]), 1e-5, 1e-5));
}

/// The strategy words of the conv kernel `m` ran while profiled calling
/// `fn` with `in`.
std::string convStrategy(Runtime &rt, Module &m, const char *fn, const std::vector<Tensor> &in,
                         std::vector<Tensor> &out) {
  Profiler profiler(rt, /*measurePeaks=*/false);
  out = test::takeOrFail(m.call(fn, in));
  Profile prof = profiler.stop();
  for (const KernelProfile &k : prof.kernels)
    if (k.ops.find("tosa.conv2d") != std::string::npos) return k.strategy;
  return "no conv kernel in:\n" + prof.table();
}

// A conv that streams its filter (a 6 MiB 1x1 filter, 16 output pixels at
// batch 1) in a model whose batch is dynamic: the filter is stored in the
// panels batch 1 reads (kiln-hoist-constants lays weights out once, for
// the batch-1 code that range calls run; it had taken the dynamic output
// as "not streaming", and ResNet-50 from a dynamic-batch ONNX export ran
// 1.15x slower at batch 1 than from a static one), and code specialized to
// a batch that no longer streams (32 x 16 pixels) still reads it panel by
// panel, not back through its transposes (a copy of the filter per call;
// its blocks had been sized by L2 alone: 512 filters over 64-wide panels).
TEST(BatchRange, StreamedFiltersAreReadInPanelsAtEveryBatch) {
  const int64_t C = 512, F = 3072;
  std::string model = "module {\n  func.func @streamed(%x: tensor<?x4x4x512xf32>) -> tensor<?x4x4x3072xf32> {\n" +
                      std::string(kZp) + constant("w", {F, 1, 1, C}, 11, 0.05f) + constant("b", {F}, 12) +
                      "    %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, "
                      "stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<?x4x4x512xf32>, "
                      "tensor<3072x1x1x512xf32>, tensor<3072xf32>, tensor<1xf32>, tensor<1xf32>) -> "
                      "tensor<?x4x4x3072xf32>\n    return %c : tensor<?x4x4x3072xf32>\n  }\n}\n";
  auto ranged = test::takeOrFail(Runtime::create(options(true)));
  auto plain = test::takeOrFail(Runtime::create(options(false)));
  auto mr = test::takeOrFail(ranged->loadModule(model));
  auto mp = test::takeOrFail(plain->loadModule(model));
  std::vector<Tensor> one, many, manyItems;
  std::string atOne = convStrategy(*ranged, *mr, "streamed", inputsAt(*mr->signature("streamed"), 1, 3), one);
  EXPECT_NE(atOne.find("filter panels of"), std::string::npos) << atOne;
  auto in = inputsAt(*mp->signature("streamed"), 32, 4);
  std::string atMany = convStrategy(*plain, *mp, "streamed", in, many);
  // Its parallel blocks are the panels ("blocks of 64 filters, ..., filter
  // panels of 64"), so that each reads one.
  std::smatch blocks, panels;
  ASSERT_TRUE(std::regex_search(atMany, blocks, std::regex("blocks of ([0-9]+) filters"))) << atMany;
  ASSERT_TRUE(std::regex_search(atMany, panels, std::regex("filter panels of ([0-9]+)"))) << atMany;
  EXPECT_EQ(blocks[1].str(), panels[1].str()) << atMany;
  // Specialized code at batch 32 and batch-1 code run as 32 items agree.
  manyItems = test::takeOrFail(mr->call("streamed", in));
  ASSERT_EQ(many.size(), 1u);
  ASSERT_EQ(manyItems.size(), 1u);
  EXPECT_TRUE(test::allClose(test::asDoubles(many[0]), test::asDoubles(manyItems[0]), 1e-4, 1e-4));
}

// Tiered and range code together: the first call of a new batch size runs
// at once, its items on the kernel plan of batch 1 while batch 1's JIT
// compile is held; later calls run on the compiled code.
TEST(BatchRange, TieredFirstCallOfAnyBatchRunsOnTheBatchOnePlan) {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  jit::FaultInjection faults;
  faults.beforeCompile = [gate] {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait_for(lock, std::chrono::minutes(2), [&] { return gate->open; });
  };
  RuntimeOptions o = options(true);
  o.compilePolicy = RuntimeOptions::CompilePolicy::kTiered;
  auto rt = test::takeOrFail(Runtime::createWithFaults(o, faults));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  auto open = llvm::scope_exit([&] {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
    gate->cv.notify_all();
  });
  auto plain = test::takeOrFail(Runtime::create(options(false)));
  auto mp = test::takeOrFail(plain->loadModule(separableModel()));
  auto in = inputsAt(*m->signature("convs"), 4, 11);
  auto want = test::takeOrFail(mp->call("convs", in));
  auto got = test::takeOrFail(m->call("convs", in));  // returns while batch 1's compile is held
  EXPECT_TRUE(test::allClose(test::asDoubles(got[0]), test::asDoubles(want[0]), 1e-5, 1e-5));
  Module::TierStats held = m->tierStats();
  EXPECT_EQ(held.kernelPlanCalls, 4u);  // each item
  EXPECT_EQ(held.swaps, 0u);
  EXPECT_EQ(held.rangeCalls, 1u);
  open.release();
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
    gate->cv.notify_all();
  }
  m->waitForBackgroundCompiles();
  auto later = test::takeOrFail(m->call("convs", inputsAt(*m->signature("convs"), 7, 12)));
  auto laterWant = test::takeOrFail(mp->call("convs", inputsAt(*m->signature("convs"), 7, 12)));
  EXPECT_TRUE(test::allClose(test::asDoubles(later[0]), test::asDoubles(laterWant[0]), 1e-5, 1e-5));
  Module::TierStats after = m->tierStats();
  EXPECT_EQ(after.swaps, 1u);
  EXPECT_EQ(after.kernelPlanCalls, 4u);  // batch 7 ran on compiled code
  EXPECT_EQ(m->numCompiled(), 1u);
}

// The compile a tiered first call of a new batch size queues (batch 1's)
// starts once the whole call has answered, not when its first item has:
// the other items would run beside it (ResNet-50's first call at batch 15:
// 140 ms an item, 74 with the machine to itself). A call is counted in
// rangeCalls before its results are set, so the compile sees it counted.
TEST(BatchRange, TieredCompileStartsOnceTheWholeFirstBatchHasAnswered) {
  std::atomic<Module *> module{nullptr};
  std::atomic<int> rangeCallsAtCompile{-1};
  jit::FaultInjection faults;
  faults.beforeCompile = [&] {
    if (Module *m = module.load()) rangeCallsAtCompile.store(int(m->tierStats().rangeCalls));
  };
  RuntimeOptions o = options(true);
  o.compilePolicy = RuntimeOptions::CompilePolicy::kTiered;
  auto rt = test::takeOrFail(Runtime::createWithFaults(o, faults));
  auto m = test::takeOrFail(rt->loadModule(separableModel()));
  module.store(m.get());
  auto in = inputsAt(*m->signature("convs"), 256, 13);  // items enough to outlast a compile's start
  auto got = test::takeOrFail(m->call("convs", in));
  m->waitForBackgroundCompiles();
  EXPECT_EQ(m->tierStats().kernelPlanCalls, 256u);
  EXPECT_EQ(rangeCallsAtCompile.load(), 1);
  EXPECT_EQ(m->tierStats().swaps, 1u);
}

TEST(BatchRange, EnvironmentTurnsRangesOff) {
  ::setenv("KILN_BATCH_RANGES", "0", 1);
  ::setenv("KILN_HOT_BATCH_CALLS", "0", 1);
  auto o = RuntimeOptions::fromEnvironment();
  ::setenv("KILN_BATCH_RANGES", "maybe", 1);
  auto bad = RuntimeOptions::fromEnvironment();
  ::unsetenv("KILN_BATCH_RANGES");
  ::setenv("KILN_HOT_BATCH_CALLS", "often", 1);
  auto badHot = RuntimeOptions::fromEnvironment();
  ::unsetenv("KILN_HOT_BATCH_CALLS");
  ASSERT_TRUE(bool(o));
  EXPECT_FALSE(*o->batchRanges);
  EXPECT_EQ(*o->hotBatchCalls, 0);
  std::string err = test::errorOf(std::move(bad));
  EXPECT_NE(err.find("KILN_BATCH_RANGES"), std::string::npos) << err;
  err = test::errorOf(std::move(badHot));
  EXPECT_NE(err.find("KILN_HOT_BATCH_CALLS='often'"), std::string::npos) << err;
  auto defaults = test::takeOrFail(RuntimeOptions::fromEnvironment());
  EXPECT_TRUE(*defaults.batchRanges);
  EXPECT_EQ(*defaults.hotBatchCalls, 8);
}

}  // namespace
