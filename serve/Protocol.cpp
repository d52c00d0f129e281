#include "serve/Protocol.h"

namespace kiln::serve {

int httpStatus(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::invalid_argument: return 400;
  case ErrorKind::not_found: return 404;
  case ErrorKind::unavailable: return 503;
  case ErrorKind::deadline_exceeded: return 504;
  case ErrorKind::cancelled: return 499;
  case ErrorKind::too_large: return 413;
  case ErrorKind::internal: return 500;
  }
  return 500;
}

ServeError fromKiln(const kiln::Error &error, bool hadDeadline) {
  std::string message = error.what();
  if (!error.location().empty()) message += " (at " + error.location() + ")";
  switch (error.code()) {
  case kiln::Code::invalid_argument:
  case kiln::Code::unsupported: return {ErrorKind::invalid_argument, message};
  case kiln::Code::unavailable:
  case kiln::Code::resource_exhausted: return {ErrorKind::unavailable, message};
  case kiln::Code::cancelled:
    return {hadDeadline ? ErrorKind::deadline_exceeded : ErrorKind::cancelled, message};
  default: return {ErrorKind::internal, message};
  }
}

namespace {
struct Name {
  const char *protocol;
  kiln::DType dtype;
};
constexpr Name kNames[] = {
    {"BOOL", kiln::DType::boolean}, {"UINT8", kiln::DType::u8},  {"INT8", kiln::DType::i8},
    {"INT16", kiln::DType::i16},    {"INT32", kiln::DType::i32}, {"INT64", kiln::DType::i64},
    {"FP16", kiln::DType::f16},     {"BF16", kiln::DType::bf16}, {"FP32", kiln::DType::f32},
    {"FP64", kiln::DType::f64},
};
}  // namespace

std::optional<kiln::DType> dtypeFromProtocol(std::string_view name) {
  for (const Name &n : kNames)
    if (name == n.protocol) return n.dtype;
  return std::nullopt;
}

const char *protocolName(kiln::DType dtype) {
  for (const Name &n : kNames)
    if (n.dtype == dtype) return n.protocol;
  return "?";
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<uint64_t> elementCount(const std::vector<int64_t> &shape) {
  // At most 2^48 elements: their bytes (8 per element at most) never wrap a
  // 64-bit count, so a hostile shape cannot make a wrong size look right.
  constexpr uint64_t kMax = uint64_t(1) << 48;
  uint64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0 || uint64_t(d) > kMax) return std::nullopt;
    if (d == 0) zero = true;
    else if (n > kMax / uint64_t(d)) return std::nullopt;
    else n *= uint64_t(d);
  }
  return zero ? 0 : n;
}

}  // namespace kiln::serve
