// Writes one TOSA op as MLIR text (generic form) from its registry name,
// operand values/types, kernel-style attributes and result types: the inverse
// of the kernel view the partitioner takes of an op. Which operands fold into
// attributes and how each attribute is typed come from the op table
// (ops/Ops.def). Eager JIT dispatch
// (single-op graphs) and eager tracing (captured graphs) use it, so a traced
// graph, an eager op and a graph op all mean the same thing.
#pragma once

#include "ops/Attrs.h"
#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace kiln::lowering {

/// Appends `%<results...> = "tosa.op"(operands, constants) <{props}> : (...) -> (...)`
/// (plus constant ops for folded operands such as shapes and zero points).
/// `prefix` makes the SSA names of helper constants unique.
llvm::Error emitTosaOp(std::string &out, llvm::StringRef op, llvm::ArrayRef<std::string> operands,
                       llvm::ArrayRef<TensorType> operandTypes, const ops::AttrMap &attrs,
                       llvm::ArrayRef<std::string> results, llvm::ArrayRef<TensorType> resultTypes,
                       llvm::StringRef prefix);

/// "tensor<1x8xf32>"
std::string mlirTensorType(const TensorType &t);


}  // namespace kiln::lowering
