// Reading and writing tensors as NumPy .npy files (format versions 1.0-3.0,
// little-endian, C order). Stateless; thread-safe.
#pragma once

#include "runtime/Tensor.h"

namespace kiln {

llvm::Expected<Tensor> readNpy(llvm::StringRef path);
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef nameForErrors);
llvm::Error writeNpy(llvm::StringRef path, const Tensor &t);
std::string serializeNpy(const Tensor &t);

}  // namespace kiln
