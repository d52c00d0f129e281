// Host CPU code generation: LLVM IR -> optimized object file for this
// machine's CPU and features (never a generic x86-64: that halves vector
// width). Knows nothing about ops or graphs.
//
// Thread-safety: HostCodegen is immutable after creation and may be used from
// several threads; each emitObject call builds its own TargetMachine.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

struct TargetDescription {
  std::string triple;    // e.g. x86_64-pc-linux-gnu
  std::string cpu;       // e.g. znver5
  std::string features;  // "+avx512f,+fma,..." (sorted, for cache keys)
};

struct CodegenOptions {
  int optLevel = 3;  // 0..3: the LLVM middle-end pipeline and backend level
  /// Widest vector registers code may use (0 = the host's; 256 or 128 on an
  /// AVX-512 host turn AVX-512 off).
  int maxVectorBits = 0;
};

struct ObjectTimes {
  double optimizeMs = 0;
  double emitMs = 0;
};

/// Text forms of a compile, for IR dumps.
struct ObjectDumps {
  std::string optimizedIR;  // the module after LLVM's optimization pipeline
  std::string assembly;     // the code generated for it
};

class HostCodegen {
public:
  static llvm::Expected<std::unique_ptr<HostCodegen>> create(CodegenOptions options = {});
  const TargetDescription &target() const { return target_; }
  /// Optimizes `module` in place for the host and returns an ELF object.
  /// With `dumps`, also the optimized IR and the assembly (for --dump-ir).
  llvm::Expected<llvm::SmallVector<char, 0>> emitObject(llvm::Module &module, ObjectTimes *times = nullptr,
                                                        ObjectDumps *dumps = nullptr) const;

  /// A target machine for this host at the options' backend level.
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> makeTargetMachine() const;

private:
  HostCodegen() = default;
  TargetDescription target_;
  CodegenOptions options_;
};

}  // namespace kiln::codegen
