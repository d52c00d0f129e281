#include "codegen/HostCodegen.h"

#include "llvm/Transforms/Utils/Cloning.h"
#include "codegen/LLVMPasses.h"
#include "runtime/Error.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

namespace kiln::codegen {
namespace {
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

llvm::Expected<std::unique_ptr<HostCodegen>> HostCodegen::create(CodegenOptions options) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    boundSchedulingTime();
  });
  if (options.optLevel < 0 || options.optLevel > 3)
    return error(ErrorCode::kCompileFailed, "optimization level %d is not in 0..3", options.optLevel);
  std::unique_ptr<HostCodegen> cg(new HostCodegen());
  cg->options_ = options;
  cg->target_.triple = llvm::sys::getProcessTriple();
  cg->target_.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> feats;
  for (auto &f : llvm::sys::getHostCPUFeatures())
    feats.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(feats.begin(), feats.end());
  if (options.maxVectorBits > 0 && options.maxVectorBits < 512) {
    // Dropping avx512f drops every AVX-512 extension with it.
    llvm::erase_if(feats, [](const std::string &f) { return llvm::StringRef(f).starts_with("+avx512"); });
    feats.push_back("-avx512f");
    if (options.maxVectorBits < 256) {
      llvm::erase_if(feats, [](const std::string &f) { return f == "+avx" || f == "+avx2" || f == "+fma"; });
      feats.push_back("-avx");
    }
    std::sort(feats.begin(), feats.end());
  }
  for (const std::string &f : feats)
    cg->target_.features += (cg->target_.features.empty() ? "" : ",") + f;
  if (auto tm = cg->makeTargetMachine(); !tm) return tm.takeError();
  return std::move(cg);
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>> HostCodegen::makeTargetMachine() const {
  llvm::Triple triple(target_.triple);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return kiln::error(ErrorCode::kCompileFailed, "no LLVM target for host triple %s: %s",
                                   target_.triple.c_str(), error.c_str());
  llvm::TargetOptions to;
  auto level = backendLevel(options_.optLevel);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, target_.cpu, target_.features, to, llvm::Reloc::PIC_, std::nullopt, level));
  if (!tm) return kiln::error(ErrorCode::kCompileFailed, "cannot create a target machine for %s (%s)",
                                          target_.triple.c_str(), target_.cpu.c_str());
  return std::move(tm);
}

llvm::Expected<llvm::SmallVector<char, 0>> HostCodegen::emitObject(llvm::Module &module, ObjectTimes *times,
                                                                   ObjectDumps *dumps) const {
  auto tmOr = makeTargetMachine();
  if (!tmOr) return tmOr.takeError();
  llvm::TargetMachine &tm = **tmOr;
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple());
  for (llvm::Function &f : module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", target_.cpu);
    f.addFnAttr("target-features", target_.features);
  }
  if (auto err = verifyIR(module, "lowering")) return std::move(err);

  auto t0 = Clock::now();
  // Without LLVM's loop vectorizer: kiln-cpu-strategy writes the vectors
  // itself, and what the vectorizer took on (the scalar loops left over)
  // cost compile time and bought nothing measurable. Over the zoo (2-vCPU
  // Xeon with AMX, `kiln run` of each model, three alternating runs):
  // ShuffleNetV2's cold first call 2.8-2.9 -> 1.9 s (LLVM codegen 1.9 ->
  // 0.75 s summed), ViT-B/16's codegen 0.69 -> 0.55 s, the other models'
  // compiles and every model's steady calls within the noise.
  optimizeIR(module, tm, options_.optLevel, /*loopVectorize=*/false);
  if (times) times->optimizeMs = msSince(t0);
  if (dumps) {
    llvm::raw_string_ostream ir(dumps->optimizedIR);
    module.print(ir, nullptr);
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
    if (auto text = emitCode(*copy, tm, llvm::CodeGenFileType::AssemblyFile, "assembly"))
      dumps->assembly.assign(text->begin(), text->end());
    else
      llvm::consumeError(text.takeError());  // a dump only
  }

  t0 = Clock::now();
  auto object = emitCode(module, tm, llvm::CodeGenFileType::ObjectFile, "object files");
  if (times) times->emitMs = msSince(t0);
  return object;
}

}  // namespace kiln::codegen
