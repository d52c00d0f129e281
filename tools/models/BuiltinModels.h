// Built-in models, generated in code as TOSA MLIR text with deterministic
// weights (the same bytes on every run and machine). Used by `kiln run mlp`,
// tests and benchmarks.
#pragma once

#include <string>
#include <vector>

namespace kiln::models {

struct BuiltinModel {
  std::string name;         // "mlp", "cnn"
  std::string description;
  std::string mlir;         // the module text
};

/// Names of the built-in models.
std::vector<std::string> builtinModelNames();
/// The model called `name`, or nullptr.
const BuiltinModel *findBuiltinModel(const std::string &name);

/// Deterministic weights: `count` values uniform in [-scale, scale) from `seed`.
std::vector<float> deterministicValues(size_t count, unsigned seed, float scale);

}  // namespace kiln::models
