// `kiln import`: ONNX files and saved torch.export programs (.pt2) to the
// TOSA MLIR kiln loads, through torch-mlir's tools where they are installed
// (see Import.cpp for the routes and where the tools are looked for).
#pragma once

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln::tools {

struct ImportOptions {
  std::string input;   // model.onnx or model.pt2
  std::string output;  // "" = the input's name with .mlir; .mlirbc = bytecode
  unsigned timeoutSeconds = 1800;
  /// Replace an existing output (without it, an existing name is an error).
  /// Either way the result is written beside the name and renamed over it:
  /// a link at the output's name is replaced, never written through.
  bool force = false;
};

struct ImportResult {
  std::string output;
  std::string route;                   // the tools that ran
  std::vector<std::string> functions;  // "@main(1x3x224x224xf32) -> (1x1000xf32)"
  std::string graphRewrites;           // what kiln's load-time rewrites did
};

/// Converts and then loads the result once; errors name the missing tool,
/// the failing command and its stderr, or what kiln refused.
llvm::Expected<ImportResult> importModel(const ImportOptions &options);

}  // namespace kiln::tools
