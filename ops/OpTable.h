// The op table (Ops.def) as data: for each op, whether MLIR lowers it, its
// operands (and which fold into attributes) and its attributes with types.
// No MLIR: lowering, kernels, the API and tests all read it.
//
// Thread-safety: immutable after first use.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace kiln::ops {

enum class AttrType { kI32, kI32Array, kI64Array, kBool, kString, kTypeName, kElement, kAttrText };

struct OperandSpec {
  std::string name;
  bool folded = false;    // a constant operand kiln carries as an attribute
  bool variadic = false;  // any number of operands from here on
};

struct AttrSpec {
  std::string name;
  AttrType type;
};

struct OpSpec {
  std::string name;  // "tosa.conv2d"
  bool lowers = false;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  const AttrSpec *attr(llvm::StringRef name) const;
  bool hasFoldedOperands() const;
};

/// Every op of Ops.def, in its order.
const std::vector<OpSpec> &opTable();
/// The entry of `name` ("tosa.custom:acme.x" finds "tosa.custom"), or null.
const OpSpec *lookupOp(llvm::StringRef name);

}  // namespace kiln::ops
