#include "runtime/Error.h"

#include "llvm/Support/raw_ostream.h"

namespace kiln {

char KilnError::ID = 0;

const char *errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::kInvalidArgument: return "invalid argument";
  case ErrorCode::kUnsupported: return "unsupported";
  case ErrorCode::kCompileFailed: return "compile failed";
  case ErrorCode::kIO: return "I/O error";
  case ErrorCode::kResourceExhausted: return "resource exhausted";
  case ErrorCode::kCancelled: return "cancelled";
  case ErrorCode::kUnavailable: return "unavailable";
  case ErrorCode::kInternal: return "internal error";
  }
  return "internal error";
}

void KilnError::log(llvm::raw_ostream &os) const { os << status_.str(); }

std::error_code KilnError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

Status toStatus(llvm::Error err) {
  Status out;
  llvm::handleAllErrors(
      std::move(err), [&](const KilnError &e) { out = e.status(); },
      [&](const llvm::ErrorInfoBase &e) {
        out.code = ErrorCode::kInternal;
        out.message = e.message();
      });
  return out;
}

llvm::Error withContext(llvm::Error err, llvm::StringRef prefix) {
  if (!err) return err;
  Status s = toStatus(std::move(err));
  s.message = prefix.str() + s.message;
  return makeError(std::move(s));
}

}  // namespace kiln
