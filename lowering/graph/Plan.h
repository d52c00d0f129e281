// ExecPlan: what a compiled function runs, without MLIR: values (inputs,
// weights, small constants, intermediates), steps (a JIT entry point in one
// of the compiled objects of a target, or a handwritten kernel with its
// attributes) and results. One type end to end: the partitioner writes it,
// the compile service fills in the objects, the cache stores it (as JSON,
// jit/PlanJson.h) and the loader turns it into an Executable.
//
// Thread-safety: plain values.
#pragma once

#include "ops/Attrs.h"
#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace kiln::lowering {

struct PlanValue {
  enum Kind { kInput, kWeight, kConstant, kIntermediate } kind = kIntermediate;
  TensorType type;
  int index = -1;   // input / weight position
  Tensor constant;  // kConstant: the value (small constants kept out of code)
};

struct PlanStep {
  enum Kind { kJit, kKernel } kind = kJit;
  std::string name;                  // "cluster0" / "tosa.gather"
  std::vector<int> inputs, outputs;  // value ids
  // kJit: the compiled cluster.
  std::string target;                // the target that compiled it ("host-cpu")
  int object = -1;                   // index into the compiled objects
  std::string symbol;                // entry symbol in that object
  std::vector<std::string> ops;      // the ops fused into it
  std::vector<std::string> faultSites;  // messages of the code's fault sites, by id
  int64_t scratchBytes = 0;          // scratch memory the code asks for per run (kiln-scratch-buffers)
  // kKernel: the handwritten kernel.
  std::string op;                    // registry key ("tosa.add", "tosa.custom:kiln.gelu")
  std::string kernel;                // implementation ("conv2d_f32_im2col_eigen")
  ops::AttrMap attrs;
  std::string location;              // the op's MLIR location
  std::string reason;                // why a kernel: "mode=kernel", "no lowering", "JIT compile failed"
  // Both kinds, for profiles.
  double flops = 0;                  // arithmetic per run, from the ops' shapes
  std::string strategy;              // kJit: how its code computes (kiln-cpu-strategy's words); kKernel: why a kernel
  std::vector<std::string> locations;  // MLIR locations of the ops, in order (provenance)
  /// kJit, at compile time only (not stored): the step's ops that a kernel
  /// also takes, kept on JIT by `auto` until placement by measurement has
  /// timed both (lowering/graph/Partition.h).
  struct Alternative {
    std::string op, kernel, signature, location;
    ops::AttrMap attrs;
    std::vector<TensorType> inputs, results;
    /// Per input: computed from weights and constants only (a filter, a
    /// bias, their layout changes), so fixed for every call.
    std::vector<bool> constantInputs;
    /// The step computes nothing else per call (its other ops only read
    /// weights in another layout): the step's time is the op's alone.
    bool aloneInStep = false;
  };
  std::vector<Alternative> alternatives;
};

struct ExecPlan {
  std::vector<PlanValue> values;
  std::vector<PlanStep> steps;  // in a topological order
  std::vector<int> results;     // value ids
  std::string summary;          // placement summary
};

}  // namespace kiln::lowering
