// The calling convention of a model's public function, in tensors: what a
// caller must pass and what it gets back. Built by the importer (lowering),
// checked by the API before any compile; no MLIR.
//
// Thread-safety: plain values.
#pragma once

#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

struct ArgumentInfo {
  std::string name;  // from kiln.name / tf_saved_model.index_path / tf.entry_function; may be empty
  TensorType type;   // dims may be kDynamic
};

/// How a function treats dimension 0 of its dynamic inputs
/// (lowering/graph/BatchDimension.h): when `separable`, every item of the
/// batch is computed apart from the others, so a call with batch N may run
/// as N calls with batch 1 on slices of the inputs, each writing its slice
/// of the outputs.
struct BatchDimension {
  bool separable = false;
  /// Why not, naming the op and where, e.g. "tosa.reduce_sum at m.mlir:7:10
  /// reduces over the batch"; empty when separable.
  std::string why;
  std::vector<bool> inputs;  // by argument: dim 0 is the batch (else the argument is passed whole)
  std::vector<int> results;  // by result: the dim holding the batch (the dims before it are 1)
};

struct FunctionSignature {
  std::string name;
  std::vector<ArgumentInfo> args;
  std::vector<TensorType> results;  // as declared; may be dynamic
  std::vector<std::string> resultNames;  // by result: kiln.name / tf.entry_function outputs; may be empty
  std::string location;             // "file:line:col" of the func.func
  std::string unsupported;          // why kiln cannot call it (empty if callable)
  BatchDimension batch;             // whether calls may be split along the batch
};

/// Checks a call's inputs against a signature (count, dtype, rank, static
/// dims): kInvalidArgument (kUnsupported when the function cannot be called).
llvm::Error checkInputs(const FunctionSignature &sig, llvm::ArrayRef<TensorType> inputs);

/// "@a, @b": the functions' names for messages ("none" when there are none).
std::string functionNames(llvm::ArrayRef<FunctionSignature> functions);

/// "no public function @f in the module (it has: @a, @b)".
llvm::Error noSuchFunction(llvm::StringRef function, llvm::ArrayRef<FunctionSignature> functions);

}  // namespace kiln
