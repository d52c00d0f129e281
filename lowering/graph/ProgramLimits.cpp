// What a program may not be, checked at load before or right after parsing:
// text nested deeper than MLIR's recursive parsers can take, index lists
// that crash MLIR 22's linalg parsers, bytecode that crashes its reader (read
// once in a forked child), and recursion (generated code has no stack
// bound). Each is an error naming where, never a crash.
#include "lowering/graph/Program.h"
#include "runtime/Error.h"
#include "lowering/graph/ProgramImpl.h"
#include "lowering/graph/Passes.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

using namespace mlir;

namespace kiln::lowering {

namespace {

/// MLIR's parser recurses once per nested bracket, brace or region: a text
/// nested deeper than this would overflow its stack (a crash, not an
/// error), so such input is refused before parsing.
static constexpr int kMaxNesting = 1000;

}  // namespace

/// The checks below read only these stretches: string literals are most of
/// a model's text (weights in hex: ResNet-50's 205 MB took 200 ms to walk
/// byte by byte), and memchr skips them.
std::vector<std::pair<size_t, size_t>> codeStretches(llvm::StringRef text) {
  std::vector<std::pair<size_t, size_t>> stretches;
  const char *p = text.data();
  size_t n = text.size(), i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && p[j] != '"' && !(p[j] == '/' && j + 1 < n && p[j + 1] == '/')) ++j;
    if (j > i) stretches.push_back({i, j});
    if (j >= n) break;
    if (p[j] == '"') {  // to the closing quote: one after an even run of backslashes
      size_t k = j + 1;
      i = n;  // unterminated: the rest is the string
      while (k < n) {
        const void *q = std::memchr(p + k, '"', n - k);
        if (!q) break;
        size_t e = size_t(static_cast<const char *>(q) - p), b = e;
        while (b > j + 1 && p[b - 1] == '\\') --b;
        if ((e - b) % 2 == 0) {
          i = e + 1;
          break;
        }
        k = e + 1;
      }
    } else {  // a comment, to the end of its line
      const void *q = std::memchr(p + j, '\n', n - j);
      i = q ? size_t(static_cast<const char *>(q) - p) : n;
    }
  }
  return stretches;
}

namespace {

/// "line L, column C" of byte `at` (both from 1).
static std::string lineAndColumn(llvm::StringRef text, size_t at) {
  llvm::StringRef before = text.take_front(at);
  size_t lastNewline = before.rfind('\n');
  size_t column = lastNewline == llvm::StringRef::npos ? at + 1 : at - lastNewline;
  return "line " + std::to_string(1 + before.count('\n')) + ", column " + std::to_string(column);
}

/// "" when `text` nests (), [] and {} at most kMaxNesting deep, else where
/// it goes deeper ("line 3, column 9"). String literals and comments do not count.
static std::string tooDeep(llvm::StringRef text, llvm::ArrayRef<std::pair<size_t, size_t>> code) {
  int depth = 0;
  for (auto [begin, end] : code)
    for (size_t i = begin; i < end; ++i) {
      char c = text[i];
      if (c == '(' || c == '[' || c == '{') {
        if (++depth > kMaxNesting) return lineAndColumn(text, i);
      } else if (c == ')' || c == ']' || c == '}') {
        --depth;
      }
    }
  return "";
}

/// MLIR 22's custom parsers of linalg.reduce / linalg.broadcast
/// (`dimensions = [...]`) and linalg.transpose (`permutation = [...]`)
/// crash on anything but integers in the list (an upstream bug). "" when
/// every such list holds integers, else the list and where it is.
static std::string badIndexList(llvm::StringRef text, llvm::ArrayRef<std::pair<size_t, size_t>> code) {
  for (llvm::StringRef key : {"dimensions", "permutation"}) {
    for (auto [begin, end] : code) {
      llvm::StringRef stretch = text.slice(begin, end);
      for (size_t found = stretch.find(key); found != llvm::StringRef::npos; found = stretch.find(key, found + 1)) {
        size_t at = begin + found;
        // `key = [` with any spaces around the '='.
        size_t open = at + key.size();
        while (open < text.size() && text[open] == ' ') ++open;
        if (open >= text.size() || text[open] != '=') continue;
        ++open;
        while (open < text.size() && text[open] == ' ') ++open;
        if (open >= text.size() || text[open] != '[') continue;
        ++open;
        size_t close = text.find(']', open);
        llvm::StringRef list = text.slice(open, close == llvm::StringRef::npos ? text.size() : close);
        bool ok = close != llvm::StringRef::npos &&
                  llvm::all_of(list, [](char c) {  // integers, possibly typed (`0 : i64`)
                    return std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == ' ' || c == '-' ||
                           c == '\n' || c == ':' || c == 'i';
                  });
        if (!ok) {
          size_t line = 1 + text.take_front(at).count('\n');
          return "`" +
                 text.slice(at, std::min(text.size(), close == llvm::StringRef::npos ? at + 40 : close + 1)).str() +
                 "` at line " + std::to_string(line);
        }
      }
    }
  }
  return "";
}

/// MLIR 22's bytecode reader crashes on some damaged files (a double free,
/// wild reads) instead of reporting them. Bytecode is therefore read once in
/// a forked child first: "" when the child finished (whether or not the
/// file is valid: the real parse below reports that), else how it died. A
/// child that cannot be started or takes too long does not stop the load.
static std::string bytecodeReaderCrashes(llvm::StringRef source) {
  pid_t pid = fork();
  if (pid < 0) return "";
  if (pid == 0) {
    alarm(60);
    DialectRegistry registry;
    registerKilnDialects(registry);
    MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
    ctx.getDiagEngine().registerHandler([](Diagnostic &) { return success(); });  // quiet
    llvm::SourceMgr sm;
    sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(source, "bytecode", /*RequiresNullTerminator=*/false),
                          llvm::SMLoc());
    OwningOpRef<ModuleOp> m = parseSourceFile<ModuleOp>(sm, ParserConfig(&ctx));
    _exit(m ? 0 : 2);  // no destructors, no atexit handlers of the parent's state
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "";
  if (!WIFSIGNALED(status) || WTERMSIG(status) == SIGALRM) return "";
  return strsignal(WTERMSIG(status));
}

}  // namespace

/// An error for input that would crash MLIR 22's parsers instead of being
/// reported by them (see tooDeep, badIndexList, bytecodeReaderCrashes).
llvm::Error refuseWhatCrashesTheParser(llvm::StringRef source, llvm::StringRef bufferName,
                                       llvm::ArrayRef<std::pair<size_t, size_t>> code) {
  if (isBytecode(llvm::MemoryBufferRef(source, bufferName))) {
    if (std::string how = bytecodeReaderCrashes(source); !how.empty())
      return error(ErrorCode::kInvalidArgument,
                   "cannot load MLIR bytecode from '%s': the file is damaged (MLIR's bytecode reader, run on it in a "
                   "separate process, crashed: %s)",
                   bufferName.str().c_str(), how.c_str());
    return llvm::Error::success();
  }
  if (std::string where = tooDeep(source, code); !where.empty())
    return error(ErrorCode::kInvalidArgument,
                 "cannot load MLIR from '%s': it nests brackets, braces or regions more than %d deep (at %s), "
                 "deeper than MLIR's parser can take",
                 bufferName.str().c_str(), kMaxNesting, where.c_str());
  if (std::string bad = badIndexList(source, code); !bad.empty())
    return error(ErrorCode::kInvalidArgument,
                 "cannot load MLIR from '%s': %s must list integers (MLIR 22's linalg parser would crash on it)",
                 bufferName.str().c_str(), bad.c_str());
  return llvm::Error::success();
}

/// "" if no call reachable from `root` recurses, else the cycle
/// ("@a calls @b, which calls @a (file:line:col)"): generated code has no
/// stack bound, so recursion is refused at load.
std::string recursion(ModuleOp module, func::FuncOp root) {
  llvm::DenseMap<Operation *, int> state;  // 1 = on the path, 2 = done
  std::vector<std::string> path;
  std::string found;
  std::function<void(func::FuncOp)> visit = [&](func::FuncOp f) {
    state[f] = 1;
    path.push_back(f.getSymName().str());
    f.walk([&](func::CallOp call) {
      if (!found.empty()) return WalkResult::interrupt();
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee) return WalkResult::advance();
      if (state.lookup(callee) == 1) {
        found = "@" + path.front();
        for (size_t i = 1; i < path.size(); ++i) found += " calls @" + path[i] + ",";
        found += (path.size() > 1 ? " which" : "") + std::string(" calls @") + callee.getSymName().str() +
                 " recursively (" + locationString(call.getLoc()) + "); kiln does not compile recursion";
        return WalkResult::interrupt();
      }
      if (!state.count(callee)) visit(callee);
      return found.empty() ? WalkResult::advance() : WalkResult::interrupt();
    });
    path.pop_back();
    state[f] = 2;
  };
  visit(root);
  return found;
}

}  // namespace kiln::lowering
