// codegen + jit without MLIR: hand-written LLVM IR compiled for the host,
// loaded into ORC, calling a runtime symbol (kiln_parallel_for).
#include "codegen/HostCodegen.h"
#include "codegen/LLVMPasses.h"
#include "jit/JitEngine.h"
#include "jit/PlanJson.h"
#include "jit/RuntimeSymbols.h"
#include "runtime/Executor.h"
#include "tests/TestUtil.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

#include <cstring>

using namespace kiln;

namespace {
// kiln_entry(buffers): out[i] = in[i] * 2 over n = 1000 elements, in chunks
// handed to kiln_parallel_for.
const char *kIR = R"ll(
declare void @kiln_parallel_for(i64, i64, ptr, ptr)

define internal void @body(ptr %ctx, i64 %begin, i64 %end) {
entry:
  %in = load ptr, ptr %ctx
  %outp = getelementptr ptr, ptr %ctx, i64 1
  %out = load ptr, ptr %outp
  br label %loop
loop:
  %i = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %src = getelementptr float, ptr %in, i64 %i
  %v = load float, ptr %src
  %d = fmul float %v, 2.0
  %dst = getelementptr float, ptr %out, i64 %i
  store float %d, ptr %dst
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %end
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define void @kiln_entry(ptr %buffers) {
  call void @kiln_parallel_for(i64 1000, i64 64, ptr @body, ptr %buffers)
  ret void
}
)ll";
}  // namespace

TEST(Jit, HostObjectCallsKilnParallelFor) {
  auto cg = KILN_TAKE(codegen::HostCodegen::create());
  ASSERT_TRUE(cg);
  EXPECT_FALSE(cg->target().cpu.empty());
  EXPECT_NE(cg->target().triple.find("x86_64"), std::string::npos);

  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(kIR, diag, ctx);
  ASSERT_TRUE(m) << diag.getMessage().str();
  auto object = KILN_TAKE(cg->emitObject(*m));
  ASSERT_FALSE(object.empty());

  auto engine = KILN_TAKE(jit::JitEngine::create());
  ASSERT_TRUE(engine);
  auto code = KILN_TAKE(engine->load(object, "parallel"));
  ASSERT_TRUE(code);
  auto entry = KILN_TAKE(code->lookup("kiln_entry"));
  ASSERT_NE(entry, nullptr);

  std::vector<float> in(1000), out(1000, 0);
  for (int i = 0; i < 1000; ++i) in[i] = float(i);
  void *buffers[2] = {in.data(), out.data()};
  HostExecutor ex(2);
  std::atomic<bool> ran{false};
  ex.spawn([&] {  // on a worker: the parallel loop uses this executor's arena
    reinterpret_cast<void (*)(void **)>(entry)(buffers);
    ran = true;
  });
  ex.waitIdle();
  ASSERT_TRUE(ran.load());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[i], 2.0f * i);

  // A missing symbol is an error, not a crash.
  auto missing = code->lookup("no_such_symbol");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no_such_symbol"), std::string::npos);
}

TEST(Jit, CorruptObjectIsAnError) {
  auto engine = KILN_TAKE(jit::JitEngine::create());
  ASSERT_TRUE(engine);
  std::string garbage(256, '\x7f');
  auto code = engine->load(llvm::ArrayRef<char>(garbage.data(), garbage.size()), "garbage");
  EXPECT_FALSE(bool(code));
  if (!code) llvm::consumeError(code.takeError());
}

TEST(Jit, SchedulersAreBoundedOnLargeBlocks) {
  // Host code generation turns LLVM's post-RA scheduler off and caps the
  // machine scheduler's dependence graph (a depthwise conv kernel took 6 s
  // in them), and the setting is part of the host target's cache key text.
  auto cg = KILN_TAKE(codegen::HostCodegen::create());
  EXPECT_EQ(codegen::boundSchedulingTime(), "post-RA-scheduler=false dag-maps-huge-region=200");
  auto &options = llvm::cl::getRegisteredOptions();
  auto postRA = options.find("post-RA-scheduler");
  ASSERT_NE(postRA, options.end());
  EXPECT_FALSE(static_cast<llvm::cl::opt<bool> *>(postRA->second)->getValue());
  auto huge = options.find("dag-maps-huge-region");
  ASSERT_NE(huge, options.end());
  EXPECT_EQ(static_cast<llvm::cl::opt<unsigned> *>(huge->second)->getValue(), 200u);
}

TEST(Jit, HostPipelineLeavesScalarLoopsToTheStrategy) {
  // Host code is compiled without LLVM's loop vectorizer (kiln-cpu-strategy
  // writes the vectors; the vectorizer only took on the scalar loops left
  // over, at a cost in compile time): the scalar loop of kIR stays scalar,
  // where the same pipeline with the vectorizer makes vectors of it.
  auto cg = KILN_TAKE(codegen::HostCodegen::create());
  ASSERT_TRUE(cg);
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(kIR, diag, ctx);
  ASSERT_TRUE(m) << diag.getMessage().str();
  codegen::ObjectDumps dumps;
  ASSERT_FALSE(KILN_TAKE(cg->emitObject(*m, nullptr, &dumps)).empty());
  EXPECT_EQ(dumps.optimizedIR.find("x float>"), std::string::npos) << dumps.optimizedIR;

  std::unique_ptr<llvm::Module> again = llvm::parseAssemblyString(kIR, diag, ctx);
  ASSERT_TRUE(again);
  auto tm = KILN_TAKE(cg->makeTargetMachine());
  ASSERT_TRUE(tm);
  again->setDataLayout(tm->createDataLayout());
  again->setTargetTriple(tm->getTargetTriple());
  codegen::optimizeIR(*again, *tm, 3, /*loopVectorize=*/true);
  std::string ir;
  llvm::raw_string_ostream os(ir);
  again->print(os, nullptr);
  EXPECT_NE(ir.find("x float>"), std::string::npos) << ir;
}

TEST(Jit, ScratchScopeHandsItsBufferToOneAcquire) {
  // kiln_scratch_acquire / _release as generated code calls them
  // (lowering/cpu/ScratchBuffers.cpp), found by name as the JIT links them.
  using Acquire = void *(*)(int64_t);
  using Release = void (*)(void *);
  Acquire acquire = nullptr;
  Release release = nullptr;
  for (const auto &[name, address] : jit::runtimeSymbols()) {
    if (std::string(name) == "kiln_scratch_acquire") acquire = reinterpret_cast<Acquire>(address);
    if (std::string(name) == "kiln_scratch_release") release = reinterpret_cast<Release>(address);
  }
  ASSERT_NE(acquire, nullptr);
  ASSERT_NE(release, nullptr);

  alignas(64) static char planned[4096], inner[256];
  {
    jit::ScratchScope scope(planned, sizeof planned);
    void *big = acquire(8192);  // larger than planned: a block of its own
    ASSERT_NE(big, nullptr);
    EXPECT_TRUE(big < planned || big >= planned + sizeof planned);
    std::memset(big, 1, 8192);
    void *p = acquire(4096);
    EXPECT_EQ(p, planned);
    void *q = acquire(16);  // the planned buffer is taken: another block
    EXPECT_NE(q, planned);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
    {
      // A step run on this thread while the first waits (a nested scope).
      jit::ScratchScope nested(inner, sizeof inner);
      void *r = acquire(256);
      EXPECT_EQ(r, inner);
      release(r);
    }
    release(q);
    release(p);  // the planned buffer: nothing to free
    release(big);
  }
  // No scope: every acquire gets a block of its own.
  void *s = acquire(128);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s != planned && s != inner);
  release(s);
}

TEST(Jit, PlanJsonKeepsScratchAndRejectsANegativeOne) {
  // A step's scratch size travels with the plan through the disk cache; a
  // negative one (a corrupt entry) is an error naming it.
  lowering::ExecPlan plan;
  lowering::PlanValue in, out;
  in.kind = lowering::PlanValue::kInput;
  in.index = 0;
  in.type = TensorType{DType::f32, {4}};
  out.type = in.type;
  plan.values = {in, out};
  lowering::PlanStep step;
  step.name = "cluster0";
  step.inputs = {0};
  step.outputs = {1};
  step.target = "host-cpu";
  step.object = 0;
  step.symbol = "kiln_entry";
  step.scratchBytes = 3612672;
  step.strategy = "matmul 128x768x768: registers 4x64";
  plan.steps = {step};
  plan.results = {1};
  std::string json = jit::planToJson(plan);
  auto back = jit::planFromJson(json);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->steps[0].scratchBytes, 3612672);
  EXPECT_EQ(back->steps[0].strategy, "matmul 128x768x768: registers 4x64");  // profiles of cached code say it too

  std::string bad = json;
  size_t at = bad.find("\"scratch_bytes\":3612672");
  ASSERT_NE(at, std::string::npos) << json;
  bad.replace(at, strlen("\"scratch_bytes\":3612672"), "\"scratch_bytes\":-1");
  auto rejected = jit::planFromJson(bad);
  ASSERT_FALSE(bool(rejected));
  EXPECT_NE(llvm::toString(rejected.takeError()).find("bad plan: negative scratch size"), std::string::npos);
}
