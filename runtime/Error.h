// kiln's one error type: a code, a message and where it happened.
//
//   return kiln::error(ErrorCode::kInvalidArgument, "@%s: expected %zu inputs, got %zu", ...);
//   return kiln::error(ErrorCode::kUnsupported, "'%s' has no lowering", op).at(location);
//
// Fallible functions return llvm::Error / llvm::Expected<T> carrying a
// KilnError; `toStatus(std::move(err))` reads it back (kInternal for
// errors that did not come from kiln). A Status is the same information as a plain
// value: it is what an AsyncValue holds when it fails, so an error crosses
// threads and futures unchanged and becomes a KilnError again when awaited.
//
// Thread-safety: plain values.
#pragma once

#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <string>
#include <utility>

namespace kiln {

enum class ErrorCode : uint8_t {
  kInvalidArgument,    // bad input: a malformed model, wrong shapes or dtypes, bad options
  kUnsupported,        // well-formed, but kiln cannot run it (op, dtype, dialect)
  kCompileFailed,      // MLIR or LLVM failed on input kiln accepted
  kIO,                 // files, the disk cache
  kResourceExhausted,  // memory, sizes that do not fit
  kCancelled,          // a cancelled execution
  kUnavailable,        // a device, driver or library that is not there (no GPU)
  kInternal,           // a kiln bug or a broken invariant
};

/// "invalid argument", "unsupported", ...
const char *errorCodeName(ErrorCode code);

/// An error as a value: code, message and location ("file:line:col", may be empty).
struct Status {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string location;
  /// "message" or "location: message" — what users read (the message alone
  /// when it names the location already, as MLIR's diagnostics do).
  std::string str() const {
    return location.empty() || message.find(location) != std::string::npos ? message : location + ": " + message;
  }
};

class KilnError : public llvm::ErrorInfo<KilnError> {
public:
  static char ID;
  explicit KilnError(Status status) : status_(std::move(status)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
  const Status &status() const { return status_; }
  ErrorCode code() const { return status_.code; }

private:
  Status status_;
};

inline llvm::Error makeError(Status status) { return llvm::make_error<KilnError>(std::move(status)); }

/// Consumes `err` (which must be a failure) into a Status; foreign errors
/// become kInternal with their message.
Status toStatus(llvm::Error err);
/// Prefixes the message of `err` ("@main: " + message), keeping its code and
/// location; success stays success.
llvm::Error withContext(llvm::Error err, llvm::StringRef prefix);

/// printf-style message.
template <typename... Args>
llvm::Error error(ErrorCode code, const char *fmt, const Args &...args) {
  if constexpr (sizeof...(Args) == 0) {
    return makeError(Status{code, fmt, {}});
  } else {
    int n = std::snprintf(nullptr, 0, fmt, args...);
    std::string msg(n > 0 ? size_t(n) : 0, '\0');
    std::snprintf(msg.data(), msg.size() + 1, fmt, args...);
    return makeError(Status{code, std::move(msg), {}});
  }
}
/// The same with a location.
template <typename... Args>
llvm::Error errorAt(ErrorCode code, std::string location, const char *fmt, const Args &...args) {
  llvm::Error e = error(code, fmt, args...);
  Status s = toStatus(std::move(e));
  s.location = std::move(location);
  return makeError(std::move(s));
}


}  // namespace kiln
