// ExecPlan: what a compiled function runs, without MLIR: values (inputs,
// weights, small constants, intermediates), steps (a JIT entry point in one
// of the objects, or a handwritten kernel with its attributes) and results.
// It is built from a partitioned function at compile time, stored in cache
// entries as JSON, and turned into an Executable at load time.
#pragma once

#include "kernels/KernelRegistry.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::jit {

struct ExecPlan {
  struct Value {
    enum Kind { kInput, kWeight, kConstant, kIntermediate } kind = kIntermediate;
    TensorType type;
    int index = -1;         // input / weight position
    std::string constant;   // kConstant: raw bytes
  };
  struct Step {
    bool jit = true;
    int object = -1;        // jit: index into the objects
    std::string symbol;     // jit: entry symbol ("kiln_entry")
    std::string op;         // kernel: registry key
    kernels::AttrMap attrs; // kernel
    std::string name;       // for errors and traces
    std::vector<std::string> ops;  // jit: the ops of the cluster
    std::vector<int> inputs, outputs;
  };
  std::vector<Value> values;
  std::vector<Step> steps;
  std::vector<int> results;
  std::string summary;      // placement summary

  std::string toJson() const;
  static llvm::Expected<ExecPlan> fromJson(llvm::StringRef json);
};

}  // namespace kiln::jit
