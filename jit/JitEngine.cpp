#include "jit/JitEngine.h"
#include "jit/RuntimeSymbols.h"

#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

namespace kiln::jit {

llvm::Expected<std::shared_ptr<JitEngine>> JitEngine::create(bool debugSymbols) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::shared_ptr<JitEngine> engine(new JitEngine());
  llvm::orc::LLJITBuilder builder;
  if (debugSymbols)
    builder.setObjectLinkingLayerCreator(
        [](llvm::orc::ExecutionSession &es) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
          auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
              es, [](const llvm::MemoryBuffer &) { return std::make_unique<llvm::SectionMemoryManager>(); });
          // Process-wide listeners (LLVM's own singletons): one jitdump file
          // per process, GDB's __jit_debug_descriptor.
          if (llvm::JITEventListener *perf = llvm::JITEventListener::createPerfJITEventListener())
            layer->registerJITEventListener(*perf);
          if (llvm::JITEventListener *gdb = llvm::JITEventListener::createGDBRegistrationListener())
            layer->registerJITEventListener(*gdb);
          return std::move(layer);
        });
  auto jit = builder.create();
  if (!jit) return jit.takeError();
  engine->jit_ = std::move(*jit);
  auto &es = engine->jit_->getExecutionSession();
  auto rt = engine->jit_->createJITDylib("kiln.runtime");
  if (!rt) return rt.takeError();
  engine->runtimeDylib_ = &*rt;
  llvm::orc::SymbolMap symbols;
  for (auto &[name, addr] : runtimeSymbols())
    symbols[es.intern(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                                llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (auto err = rt->define(llvm::orc::absoluteSymbols(std::move(symbols)))) return std::move(err);
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      engine->jit_->getDataLayout().getGlobalPrefix());
  if (!process) return process.takeError();
  rt->addGenerator(std::move(*process));
  return std::move(engine);
}

JitEngine::~JitEngine() = default;

llvm::Expected<std::unique_ptr<LoadedObject>> JitEngine::load(llvm::ArrayRef<char> object,
                                                              llvm::StringRef name) {
  std::string jdName = (name + "#" + llvm::Twine(counter_++)).str();
  auto jd = jit_->createJITDylib(jdName);
  if (!jd) return jd.takeError();
  // kiln's runtime symbols first: they must win over the process's own
  // (malloc, kiln_parallel_for), whatever LLJIT links new dylibs against.
  llvm::orc::JITDylibSearchOrder order = {
      {&*jd, llvm::orc::JITDylibLookupFlags::MatchAllSymbols},
      {runtimeDylib_, llvm::orc::JITDylibLookupFlags::MatchExportedSymbolsOnly}};
  jd->withLinkOrderDo([&](const llvm::orc::JITDylibSearchOrder &current) {
    for (const auto &entry : current)
      if (entry.first != &*jd && entry.first != runtimeDylib_) order.push_back(entry);
  });
  jd->setLinkOrder(std::move(order), /*LinkAgainstThisJITDylibFirst=*/false);
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(object.data(), object.size()), jdName);
  if (auto err = jit_->addObjectFile(*jd, std::move(buffer))) {
    (void)jit_->getExecutionSession().removeJITDylib(*jd);
    return std::move(err);
  }
  return std::unique_ptr<LoadedObject>(new LoadedObject(shared_from_this(), *jd));
}

llvm::Expected<void *> LoadedObject::lookup(llvm::StringRef symbol) const {
  auto addr = engine_->jit_->lookup(jd_, symbol);
  if (!addr) return addr.takeError();
  return addr->toPtr<void *>();
}

LoadedObject::~LoadedObject() {
  if (auto err = engine_->jit_->getExecutionSession().removeJITDylib(jd_))
    llvm::consumeError(std::move(err));
}

}  // namespace kiln::jit
