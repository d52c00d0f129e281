// DType: the element types kiln tensors can hold, with their sizes and
// names, all from one table (runtime/DTypes.def). Plain value type; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace kiln {

enum class DType : uint8_t {
#define KILN_DTYPE(ID, NAME, BYTES, FLOAT, CTYPE, NPY) ID,
#include "runtime/DTypes.def"
#undef KILN_DTYPE
};

/// Bytes per element as stored in a kiln buffer (i1 is stored one byte per
/// element, as LLVM stores i1 in memory).
size_t dtypeSize(DType t);
/// Canonical short name: "f32", "i1", ...  (the same spelling MLIR uses).
std::string_view dtypeName(DType t);
/// Parses a canonical name ("f32", "i64", "ui8", ...; also "u8").
std::optional<DType> parseDType(std::string_view name);
bool isFloat(DType t);
/// NumPy's descriptor ("<f4") and back (byte-order prefix optional).
std::string_view npyDescr(DType t);
std::optional<DType> dtypeFromNpyDescr(std::string_view descr);

/// Calls f(T{}) with the C++ type kernels compute `t` in (i1: bool, stored
/// as one byte); returns false for dtypes without one (f16, bf16).
template <typename F> bool visitComputeType(DType t, F &&f) {
  switch (t) {
#define KILN_DTYPE(ID, NAME, BYTES, FLOAT, CTYPE, NPY)                                         \
  case DType::ID:                                                                              \
    if constexpr (std::is_void_v<CTYPE>) return false;                                         \
    else {                                                                                     \
      f(CTYPE());                                                                              \
      return true;                                                                             \
    }
#include "runtime/DTypes.def"
#undef KILN_DTYPE
  }
  return false;
}

}  // namespace kiln
