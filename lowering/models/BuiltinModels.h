// Built-in models, built in code with the graph builder (lowering/graph/GraphBuilder.h)
// from deterministic weights (the same bytes on every run and machine). Used
// by `kiln run mlp`, tests and benchmarks: as a Program built in memory, or
// as the same module's MLIR text.
#pragma once

#include "lowering/graph/Program.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::models {

struct BuiltinModel {
  std::string name;         // "mlp", "cnn", "resnet50"
  std::string description;
  std::string mlir;         // the module as MLIR text (generic form); empty for big models
  /// The module built in memory (no text in between).
  std::function<llvm::Expected<std::unique_ptr<lowering::Program>>()> build;
};

/// Names of the built-in models.
std::vector<std::string> builtinModelNames();
/// The model called `name`, or nullptr.
const BuiltinModel *findBuiltinModel(const std::string &name);

/// Deterministic weights: `count` values uniform in [-scale, scale) from `seed`.
std::vector<float> deterministicValues(size_t count, unsigned seed, float scale);

}  // namespace kiln::models
