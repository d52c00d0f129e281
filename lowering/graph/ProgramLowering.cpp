// A program's functions on their way to a target: specialized to the
// shapes of a call, identified by their canonical graph (cache keys), and a
// cluster lowered through the pipeline stages to LLVM IR (host) or to the
// GPU's device module and launch plan, with IR dumps after every stage.
#include "lowering/graph/Program.h"
#include "runtime/FileIO.h"
#include "runtime/Error.h"
#include "lowering/graph/ProgramImpl.h"
#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"


#include <cstring>
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

using namespace mlir;

namespace kiln::lowering {

llvm::Expected<std::unique_ptr<SpecializedFunction>>
Program::specialize(llvm::StringRef function, llvm::ArrayRef<TensorType> inputs, StageTimes &times,
                    const WeightLayouts &layouts) {
  const FunctionSignature *sig = lookup(function);
  if (!sig) return noSuchFunction(function, impl->functions);
  if (auto err = checkInputs(*sig, inputs)) return std::move(err);

  std::lock_guard<std::shared_mutex> lock(impl->mu);
  auto t0 = Clock::now();
  auto out = std::make_unique<SpecializedFunction>();
  out->impl = std::make_unique<SpecializedFunction::Impl>();
  out->function = function.str();
  out->inputTypes.assign(inputs.begin(), inputs.end());
  // Plain layouts (a kernel plan's) hoist the weights as the cache key's
  // graph did just before: its module is taken, not made again (RegNetY-
  // 400MF: ~2 ms of a first call's specialization).
  OwningOpRef<ModuleOp> taken;
  if (auto it = impl->hoistedPlain.find(function); it != impl->hoistedPlain.end()) {
    taken = std::move(it->second);
    impl->hoistedPlain.erase(it);
  }
  ++impl->pipelineRuns;
  if (taken && layouts.plain()) {
    out->impl->module = std::move(taken);
  } else {
    out->impl->module = impl->module->clone();
    // Weights first, on the original graph: the same plan finds them again
    // without compiling (Program::weights), so cached code can be reused.
    if (auto err = impl->diagnose(ErrorCode::kInvalidArgument, "cannot hoist the weights of @" + function.str(),
                                  [&] { return hoistConstants(*out->impl->module, kDefaultHoistMinElements, layouts); }))
      return std::move(err);
  }
  ModuleOp module = *out->impl->module;
  auto hoisted = module.lookupSymbol<func::FuncOp>(function);
  std::string shapes;
  for (unsigned i = 0; i < hoisted.getNumArguments(); ++i) {
    auto argType = cast<RankedTensorType>(hoisted.getArgumentTypes()[i]);
    std::string dims = i < inputs.size() ? shapeToString(inputs[i].shape)
                                         : shapeToString(argType.getShape());
    shapes += (i ? "," : "") + dims + (dims.empty() ? "" : "x") + typeString(argType.getElementType());
  }
  KilnSpecializeShapesOptions opts;
  opts.function = function.str();
  opts.shapes = shapes;
  if (auto err = impl->diagnose(ErrorCode::kInvalidArgument,
          "cannot specialize @" + function.str() + " to (" + shapes + ")", [&] {
            // Not verified after each of the pass's nested passes
            // (inliner, shape inference, canonicalize, CSE, the raise):
            // ~3 ms each on BERT-base, whose every new sequence length
            // specializes before its call can run (specialize 33-40 -> 24
            // ms). The pass verifies once shapes are inferred; here once
            // at the end, before anything lowers it.
            PassManager pm(impl->ctx.get());
            pm.enableVerifier(false);
            pm.addPass(createKilnSpecializeShapes(opts));
            if (failed(pm.run(module))) return failure();
            return verify(module);
          }))
    return std::move(err);

  auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
  for (unsigned i = inputs.size(); i < fn.getNumArguments(); ++i) {
    auto value = fn.getArgAttrOfType<ElementsAttr>(i, kWeightAttrName);
    std::string why;
    auto type = toTensorType(fn.getArgumentTypes()[i], why);
    if (!value || !type)
      return error(ErrorCode::kInvalidArgument, "@%s: weight argument %u is malformed: %s",
                                     function.str().c_str(), i, why.c_str());
    auto tensor = impl->weightTensor(value, *type);
    if (!tensor)
      return error(ErrorCode::kInvalidArgument, "@%s: weight at %s: %s", function.str().c_str(),
                                     locationString(fn.getArgument(i).getLoc()).c_str(),
                                     llvm::toString(tensor.takeError()).c_str());
    out->weights.push_back(*tensor);
    fn.removeArgAttr(i, kWeightAttrName);
  }
  for (Type r : fn.getResultTypes()) {
    std::string why;
    auto type = toTensorType(r, why);
    if (!type)
      return error(ErrorCode::kInvalidArgument, "@%s: result %s", function.str().c_str(), why.c_str());
    out->resultTypes.push_back(*type);
  }
  times.push_back({"specialize", msSince(t0)});
  return std::move(out);
}

uint64_t Program::pipelineRuns() const {
  return impl->pipelineRuns.load();
}

llvm::Expected<std::string> Program::canonicalGraph(llvm::StringRef function) {
  std::lock_guard<std::shared_mutex> lock(impl->mu);
  if (auto it = impl->canonicalGraphs.find(function); it != impl->canonicalGraphs.end()) return it->second;
  if (!impl->module->lookupSymbol<func::FuncOp>(function))
    return error(ErrorCode::kInvalidArgument, "no public function @%s in the module", function.str().c_str());
  // The graph as kiln compiles it: weights hoisted to (attribute-free)
  // arguments, so their values are not part of it; everything compiled into
  // code (small constants, attributes, callees) is.
  OwningOpRef<ModuleOp> clone = impl->module->clone();
  if (failed(hoistConstants(*clone, kDefaultHoistMinElements)))
    return error(ErrorCode::kInvalidArgument, "@%s: cannot hoist weights", function.str().c_str());
  llvm::SetVector<func::FuncOp> funcs;
  funcs.insert(clone->lookupSymbol<func::FuncOp>(function));
  for (size_t i = 0; i < funcs.size(); ++i) {
    func::FuncOp f = funcs[i];
    f.walk([&](func::CallOp call) {
      if (auto callee = clone->lookupSymbol<func::FuncOp>(call.getCallee())) funcs.insert(callee);
    });
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  for (func::FuncOp f : funcs) {
    // Printed without the weights' values (the kiln.weight marks), which
    // are put back for the specialization that takes this clone.
    llvm::SmallVector<std::pair<unsigned, Attribute>> marks;
    for (unsigned a = 0; a < f.getNumArguments(); ++a)
      if (Attribute w = f.getArgAttr(a, kWeightAttrName)) {
        marks.push_back({a, w});
        f.removeArgAttr(a, kWeightAttrName);
      }
    f->print(os, OpPrintingFlags().printGenericOpForm());
    os << "\n";
    // Blobs left in the code (callees, small constants) print as their key
    // only: their bytes are part of the graph too.
    f.walk([&](Operation *op) {
      auto visit = [&](DenseResourceElementsAttr r) {
        AsmResourceBlob *blob = r.getRawHandle().getBlob();
        os << "blob " << r.getRawHandle().getKey() << " = ";
        if (blob) os << llvm::format_hex(llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
                                             reinterpret_cast<const uint8_t *>(blob->getData().data()),
                                             blob->getData().size())), 18);
        else os << "<missing>";
        os << "\n";
      };
      if (Attribute props = op->getPropertiesAsAttribute()) props.walk(visit);
      op->getAttrDictionary().walk(visit);
    });
    // (After the walk too: the marks hold the weights' blobs.)
    for (auto [a, w] : marks) f.setArgAttr(a, kWeightAttrName, w);
  }
  impl->canonicalGraphs[function] = text;
  impl->hoistedPlain[function] = std::move(clone);
  return text;
}

namespace {
/// IR dumps are for reading: one that cannot be written (a full disk) is
/// skipped, and never written through a link at its name.
void dumpFile(const std::string &path, llvm::StringRef text) { llvm::consumeError(writeFileReplacing(path, text)); }
std::string printed(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// --dump-ir-passes: MLIR's IR-printing instrumentation writes the module
/// after every pass that changed it, as DIR/NN.<pass>.mlir.
class PassDumps : public PassManager::IRPrinterConfig {
public:
  explicit PassDumps(std::string dir)
      : IRPrinterConfig(/*printModuleScope=*/true, /*printAfterOnlyOnChange=*/true), dir_(std::move(dir)) {}
  void printAfterIfEnabled(Pass *pass, Operation *, PrintCallbackFn print) override {
    char number[16];
    std::snprintf(number, sizeof number, "%02d", ++count_);
    std::string text;
    llvm::raw_string_ostream os(text);
    print(os);
    dumpFile(dir_ + "/" + number + "." + pass->getArgument().str() + ".mlir", text);
  }

private:
  std::string dir_;
  int count_ = 0;
};
}  // namespace

llvm::Error Program::Impl::runStages(ModuleOp module, llvm::StringRef fn, const std::vector<PipelineStage> &stages,
                                    StageTimes &times, llvm::StringRef dumpDir, bool dumpEveryPass) {
  int stageIndex = 0;
  if (!dumpDir.empty()) {  // what the pipeline starts from
    dumpFile((llvm::Twine(dumpDir) + "/" + fn + ".0.input.mlir").str(), printed(module));
  }
  for (const PipelineStage &stage : stages) {
    auto t0 = Clock::now();
    std::string passDir;
    if (!dumpDir.empty() && dumpEveryPass) {
      passDir = (llvm::Twine(dumpDir) + "/" + fn + "." + llvm::Twine(stageIndex + 1) + "." + stage.name + ".passes")
                    .str();
      llvm::sys::fs::create_directories(passDir);
    }
    if (auto err = diagnose(ErrorCode::kCompileFailed, "@" + fn.str() + ": lowering stage " + stage.name + " failed",
                            [&] {
                              PassManager pm(ctx.get());
                              if (failed(parsePassPipeline(stripAnchor(stage.pipeline), pm))) return failure();
                              if (!passDir.empty()) pm.enableIRPrinting(std::make_unique<PassDumps>(passDir));
                              return pm.run(module);
                            }))
      return err;
    times.push_back({stage.name, msSince(t0)});
    if (!dumpDir.empty()) {
      std::string path = (llvm::Twine(dumpDir) + "/" + fn.str() + "." +
                          llvm::Twine(++stageIndex) + "." + stage.name + ".mlir").str();
      dumpFile(path, printed(module));
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::Module>>
Program::lowerToLLVMIR(SpecializedFunction &fn, const CpuTuning &tuning, llvm::LLVMContext &llvmContext,
                       StageTimes &times, llvm::StringRef dumpDir, CodeFacts *facts, bool dumpEveryPass) {
  Impl::LoweringLock lock(*impl, impl->cpuPrimed);
  ++impl->pipelineRuns;
  auto unlowered = Impl::unloweredModule(fn);
  if (!unlowered) return unlowered.takeError();
  ModuleOp module = *unlowered;
  if (auto err = impl->runStages(module, fn.function, cpuPipelineStages(tuning), times, dumpDir, dumpEveryPass))
    return std::move(err);
  if (facts) {
    if (auto sites = module->getAttrOfType<ArrayAttr>(kFaultSitesAttr))
      for (Attribute a : sites) facts->faultSites.push_back(cast<StringAttr>(a).str());
    if (auto bytes = module->getAttrOfType<IntegerAttr>(kScratchBytesAttr)) facts->scratchBytes = bytes.getInt();
    if (auto text = module->getAttrOfType<StringAttr>(kStrategyAttr)) facts->strategy = text.str();
  }
  auto t0 = Clock::now();
  std::unique_ptr<llvm::Module> llvmModule;
  if (auto err = impl->diagnose(ErrorCode::kCompileFailed, "@" + fn.function + ": translation to LLVM IR failed", [&] {
        llvmModule = translateModuleToLLVMIR(module, llvmContext, "kiln." + fn.function);
        return success(bool(llvmModule));
      }))
    return std::move(err);
  times.push_back({"translate", msSince(t0)});
  fn.impl->module = nullptr;
  lock.succeeded();
  return std::move(llvmModule);
}

llvm::Expected<Program::GpuLowered> Program::lowerToGpu(SpecializedFunction &fn, const CpuTuning &cpu,
                                                        const GpuTuning &gpuTuning, llvm::LLVMContext &llvmContext,
                                                        StageTimes &times, llvm::StringRef dumpDir,
                                                        bool dumpEveryPass) {
  Impl::LoweringLock lock(*impl, impl->gpuPrimed);
  ++impl->pipelineRuns;
  auto unlowered = Impl::unloweredModule(fn);
  if (!unlowered) return unlowered.takeError();
  ModuleOp module = *unlowered;
  if (auto err =
          impl->runStages(module, fn.function, gpuPipelineStages(cpu, gpuTuning), times, dumpDir, dumpEveryPass))
    return std::move(err);
  DiagnoseFn diagnose = [&](ErrorCode code, llvm::StringRef what, std::function<LogicalResult()> body) {
    return impl->diagnose(code, what, body);
  };
  auto lowered = readGpuLowering(module, fn.function, llvmContext, diagnose, times);
  if (!lowered) return lowered.takeError();
  fn.impl->module = nullptr;
  lock.succeeded();
  return std::move(*lowered);
}

}  // namespace kiln::lowering
