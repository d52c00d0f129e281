// Placement and partitioning of a specialized function: each op runs as
// JIT-compiled code or as a handwritten kernel.
//
// Placement (per op name): mode jit | kernel | auto (default auto).
//   auto   -> JIT when MLIR lowers the op, else a kernel ("no lowering")
//   kernel -> a kernel when one accepts this use of the op (shape function
//             agrees with the specialized types), else JIT with the reason
//   jit    -> JIT when lowerable, else a kernel
// JIT-placed ops are grouped into clusters: connected groups of JIT ops,
// grown greedily in program order while the group graph stays acyclic.
// Each cluster is outlined into its own module (func @kiln_fn over the
// values it reads and writes) and compiled by the usual CPU pipeline; each
// kernel op becomes one step.
#pragma once

#include "kernels/KernelRegistry.h"
#include "lowering/Program.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kiln::lowering {

enum class OpMode { kAuto, kJit, kKernel };

struct PlacementOptions {
  /// Mode by op name ("tosa.conv2d"); the key "*" sets the default.
  std::map<std::string, OpMode> modes;
  /// Fault injection for tests: compiling a cluster that contains one of
  /// these ops fails, exercising the fallback to kernels.
  std::set<std::string> failClustersWith;

  OpMode modeFor(llvm::StringRef op) const;
  /// "tosa.conv2d=kernel,*=jit" (sorted): the cache key's op-mode part.
  std::string canonical() const;
  bool empty() const { return modes.empty() && failClustersWith.empty(); }
};

/// Parses "tosa.conv2d=kernel,tosa.gather=jit,*=auto" (also KILN_OP_MODE).
llvm::Expected<PlacementOptions> parseOpModes(llvm::StringRef spec);

struct PlanValue {
  enum Kind { kInput, kWeight, kConstant, kIntermediate } kind;
  TensorType type;
  int index = -1;   // input / weight position
  Tensor constant;  // kWeight, kConstant
};

struct PlanStep {
  enum Kind { kJit, kKernel } kind;
  std::vector<int> inputs, outputs;  // value ids
  std::string name;                  // "cluster0" / "tosa.gather"
  // kJit: the outlined cluster (kiln_fn(inputs...) -> outputs...) and its ops.
  std::unique_ptr<SpecializedFunction> cluster;
  std::vector<std::string> ops;
  // kKernel
  std::string op;  // registry key ("tosa.add", "tosa.custom:kiln.gelu")
  kernels::AttrMap attrs;
  std::string location;
  std::string reason;  // why a kernel: "mode=kernel", "no lowering", "JIT compile failed"
};

struct PlacementSummary {
  size_t ops = 0, jitOps = 0, clusters = 0, kernelOps = 0;
  /// (op, reason) -> count, for kernel-placed ops; and notes on ops kept on JIT.
  std::map<std::pair<std::string, std::string>, int> kernels;
  std::vector<std::string> notes;
  /// "12 ops: 10 JIT in 2 kernels, 2 handwritten (tosa.gather x2: mode=kernel)"
  std::string str() const;
};

struct PartitionedFunction {
  std::string function;
  std::vector<TensorType> inputTypes, resultTypes;
  std::vector<Tensor> weights;
  std::vector<PlanValue> values;
  std::vector<PlanStep> steps;  // in a topological order
  std::vector<int> results;     // value ids
  PlacementSummary summary;
};

/// True when MLIR 22's TOSA conversions lower `op` (by name).
bool tosaOpHasLowering(llvm::StringRef op);

}  // namespace kiln::lowering
