// Placement and partitioning of a specialized function: each op runs as
// JIT-compiled code or as a handwritten kernel, and the function becomes an
// execution plan. Two passes do the work (Passes.td, lit-tested through
// kiln-opt): kiln-place-ops records each op's placement, asking a
// KernelOracle (injected; lowering knows no kernel registry) which kernels
// take it; kiln-outline-clusters moves connected JIT ops into
// @kiln_cluster<N> functions. Program::partition runs both and reads the
// plan (lowering/graph/Plan.h) off the result; each cluster is then compiled by a
// target as its own module.
//
// Placement (per op name): mode jit | kernel | auto (default auto).
//   auto   -> JIT when MLIR lowers the op (the op table), else a kernel ("no lowering")
//   kernel -> a kernel when one accepts this use of the op (shape function
//             agrees with the specialized types), else JIT with a note
//   jit    -> JIT when lowerable, else a kernel
//
// Placement by measurement: with options.measuring(), an `auto` anchor op
// (conv, matmul, pooling) that a kernel also takes stays on JIT and is
// listed in its plan step's `alternatives`; the compiler times both and
// partitions again with the ops a kernel ran faster in `measuredKernels`
// (by opSignature), which places them on that kernel with the figures as
// the reason.
#pragma once

#include "lowering/graph/Plan.h"
#include "lowering/graph/Program.h"
#include "ops/Placement.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kiln::lowering {

using ops::OpMode;
using ops::PlacementOptions;

/// What the partitioner asks about handwritten kernels (injected by the
/// compile service; lowering knows no kernel registry).
class KernelOracle {
public:
  virtual ~KernelOracle();
  /// The name of the kernel that runs `op` with these operand types and
  /// attributes, producing `results`; an error saying why none does.
  virtual llvm::Expected<std::string> kernelFor(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs,
                                                const ops::AttrMap &attrs,
                                                llvm::ArrayRef<TensorType> results) const = 0;
};

/// One use of an op as placement by measurement tells uses apart: its key,
/// operand and result types and attributes ("tosa.conv2d(1x56x56x64xf32,
/// ...) -> 1x56x56x64xf32 {dilation=[1,1],...}").
std::string opSignature(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs, const ops::AttrMap &attrs,
                        llvm::ArrayRef<TensorType> results);

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
  ExecPlan plan;  // JIT steps not yet compiled (object = -1)
  /// Per plan step: the outlined cluster (kiln_fn(inputs...) -> outputs...)
  /// of a JIT step, null for kernel steps.
  std::vector<std::unique_ptr<SpecializedFunction>> clusters;
  PlacementSummary summary;
};

/// True when MLIR 22's TOSA conversions lower `op` (the op table's `lowers`).
bool tosaOpHasLowering(llvm::StringRef op);

}  // namespace kiln::lowering
