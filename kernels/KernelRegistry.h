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
// stateless and thread-safe; the registry is immutable after startup.
#pragma once

#include "runtime/Executor.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <variant>
#include <vector>

namespace kiln::kernels {

/// An attribute value: integer (also bool/enum index), float, integer list, or string.
using Attr = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

class AttrMap {
public:
  void set(const std::string &name, Attr value) { attrs_[name] = std::move(value); }
  bool has(llvm::StringRef name) const { return attrs_.count(name.str()) != 0; }
  llvm::Expected<int64_t> getInt(llvm::StringRef name) const;
  llvm::Expected<double> getFloat(llvm::StringRef name) const;  // ints convert
  llvm::Expected<std::vector<int64_t>> getInts(llvm::StringRef name) const;
  llvm::Expected<std::string> getString(llvm::StringRef name) const;
  int64_t getIntOr(llvm::StringRef name, int64_t fallback) const;
  double getFloatOr(llvm::StringRef name, double fallback) const;
  const std::map<std::string, Attr> &all() const { return attrs_; }
  /// "{axis = 1, perms = [1, 0]}", stable order; also the eager cache key text.
  std::string str() const;

private:
  std::map<std::string, Attr> attrs_;
};

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
  std::string op;    // "tosa.add"
  std::string name;  // "tosa_add_cpu": op, target (dtypes are checked by the shape function)
  ShapeFn shape;
  ComputeFn compute;
};

class KernelRegistry {
public:
  const KernelDef *lookup(llvm::StringRef op) const;
  std::vector<std::string> ops() const;
  void add(KernelDef def);

private:
  std::map<std::string, KernelDef, std::less<>> defs_;
};

/// The process-wide registry with every built-in kernel.
const KernelRegistry &registry();

/// Runs a kernel on tensors: checks the shape function, allocates outputs.
llvm::Expected<std::vector<Tensor>> runKernel(llvm::StringRef op, llvm::ArrayRef<Tensor> inputs,
                                              const AttrMap &attrs, HostExecutor &executor);

// Registration, one function per kernel family (called by registry()).
void registerElementwiseKernels(KernelRegistry &r);
void registerReductionKernels(KernelRegistry &r);
void registerDataMovementKernels(KernelRegistry &r);
void registerNNKernels(KernelRegistry &r);

}  // namespace kiln::kernels
