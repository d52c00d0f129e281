#include "jit/HostTarget.h"
#include "jit/RuntimeSymbols.h"
#include "codegen/LLVMPasses.h"
#include "runtime/FileIO.h"
#include "runtime/Error.h"
#include "runtime/Executable.h"
#include "runtime/Executor.h"

#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit {

LoadedCode::~LoadedCode() = default;
Target::~Target() = default;

namespace {
class HostCode final : public LoadedCode {
public:
  explicit HostCode(std::unique_ptr<LoadedObject> object) : object_(std::move(object)) {}
  llvm::Expected<void *> lookup(llvm::StringRef symbol) const override { return object_->lookup(symbol); }

private:
  std::unique_ptr<LoadedObject> object_;
};
}  // namespace

llvm::Expected<std::unique_ptr<HostTarget>> HostTarget::create(HostTargetOptions options) {
  std::unique_ptr<HostTarget> t(new HostTarget());
  t->options_ = std::move(options);
  auto cg = codegen::HostCodegen::create(t->options_.codegen);
  if (!cg) return cg.takeError();
  t->codegen_ = std::move(*cg);
  t->tuning_ = lowering::CpuTuning::fromFeatures(t->codegen_->target().features, t->options_.codegen.maxVectorBits);
  if (!t->options_.vectorize) t->tuning_.vectorBits = 0;
  if (t->options_.prefetchBytes) t->tuning_.prefetchBytes = *t->options_.prefetchBytes;
  auto engine = JitEngine::create(t->options_.jitSymbols);
  if (!engine) return engine.takeError();
  t->engine_ = std::move(*engine);
  return std::move(t);
}

std::string HostTarget::description() const {
  const auto &m = codegen_->target();
  return m.triple + " " + m.cpu + " " + m.features;
}

std::string HostTarget::pipelineText() const {
  std::string text = "opt-level=" + std::to_string(options_.codegen.optLevel) +
                     " hoist-min-elements=" + std::to_string(lowering::kDefaultHoistMinElements) + " llvm: " +
                     codegen::boundSchedulingTime() + " loop-vectorize=off";
  for (const auto &stage : lowering::cpuPipelineStages(tuning_))
    text += std::string("\n") + stage.name + ": " + stage.pipeline;
  return text;
}

lowering::WeightLayouts HostTarget::weightLayouts(const ops::PlacementOptions &placement) const {
  lowering::WeightLayouts l;
  // The conv strategy reads HWCF filters; loops and the Eigen kernel read FHWC.
  l.convFiltersHWCF = tuning_.vectorBits > 0 && placement.modeFor("tosa.conv2d") != ops::OpMode::kKernel;
  l.convWinograd = l.convFiltersHWCF && placement.winogradOn();
  // Padded rows where generated code reads them (a kernel would read a
  // per-call copy of the slice).
  l.padFilterRows = l.convFiltersHWCF && placement.padRowsOn();
  l.panelStreamingFilters = l.convFiltersHWCF && placement.panelsOn();
  l.tuning = tuning_;
  l.padMatmulWeights = tuning_.vectorBits > 0 && placement.padRowsOn() &&
                       placement.modeFor("tosa.matmul") != ops::OpMode::kKernel;
  l.panelMatmulWeights = l.padMatmulWeights && placement.panelsOn();
  return l;
}

std::string HostTarget::entrySymbol() const { return lowering::kEntryName.str(); }

llvm::Expected<TargetObject> HostTarget::compile(lowering::Program &program, lowering::SpecializedFunction &cluster,
                                                lowering::StageTimes &times) {
  llvm::LLVMContext llvmContext;
  TargetObject out;
  lowering::Program::CodeFacts facts;
  auto llvmModule = program.lowerToLLVMIR(cluster, tuning_, llvmContext, times, options_.dumpIRDir, &facts,
                                          options_.dumpIRPasses);
  if (!llvmModule) return llvmModule.takeError();
  out.faultSites = std::move(facts.faultSites);
  out.scratchBytes = facts.scratchBytes;
  out.strategy = std::move(facts.strategy);
  // Each kernel's functions under its own name (in perf, GDB, crash traces):
  // kiln_entry -> kiln_entry.main.cluster3, kiln_fn* -> kiln.main.cluster3*.
  for (llvm::Function &f : **llvmModule) {
    if (f.isDeclaration()) continue;
    llvm::StringRef name = f.getName();
    if (name == entrySymbol()) {
      out.entry = entrySymbol() + "." + cluster.function;
      f.setName(out.entry);
    } else if (name.starts_with(lowering::kSpecializedFnName)) {
      f.setName("kiln." + cluster.function + name.drop_front(lowering::kSpecializedFnName.size()).str());
    }
  }
  if (!out.entry.empty() && (*llvmModule)->getFunction(out.entry)->getName() != out.entry)
    return error(ErrorCode::kInternal, "cannot name the entry of %s", cluster.function.c_str());
  // --dump-ir: the LLVM stages after the MLIR ones (<fn>.1-4.*.mlir), so
  // that the files sort in pipeline order.
  auto dump = [&](const char *stage, llvm::StringRef text) {
    // Best effort (a full disk skips it), never through a link at the name.
    llvm::consumeError(writeFileReplacing(options_.dumpIRDir + "/" + cluster.function + "." + stage, text));
  };
  codegen::ObjectDumps dumps;
  if (!options_.dumpIRDir.empty()) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    (*llvmModule)->print(os, nullptr);
    dump("5.llvm.ll", ir);
  }
  codegen::ObjectTimes objTimes;
  auto obj = codegen_->emitObject(**llvmModule, &objTimes, options_.dumpIRDir.empty() ? nullptr : &dumps);
  if (!obj) return obj.takeError();
  if (!options_.dumpIRDir.empty()) {
    dump("6.llvm-opt.ll", dumps.optimizedIR);
    dump("7.asm.s", dumps.assembly);
  }
  times.push_back({"llvm-opt", objTimes.optimizeMs});
  times.push_back({"llvm-codegen", objTimes.emitMs});
  out.bytes = std::move(*obj);
  return std::move(out);
}

llvm::Expected<std::shared_ptr<LoadedCode>> HostTarget::load(llvm::ArrayRef<char> object, llvm::StringRef name) {
  auto loaded = engine_->load(object, name);
  if (!loaded) return loaded.takeError();
  return std::make_shared<HostCode>(std::move(*loaded));
}

llvm::Expected<Launch> HostTarget::launch(std::shared_ptr<LoadedCode> code, llvm::StringRef symbol,
                                          std::vector<std::string> faultSites) {
  auto entry = code->lookup(symbol);
  if (!entry) return entry.takeError();
  auto fn = reinterpret_cast<void (*)(void **)>(*entry);
  Launch l;
  l.direct = fn;
  // The step keeps its code loaded while any execution may still run it.
  l.fn = [fn, code = std::move(code), sites = std::move(faultSites)](const StepContext &ctx) -> llvm::Error {
    llvm::SmallVector<void *, 16> buffers;
    for (unsigned i = 0; i < ctx.numInputs(); ++i) buffers.push_back(ctx.in(i));
    for (unsigned i = 0; i < ctx.numOutputs(); ++i) buffers.push_back(ctx.out(i));
    takeFault();
    const CancellationToken *cancel = ctx.cancellation();
    {
      HostExecutor::ParallelScope scope(ctx.executor());  // parallel tiles on this runtime's arena
      CancelScope cancelScope(cancel);                    // loops of unknown length can stop
      ScratchScope scratch(ctx.scratch(), ctx.scratchBytes());  // its temporaries in the planned buffer
      fn(buffers.data());
    }
    if (auto err = faultError(takeFault(), sites)) return err;
    // A loop may have left early: the step's outputs are not its results.
    if (cancel && cancel->cancelled())
      return error(ErrorCode::kCancelled, "execution %s while it ran",
                   cancel->deadlineExceeded() ? "stopped: deadline exceeded" : "cancelled");
    return llvm::Error::success();
  };
  return l;
}

llvm::Error faultError(int64_t fault, llvm::ArrayRef<std::string> sites) {
  if (!fault) return llvm::Error::success();
  size_t site = size_t(fault - 1);
  return error(ErrorCode::kInvalidArgument, "%s",
               site < sites.size() ? sites[site].c_str() : "generated code reported a fault");
}

}  // namespace kiln::jit
