// Writing files where a user asked for them (outputs, traces, imported
// models, IR dumps) without ever writing anywhere else.
//
// writeFileReplacing never opens an existing name for writing: it creates a
// new temporary file beside the name (O_CREAT | O_EXCL | O_NOFOLLOW, in the
// same directory), writes and fsyncs it, and renames it over the name. A
// symlink, hard link, FIFO or device at that name is replaced, never
// followed, written through or blocked on; a reader sees the old file or the
// whole new one. Every failure (no space, a file-size limit, permissions) is
// a kiln error naming the path; nothing is left behind. Stateless;
// thread-safe.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace kiln {

enum class Existing { kReplace, kRefuse };

/// Writes `bytes` to `path` through a temporary file and a rename. With
/// kRefuse, an existing name (of any kind) is an error instead.
llvm::Error writeFileReplacing(llvm::StringRef path, llvm::StringRef bytes, Existing existing = Existing::kReplace);

/// A fresh, empty temporary file beside `path` (same directory; its name
/// starts with '.', the file name of `path` and ".tmp."), for a writer that
/// is another process; publish it with renameReplacing.
llvm::Expected<std::string> createTemporaryBeside(llvm::StringRef path);
/// Renames `from` over `to` (never following a link at `to`); with kRefuse
/// it fails if `to` exists (renameat2 RENAME_NOREPLACE, or link + unlink).
llvm::Error renameReplacing(llvm::StringRef from, llvm::StringRef to, Existing existing = Existing::kReplace);

}  // namespace kiln
