// The Open Inference Protocol's requests and answers, apart from either
// transport: what the HTTP and gRPC frontends parse into and write from, and
// what a served model (serve/Model.h) takes and gives. serve/ sits on kiln's
// public API (<kiln/kiln.hpp>) only.
#pragma once

#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serve {

using Clock = std::chrono::steady_clock;

/// What model metadata and configuration call kiln's models.
inline constexpr const char *kPlatform = "kiln_mlir";
/// The protocol extensions kiln serves, as server metadata lists them on
/// both transports: Triton's binary tensor data (HTTP) and model
/// configuration (GET .../config, ModelConfig).
inline const std::vector<std::string> kExtensions = {"binary_tensor_data", "model_configuration"};

/// What went wrong, in the protocol's terms (an HTTP status, a gRPC code).
enum class ErrorKind { invalid_argument, not_found, unavailable, deadline_exceeded, cancelled, too_large, internal };

struct ServeError {
  ErrorKind kind;
  std::string message;
};

/// 400, 404, 503, 504, 499, 413, 500.
int httpStatus(ErrorKind kind);
/// kiln's error as the protocol's: bad input is the client's (400), busy is
/// 503, a cancelled call is a deadline when the request had one.
ServeError fromKiln(const kiln::Error &error, bool hadDeadline);

/// "FP32" -> f32, ...; nullopt for a name kiln has no dtype for (BYTES, UINT16...).
std::optional<kiln::DType> dtypeFromProtocol(std::string_view name);
/// f32 -> "FP32", ...
const char *protocolName(kiln::DType dtype);
/// "[1,3,224,224]"
std::string shapeText(const std::vector<int64_t> &shape);
/// Elements of `shape`, or nullopt when a dim is negative or the count
/// passes 2^48 (a hostile shape: its byte count could wrap).
std::optional<uint64_t> elementCount(const std::vector<int64_t> &shape);

/// One input tensor of a request: its bytes are row-major, little-endian,
/// and owned by the request's `payload`.
struct InputTensor {
  std::string name;
  kiln::DType dtype = kiln::DType::f32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  size_t bytes = 0;
};

struct RequestedOutput {
  std::string name;
  bool binary = false;  // HTTP: as the binary tensor extension
};

struct InferRequest {
  std::string model, version, id;
  std::vector<InputTensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binaryOutputs = false;            // HTTP: outputs not listed, as binary
  Clock::time_point received = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();
  std::shared_ptr<const void> payload;  // owns the bytes the inputs point into
  std::function<bool()> abandoned;      // true once the client has gone away (may be empty)
  /// Bounds the request to `after` from its receipt (a `timeout` parameter,
  /// a gRPC deadline): the earliest bound wins; at most 2^40 µs (12.7 days).
  void limitTo(Clock::duration after) {
    deadline = std::min(deadline, received + std::min<Clock::duration>(after, std::chrono::microseconds(int64_t(1) << 40)));
  }
};

struct OutputTensor {
  std::string name;
  kiln::DType dtype = kiln::DType::f32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;  // owned by the response's holders
  size_t bytes = 0;
  bool binary = false;
};

struct InferResponse {
  std::string model, version, id;
  std::vector<OutputTensor> outputs;
  std::vector<std::shared_ptr<const void>> holders;
};

/// Called exactly once per request, on some kiln or frontend thread.
using InferDone = std::function<void(std::optional<ServeError> error, InferResponse response)>;

}  // namespace kiln::serve
