// Target: where JIT-compiled code runs. The compile service partitions a
// function into steps; each JIT step (an outlined cluster) is compiled and
// launched by a target. The host CPU is the first target (HostTarget.h); a
// GPU target implements the same interface beside it: its pipeline stages,
// its code generation, its loader and the step it launches.
//
//   compile(cluster) -> object bytes  (stored in the plan's object list and
//                                      in the disk cache)
//   load(object)     -> LoadedCode    (linked and ready)
//   launch(code, symbol) -> a step    (what an Executable runs)
//
// Thread-safety: a Target is shared by every module of a runtime; all of
// its methods may be called concurrently.
#pragma once

#include "lowering/graph/Program.h"
#include "runtime/Executable.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace kiln::jit {

/// An object loaded by a target; keeps its code alive while referenced.
class LoadedCode {
public:
  virtual ~LoadedCode();
  /// Address (host) or handle (device) of a symbol the object defines.
  virtual llvm::Expected<void *> lookup(llvm::StringRef symbol) const = 0;
};

/// What compile() produces for one cluster.
struct TargetObject {
  llvm::SmallVector<char, 0> bytes;     // the object (ELF for the host)
  std::string entry;                    // the entry symbol it exports ("" = Target::entrySymbol())
  std::vector<std::string> faultSites;  // what each fault the code may report means
  int64_t scratchBytes = 0;             // scratch memory per run (the step plans it; kiln-scratch-buffers)
  std::string strategy;                 // how the code computes its ops, for profiles ("" = not said)
};

/// What a JIT step launches.
struct Launch {
  StepFn fn;
  /// Host code only: the entry itself, `void entry(void **buffers)` over
  /// the step's inputs then outputs, callable inline (eager dispatch).
  void (*direct)(void **buffers) = nullptr;
};

class Target {
public:
  virtual ~Target();
  /// Short name that plan steps record ("host-cpu").
  virtual llvm::StringRef name() const = 0;
  /// What generated code targets, for cache keys and users
  /// ("x86_64-pc-linux-gnu znver5 +avx2,...").
  virtual std::string description() const = 0;
  /// Identifies the pipeline and its options (hashed into cache keys).
  virtual std::string pipelineText() const = 0;
  virtual StepKind stepKind() const = 0;
  /// Most anchor ops (convs, matmuls, pooling) per JIT cluster: 1 on the
  /// host (each kernel compiles on its own, in parallel), 0 (no limit) on a
  /// device, where one cluster keeps its intermediates in device memory.
  virtual int64_t anchorsPerCluster() const { return 1; }
  /// The layouts this target wants weights stored in, given the per-op
  /// placement (hoisting packs them once; see lowering::WeightLayouts).
  virtual lowering::WeightLayouts weightLayouts(const ops::PlacementOptions &) const { return {}; }

  /// Lowers one outlined cluster (consuming its MLIR) and generates code.
  /// `times` receives a line per stage.
  virtual llvm::Expected<TargetObject>
  compile(lowering::Program &program, lowering::SpecializedFunction &cluster, lowering::StageTimes &times) = 0;
  /// The symbol compile() exports for the cluster.
  virtual std::string entrySymbol() const = 0;
  /// Loads an object made by compile() (now, or in another process).
  virtual llvm::Expected<std::shared_ptr<LoadedCode>> load(llvm::ArrayRef<char> object,
                                                           llvm::StringRef name) = 0;
  /// The step that runs `symbol` of `code`; a fault the code reports
  /// becomes an error with the message of its site.
  virtual llvm::Expected<Launch> launch(std::shared_ptr<LoadedCode> code, llvm::StringRef symbol,
                                        std::vector<std::string> faultSites) = 0;
};

}  // namespace kiln::jit
