// Text and types of MLIR IR as kiln reports them, shared by every room of
// lowering/: a location as "file:line:col", a type as MLIR prints it, and
// MLIR element and tensor types as kiln's DType and TensorType.
//
// Thread-safety: pure functions.
#pragma once

#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace kiln::lowering {
using namespace mlir;

inline std::string locationString(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return (f.getFilename().strref() + ":" + llvm::Twine(f.getLine()) + ":" +
            llvm::Twine(f.getColumn()))
        .str();
  if (auto n = dyn_cast<NameLoc>(loc)) return locationString(n.getChildLoc());
  if (auto c = dyn_cast<CallSiteLoc>(loc)) return locationString(c.getCallee());
  if (auto f = dyn_cast<FusedLoc>(loc))
    if (!f.getLocations().empty()) return locationString(f.getLocations().front());
  return "<unknown location>";
}

inline std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

inline std::optional<DType> toDType(Type t) {
  if (t.isF32()) return DType::f32;
  if (t.isF16()) return DType::f16;
  if (t.isBF16()) return DType::bf16;
  if (t.isF64()) return DType::f64;
  if (auto i = dyn_cast<IntegerType>(t)) {
    if (i.isUnsigned()) return i.getWidth() == 8 ? std::optional(DType::u8) : std::nullopt;
    switch (i.getWidth()) {
    case 64: return DType::i64;
    case 32: return DType::i32;
    case 16: return DType::i16;
    case 8: return DType::i8;
    case 1: return DType::i1;
    default: return std::nullopt;
    }
  }
  return std::nullopt;
}

/// Converts a tensor type; returns an explanation on failure.
inline std::optional<TensorType> toTensorType(Type t, std::string &why) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt) {
    why = "type " + typeString(t) + " is not a ranked tensor";
    return std::nullopt;
  }
  auto dt = toDType(rt.getElementType());
  if (!dt) {
    why = "element type " + typeString(rt.getElementType()) + " is not supported";
    return std::nullopt;
  }
  TensorType out;
  out.dtype = *dt;
  for (int64_t d : rt.getShape()) out.shape.push_back(ShapedType::isDynamic(d) ? kDynamic : d);
  return out;
}

}  // namespace kiln::lowering
