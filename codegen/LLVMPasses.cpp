#include "codegen/LLVMPasses.h"
#include "runtime/Error.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

llvm::CodeGenOptLevel backendLevel(int optLevel) {
  return optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
         : optLevel == 2 ? llvm::CodeGenOptLevel::Default
         : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                         : llvm::CodeGenOptLevel::None;
}

std::string boundSchedulingTime() {
  static const std::string settings = [] {
    std::string applied;
    auto &options = llvm::cl::getRegisteredOptions();
    for (auto [name, value] : {std::pair<const char *, const char *>{"post-RA-scheduler", "false"},
                               {"dag-maps-huge-region", "200"}}) {
      auto it = options.find(name);
      if (it == options.end()) continue;  // not in this LLVM: nothing to bound
      llvm::cl::Option *o = it->second;
      std::string setting = std::string(name) + "=";
      if (o->getNumOccurrences() > 0) setting += "(LLVM command line)";
      else if (!o->addOccurrence(0, name, value)) setting += value;
      else continue;  // the value was rejected: LLVM's default stays
      applied += (applied.empty() ? "" : " ") + setting;
    }
    return applied;
  }();
  return settings;
}

llvm::Error verifyIR(llvm::Module &module, const char *what) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  if (llvm::verifyModule(module, &os)) return error(ErrorCode::kCompileFailed, "invalid LLVM IR from %s: %s", what, msg.c_str());
  return llvm::Error::success();
}

void optimizeIR(llvm::Module &module, llvm::TargetMachine &tm, int optLevel, bool loopVectorize) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = loopVectorize;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = optLevel >= 3   ? llvm::OptimizationLevel::O3
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                  : optLevel == 1 ? llvm::OptimizationLevel::O1
                                                  : llvm::OptimizationLevel::O0;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0 ? pb.buildO0DefaultPipeline(level)
                                                                     : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

llvm::Expected<llvm::SmallVector<char, 0>> emitCode(llvm::Module &module, llvm::TargetMachine &tm,
                                                   llvm::CodeGenFileType type, const char *what) {
  llvm::SmallVector<char, 0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    return error(ErrorCode::kCompileFailed, "target %s cannot emit %s", tm.getTargetTriple().str().c_str(), what);
  pm.run(module);
  return std::move(out);
}

}  // namespace kiln::codegen
