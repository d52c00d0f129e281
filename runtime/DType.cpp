#include "runtime/DType.h"

namespace kiln {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::f64: case DType::i64: return 8;
  case DType::f32: case DType::i32: return 4;
  case DType::f16: case DType::bf16: case DType::i16: return 2;
  case DType::i8: case DType::u8: case DType::i1: return 1;
  }
  return 0;
}

std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::f64: return "f64";
  case DType::i64: return "i64";
  case DType::i32: return "i32";
  case DType::i16: return "i16";
  case DType::i8: return "i8";
  case DType::u8: return "ui8";
  case DType::i1: return "i1";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view n) {
  if (n == "f32") return DType::f32;
  if (n == "f16") return DType::f16;
  if (n == "bf16") return DType::bf16;
  if (n == "f64") return DType::f64;
  if (n == "i64") return DType::i64;
  if (n == "i32") return DType::i32;
  if (n == "i16") return DType::i16;
  if (n == "i8") return DType::i8;
  if (n == "ui8" || n == "u8") return DType::u8;
  if (n == "i1") return DType::i1;
  return std::nullopt;
}

bool isFloat(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

}  // namespace kiln
