// Whether MLIR's type IDs, as this build of kiln sees them, are libMLIR's.
//
// MLIR identifies types without an explicit ID (every op trait among them)
// by a function-local static per type, filled once from the type's name. A
// copy of that static inside a shared library that hides its symbols is a
// second ID, registered under the name this compiler gives the type — which
// for traits is not the name Clang gave it when libMLIR.so was built. Then
// `op->hasTrait<OpTrait::ConstantLike>()` is false for arith.constant in
// kiln's code and passes quietly do less (libkiln.so once lost its
// generated code's parallel loops that way: api/c/libkiln.map).
#pragma once

#include <string>

namespace kiln::lowering {

/// Empty when the op traits and interfaces kiln's passes ask about are the
/// ones libMLIR registered; else what disagrees. Checked once per process.
const std::string &mlirTypeIdMismatch();

}  // namespace kiln::lowering
