// Symbols kiln exports to JIT-compiled code, by name. Generated code calls
// them like C functions (kiln_parallel_for, memrefCopy, malloc/free).
#pragma once

#include <utility>
#include <vector>

namespace kiln::jit {
/// (name, address) pairs; stable for the life of the process.
const std::vector<std::pair<const char *, void *>> &runtimeSymbols();
}  // namespace kiln::jit
