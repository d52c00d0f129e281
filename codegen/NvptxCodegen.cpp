#include "codegen/NvptxCodegen.h"
#include "codegen/LLVMPasses.h"
#include "runtime/Error.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <chrono>
#include <mutex>

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace kiln::codegen {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr const char *kTriple = "nvptx64-nvidia-cuda";

/// Removes a temporary file when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty()) llvm::sys::fs::remove(path);
  }
};

}  // namespace

llvm::Expected<std::unique_ptr<NvptxCodegen>> NvptxCodegen::create(NvptxOptions options) {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  if (options.optLevel < 0 || options.optLevel > 3)
    return error(ErrorCode::kInvalidArgument, "optimization level %d is not in 0..3", options.optLevel);
  std::unique_ptr<NvptxCodegen> cg(new NvptxCodegen());
  cg->options_ = std::move(options);
  auto tm = cg->makeTargetMachine();
  if (!tm) return tm.takeError();
  if (!(*tm)->getMCSubtargetInfo()->isCPUStringValid(cg->options_.chip))
    return error(ErrorCode::kUnsupported, "GPU architecture '%s' is not one LLVM's NVPTX backend knows (e.g. sm_90)",
                 cg->options_.chip.c_str());
  if (!cg->options_.cudaPath.empty()) {
    llvm::SmallString<128> p(cg->options_.cudaPath);
    llvm::sys::path::append(p, "nvvm", "libdevice", "libdevice.10.bc");
    if (llvm::sys::fs::exists(p)) cg->libdevice_ = std::string(p);
    if (cg->options_.cubin) {
      llvm::SmallString<128> bin(cg->options_.cudaPath);
      llvm::sys::path::append(bin, "bin", "ptxas");
      if (llvm::sys::fs::can_execute(bin)) {
        cg->ptxas_ = std::string(bin);
      } else if (auto found = llvm::sys::findProgramByName("ptxas")) {
        cg->ptxas_ = *found;
      }
    }
  }
  if (!cg->ptxas_.empty()) {
    // Its version is part of cache keys: another ptxas makes other cubins.
    TempFile out;
    int fd;
    if (!llvm::sys::fs::createTemporaryFile("kiln-ptxas", "txt", fd, out.path)) {
      llvm::sys::Process::SafelyCloseFileDescriptor(fd);
      std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(out.path), std::nullopt};
      llvm::StringRef args[] = {cg->ptxas_, "--version"};
      if (llvm::sys::ExecuteAndWait(cg->ptxas_, args, std::nullopt, redirects, /*SecondsToWait=*/30) == 0)
        if (auto text = llvm::MemoryBuffer::getFile(out.path)) {
          llvm::StringRef s = (*text)->getBuffer();
          size_t at = s.find("release ");
          if (at != llvm::StringRef::npos) cg->ptxasVersion_ = s.substr(at + 8).split(',').first.str();
        }
    }
    if (cg->ptxasVersion_.empty()) cg->ptxasVersion_ = "unknown";
  }
  return std::move(cg);
}

std::string NvptxCodegen::description() const {
  std::string d = std::string(kTriple) + " " + options_.chip + " " + options_.features + " O" +
                  std::to_string(options_.optLevel);
  d += libdevice_.empty() ? " no-libdevice" : " libdevice";
  if (!ptxas_.empty()) d += " ptxas " + ptxasVersion_;
  return d;
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>> NvptxCodegen::makeTargetMachine() const {
  llvm::Triple triple(kTriple);
  std::string why;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, why);
  if (!target)
    return error(ErrorCode::kUnsupported, "this LLVM has no NVPTX backend (%s)", why.c_str());
  auto level = backendLevel(options_.optLevel);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, options_.chip, options_.features, llvm::TargetOptions(), std::nullopt, std::nullopt, level));
  if (!tm) return error(ErrorCode::kCompileFailed, "cannot create an NVPTX target machine for %s",
                        options_.chip.c_str());
  return std::move(tm);
}

llvm::Expected<DeviceObject> NvptxCodegen::compile(llvm::Module &module, DeviceTimes *times,
                                                   ObjectDumps *dumps) const {
  auto tmOr = makeTargetMachine();
  if (!tmOr) return tmOr.takeError();
  llvm::TargetMachine &tm = **tmOr;
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple());
  if (auto err = verifyIR(module, "lowering for the GPU")) return std::move(err);
  // libdevice: the __nv_* math functions MLIR's NVVM lowering calls. Only
  // what is used is linked; it is then internal, so O3 inlines and drops it.
  auto t0 = Clock::now();
  bool needsLibdevice = false;
  for (llvm::Function &f : module)
    if (f.isDeclaration() && f.getName().starts_with("__nv_")) needsLibdevice = true;
  if (needsLibdevice) {
    if (libdevice_.empty())
      return error(ErrorCode::kUnavailable,
                   "GPU kernels call CUDA math functions, but libdevice was not found under '%s/nvvm/libdevice'",
                   options_.cudaPath.c_str());
    llvm::SMDiagnostic diag;
    std::unique_ptr<llvm::Module> lib = llvm::parseIRFile(libdevice_, diag, module.getContext());
    if (!lib) return error(ErrorCode::kIO, "cannot read %s: %s", libdevice_.c_str(), diag.getMessage().str().c_str());
    lib->setDataLayout(module.getDataLayout());
    lib->setTargetTriple(module.getTargetTriple());
    if (llvm::Linker::linkModules(module, std::move(lib), llvm::Linker::Flags::LinkOnlyNeeded,
                                  [](llvm::Module &m, const llvm::StringSet<> &gvs) {
                                    for (llvm::GlobalValue &gv : m.global_values())
                                      if (!gv.isDeclaration() && gvs.count(gv.getName()))
                                        gv.setLinkage(llvm::GlobalValue::InternalLinkage);
                                  }))
      return error(ErrorCode::kCompileFailed, "linking libdevice into the GPU kernels failed");
  }
  // __nvvm_reflect("__CUDA_FTZ") in libdevice: no flush-to-zero (IEEE, like the CPU).
  if (!module.getModuleFlag("nvvm-reflect-ftz"))
    module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
  if (times) times->linkMs = msSince(t0);

  t0 = Clock::now();
  optimizeIR(module, tm, options_.optLevel);
  if (times) times->optimizeMs = msSince(t0);
  if (dumps) {
    llvm::raw_string_ostream ir(dumps->optimizedIR);
    module.print(ir, nullptr);
  }

  t0 = Clock::now();
  DeviceObject out;
  auto ptx = emitCode(module, tm, llvm::CodeGenFileType::AssemblyFile, "PTX");
  if (!ptx) return ptx.takeError();
  out.ptx.assign(ptx->begin(), ptx->end());
  if (dumps) dumps->assembly = out.ptx;
  if (times) times->emitMs = msSince(t0);

  if (!ptxas_.empty()) {
    t0 = Clock::now();
    auto cubin = assemble(out.ptx);
    if (!cubin) return cubin.takeError();
    out.cubin = std::move(*cubin);
    if (times) times->assembleMs = msSince(t0);
  }
  return std::move(out);
}

llvm::Expected<std::vector<char>> NvptxCodegen::assemble(llvm::StringRef ptx) const {
  if (ptxas_.empty()) return error(ErrorCode::kUnavailable, "no ptxas: the CUDA toolkit was not found");
  TempFile in, out, log;
  int fd;
  if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-kernels", "ptx", fd, in.path))
    return error(ErrorCode::kIO, "cannot create a temporary PTX file: %s", ec.message().c_str());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
    os.close();
    if (os.has_error()) {  // a full temporary directory: an error, not LLVM's fatal handler
      std::string why = os.error().message();
      os.clear_error();
      return error(ErrorCode::kIO, "cannot write a temporary PTX file: %s", why.c_str());
    }
  }
  if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-kernels", "cubin", out.path))
    return error(ErrorCode::kIO, "cannot create a temporary file: %s", ec.message().c_str());
  if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-ptxas", "log", log.path))
    return error(ErrorCode::kIO, "cannot create a temporary file: %s", ec.message().c_str());
  std::string arch = "-arch=" + options_.chip;
  std::string opt = "-O" + std::to_string(options_.optLevel);
  llvm::StringRef args[] = {ptxas_, arch, opt, in.path, "-o", out.path};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log.path), llvm::StringRef(log.path)};
  std::string why;
  int rc = llvm::sys::ExecuteAndWait(ptxas_, args, std::nullopt, redirects, /*SecondsToWait=*/300, 0, &why);
  if (rc != 0) {
    std::string msg;
    if (auto text = llvm::MemoryBuffer::getFile(log.path)) msg = (*text)->getBuffer().trim().str();
    return error(ErrorCode::kCompileFailed, "ptxas %s failed (exit %d%s%s): %s", arch.c_str(), rc,
                 why.empty() ? "" : ", ", why.c_str(), msg.c_str());
  }
  auto bytes = llvm::MemoryBuffer::getFile(out.path, /*IsText=*/false);
  if (!bytes) return error(ErrorCode::kIO, "cannot read ptxas' output: %s", bytes.getError().message().c_str());
  return std::vector<char>((*bytes)->getBufferStart(), (*bytes)->getBufferEnd());
}

}  // namespace kiln::codegen
