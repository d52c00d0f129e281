// Handwritten CPU kernels, registered by TOSA op name in one registry.
//
// Each entry has a shape function (result types from operand types and
// attributes) and a compute function. Graph mode checks its specialized
// types against the shape function before placing an op on a kernel; eager
// dispatch allocates outputs from it: both modes share shape functions and
// kernels. A shape function that rejects its inputs (an unsupported dtype,
// say) means "no kernel for this use"; the reason is kept for placement
// reports.
//
// Kernels run on the runtime's executor (KernelArgs::executor: parallelFor),
// so graph steps and kernel loops share one TBB pool. Compute functions are
// stateless and thread-safe. The registry holds the built-in kernels and
// those users register (kiln::registerKernel); registration and lookup are
// thread-safe, and a registered kernel stays for the life of the process.
//
// Names say op, dtype and implementation: conv2d_f32_im2col_eigen.
#pragma once

#include "ops/Attrs.h"
#include "runtime/Executor.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <deque>
#include <map>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kiln::kernels {

using ops::Attr;
using ops::AttrMap;

/// Step attributes (floats, both or neither) of the f32 tosa.conv2d and
/// tosa.depthwise_conv2d kernels: the tosa.clamp that read the conv's result
/// (and nothing else did), applied as each block of the result is written
/// (a plan fuses it: jit/Compiler's buildExecutable). A ReLU or ReLU6 after
/// each conv had been a pass of its own over the whole output.
constexpr const char *kFusedClampMin = "kiln.clamp_min";
constexpr const char *kFusedClampMax = "kiln.clamp_max";
/// The ops whose f32 kernels take kFusedClampMin / kFusedClampMax.
inline bool takesFusedClamp(llvm::StringRef op) { return op == "tosa.conv2d" || op == "tosa.depthwise_conv2d"; }

struct KernelArgs {
  llvm::ArrayRef<const void *> inputs;
  llvm::ArrayRef<TensorType> inputTypes;
  llvm::ArrayRef<void *> outputs;
  llvm::ArrayRef<TensorType> outputTypes;
  const AttrMap &attrs;
  HostExecutor &executor;
};

using ShapeFn = llvm::Expected<std::vector<TensorType>> (*)(llvm::ArrayRef<TensorType> inputs,
                                                           const AttrMap &attrs);
using ComputeFn = llvm::Error (*)(const KernelArgs &args);

struct KernelDef {
  std::string op;    // "tosa.add", "tosa.custom:kiln.gelu"
  std::string impl;  // the implementation: "eigen", "im2col_eigen", "cpu" (plain loops)
  ShapeFn shape;     // also checks dtypes: an error means "no kernel for this use"
  ComputeFn compute;
  /// The dtypes (of the first operand) this kernel is registered for; empty:
  /// every dtype its shape function takes (the op's general kernel).
  std::vector<DType> dtypes = {};
  /// "conv2d_f32_im2col_eigen": op, the dtype of the first operand, implementation.
  std::string nameFor(llvm::ArrayRef<TensorType> inputs) const;
  /// compute(), with memory that runs out inside it (a std::bad_alloc from
  /// a kernel's own buffers, Eigen's temporaries) as a kResourceExhausted
  /// error naming the op instead of the process's end. Every caller runs
  /// kernels through this.
  llvm::Error run(const KernelArgs &args) const;
};

/// A kernel chosen for one use of an op, with its result types.
struct KernelChoice {
  const KernelDef *def = nullptr;
  std::vector<TensorType> results;
  std::string name;  // def->nameFor(inputs)
};

class KernelRegistry {
public:
  /// The kernel for this use of `op`: a kernel registered for the first
  /// operand's dtype, else the op's general kernel, whose shape function
  /// must accept the types and attributes. The error says why none does.
  llvm::Expected<KernelChoice> select(llvm::StringRef op, llvm::ArrayRef<TensorType> inputs,
                                      const AttrMap &attrs) const;
  /// The op's general kernel (null if it has none).
  const KernelDef *lookup(llvm::StringRef op) const;
  /// Ops with at least one kernel.
  std::vector<std::string> ops() const;
  /// Adds a kernel. Errors: an incomplete `def`, a second general kernel for
  /// an op, or a dtype another kernel of the op is already registered for.
  llvm::Error add(KernelDef def);

private:
  mutable std::shared_mutex mu_;
  /// Per op: dtype-specific kernels first, then the general one. Deques:
  /// registered kernels never move, so pointers to them stay valid.
  std::map<std::string, std::deque<KernelDef>, std::less<>> defs_;
};

/// The process-wide registry: every built-in kernel, then users' kernels.
KernelRegistry &registry();

/// Runs a kernel on tensors: checks the shape function, allocates outputs.
llvm::Expected<std::vector<Tensor>> runKernel(llvm::StringRef op, llvm::ArrayRef<Tensor> inputs,
                                              const AttrMap &attrs, HostExecutor &executor);

// Registration, one function per kernel family (called by registry()).
void registerElementwiseKernels(KernelRegistry &r);
void registerReductionKernels(KernelRegistry &r);
void registerDataMovementKernels(KernelRegistry &r);
void registerNNKernels(KernelRegistry &r);

}  // namespace kiln::kernels
