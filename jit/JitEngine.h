// JitEngine: an ORC LLJIT that loads kiln's object files.
//
// Each loaded object gets its own JITDylib (so every object can define
// `kiln_entry`), linked against the engine's runtime dylib, which holds the
// symbols kiln exports to generated code (RuntimeSymbols.cpp) and falls back
// to the process's symbols (libc, libm).
//
// With debug symbols on, perf and GDB see every kernel's functions by name.
//
// Thread-safety: JitEngine is thread-safe (ORC's ExecutionSession locks).
// A LoadedObject keeps its engine alive; destroying it unloads the code.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <memory>

namespace llvm::orc {
class LLJIT;
class JITDylib;
}  // namespace llvm::orc

namespace kiln::jit {

class JitEngine;

class LoadedObject {
public:
  ~LoadedObject();
  /// Address of a symbol defined by the object.
  llvm::Expected<void *> lookup(llvm::StringRef symbol) const;

private:
  friend class JitEngine;
  LoadedObject(std::shared_ptr<JitEngine> engine, llvm::orc::JITDylib &jd)
      : engine_(std::move(engine)), jd_(jd) {}
  std::shared_ptr<JitEngine> engine_;
  llvm::orc::JITDylib &jd_;
};

class JitEngine : public std::enable_shared_from_this<JitEngine> {
public:
  /// With `debugSymbols`, objects are linked by RuntimeDyld with LLVM's perf
  /// (jitdump: $JITDUMPDIR, else $HOME) and GDB JIT event listeners; without,
  /// by LLJIT's default linker.
  static llvm::Expected<std::shared_ptr<JitEngine>> create(bool debugSymbols = false);
  ~JitEngine();
  /// Links an ELF object (copied) into a fresh JITDylib named after `name`.
  llvm::Expected<std::unique_ptr<LoadedObject>> load(llvm::ArrayRef<char> object,
                                                     llvm::StringRef name);

private:
  friend class LoadedObject;
  JitEngine() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  llvm::orc::JITDylib *runtimeDylib_ = nullptr;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace kiln::jit
