// DType: the element types kiln tensors can hold, with their sizes and names.
// Plain value type; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, i16, i8, u8, i1 };

/// Bytes per element as stored in a kiln buffer (i1 is stored one byte per
/// element, as LLVM stores i1 in memory).
size_t dtypeSize(DType t);
/// Canonical short name: "f32", "i1", ...  (the same spelling MLIR uses).
std::string_view dtypeName(DType t);
/// Parses a canonical name ("f32", "i64", "ui8", "u8", ...).
std::optional<DType> parseDType(std::string_view name);
bool isFloat(DType t);

}  // namespace kiln
