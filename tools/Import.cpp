// `kiln import`: exporters' formats to the MLIR kiln loads, through
// torch-mlir's tools (optional Python dependencies, found, never required):
//
//   model.onnx -> [shape computations folded: fold_onnx_shapes.py, with the
//                 python beside the tools, where it has `onnx`]
//              -> torch-mlir-import-onnx -> torch-mlir-opt
//                 --torch-onnx-to-torch-backend-pipeline
//                 --torch-backend-to-tosa-backend-pipeline -> model.mlir
//                 (or, where that fails, e.g. on dynamic dims,
//                 --torch-backend-to-linalg-on-tensors-backend-pipeline)
//   model.pt2  -> python: torch.export.load + torch_mlir.fx.export_and_import
//                 (output_type="tosa") -> model.mlir
//
// The tools are looked for in $KILN_IMPORT_TOOLS (a directory, e.g. a
// virtual environment's bin/), then on $PATH, then in the environment
// bench/peers/setup.sh creates. The result is loaded once to check that
// kiln accepts it; `.mlirbc` outputs are written as bytecode.
#include "tools/Import.h"
#include "tools/FoldOnnxShapes.h"

#include "api/Kiln.h"
#include "runtime/FileIO.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>
#include <optional>

namespace kiln::tools {
namespace {

/// Where to look for the exporters' tools, in order.
std::vector<std::string> searchDirs() {
  std::vector<std::string> dirs;
  if (const char *d = std::getenv("KILN_IMPORT_TOOLS"); d && *d) dirs.push_back(d);
  const char *path = std::getenv("PATH");
  if (path) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(path).split(parts, ':', -1, false);
    for (llvm::StringRef p : parts) dirs.push_back(p.str());
  }
  std::string venv;
  if (const char *v = std::getenv("KILN_PEERS_VENV"); v && *v) venv = v;
  else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) venv = std::string(x) + "/kiln/peers-venv";
  else if (const char *h = std::getenv("HOME"); h && *h) venv = std::string(h) + "/.cache/kiln/peers-venv";
  if (!venv.empty()) dirs.push_back(venv + "/bin");
  return dirs;
}

std::optional<std::string> findTool(llvm::StringRef name, const std::vector<std::string> &dirs) {
  std::vector<llvm::StringRef> refs(dirs.begin(), dirs.end());
  auto found = llvm::sys::findProgramByName(name, refs);
  if (found) return *found;
  return std::nullopt;
}

/// The python3 beside `tool` (in the same virtual environment, so with its
/// packages: torch and torch-mlir, onnx), else the first in `dirs`.
std::optional<std::string> pythonBeside(const std::optional<std::string> &tool, const std::vector<std::string> &dirs) {
  if (tool)
    if (auto python = findTool("python3", {llvm::sys::path::parent_path(*tool).str()})) return python;
  return findTool("python3", dirs);
}

std::string missing(llvm::StringRef what, const std::vector<std::string> &dirs) {
  std::string venv = dirs.empty() || !llvm::StringRef(dirs.back()).ends_with("peers-venv/bin") ? "" : dirs.back();
  return "kiln import needs " + what.str() + " (PyPI wheel torch-mlir; bench/peers/setup.sh installs it), " +
         "which was not found in $KILN_IMPORT_TOOLS or $PATH" + (venv.empty() ? "" : " or " + venv);
}

/// Runs `args`; on failure an error with the command's stderr.
llvm::Error run(const std::vector<std::string> &args, unsigned timeoutSeconds) {
  llvm::SmallString<128> errFile;
  if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-import", "err", errFile))
    return llvm::createStringError(ec, "cannot create a temporary file: %s", ec.message().c_str());
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, std::nullopt, llvm::StringRef(errFile)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(args[0], argv, std::nullopt, redirects, timeoutSeconds, 0, &execError);
  std::string stderrText;
  if (auto buf = llvm::MemoryBuffer::getFile(errFile)) stderrText = (*buf)->getBuffer().str();
  llvm::sys::fs::remove(errFile);
  if (rc == 0) return llvm::Error::success();
  while (!stderrText.empty() && (stderrText.back() == '\n' || stderrText.back() == ' ')) stderrText.pop_back();
  if (stderrText.size() > 4000) stderrText = "..." + stderrText.substr(stderrText.size() - 4000);
  std::string why = rc == -2 ? "timed out after " + std::to_string(timeoutSeconds) + " s"
                  : rc < 0   ? "could not run: " + execError
                             : "exit status " + std::to_string(rc);
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s failed (%s)%s%s",
                                 llvm::sys::path::filename(args[0]).str().c_str(), why.c_str(),
                                 stderrText.empty() ? "" : ":\n", stderrText.c_str());
}

}  // namespace

llvm::Expected<ImportResult> importModel(const ImportOptions &options) {
  llvm::StringRef input = options.input;
  if (!llvm::sys::fs::is_regular_file(input))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot read '%s': not a regular file",
                                   input.str().c_str());
  llvm::StringRef ext = llvm::sys::path::extension(input);
  std::string output = options.output;
  if (output.empty())
    output = (llvm::sys::path::parent_path(input).empty() ? "" : llvm::sys::path::parent_path(input).str() + "/") +
             llvm::sys::path::stem(input).str() + ".mlir";
  bool bytecode = llvm::StringRef(output).ends_with(".mlirbc");
  std::vector<std::string> dirs = searchDirs();
  ImportResult result;
  result.output = output;
  if (ext != ".onnx" && ext != ".pt2")
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot import '%s': kiln imports .onnx and .pt2 (torch.export) files; "
                                   "MLIR files (.mlir, .mlirbc) load directly",
                                   input.str().c_str());
  Existing existing = options.force ? Existing::kReplace : Existing::kRefuse;
  struct stat st;
  if (!options.force && ::lstat(output.c_str(), &st) == 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%s' already exists; kiln import does not overwrite it (--force replaces it)",
                                   output.c_str());
  // The tools write a fresh file beside the output, which is renamed over
  // the name only once kiln has loaded it.
  std::string finalOutput = output;
  auto tmpOutput = createTemporaryBeside(output);
  if (!tmpOutput) return tmpOutput.takeError();
  output = *tmpOutput;
  llvm::scope_exit removeTmpOutput([&] { ::unlink(output.c_str()); });

  if (ext == ".onnx") {
    auto importer = findTool("torch-mlir-import-onnx", dirs);
    if (!importer) return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s",
                                                  missing("torch-mlir-import-onnx", dirs).c_str());
    auto opt = findTool("torch-mlir-opt", dirs);
    if (!opt) return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s", missing("torch-mlir-opt", dirs).c_str());
    llvm::SmallString<128> torchFile;
    if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-import", "torch.mlir", torchFile))
      return llvm::createStringError(ec, "cannot create a temporary file: %s", ec.message().c_str());
    llvm::scope_exit cleanup([&] { llvm::sys::fs::remove(torchFile); });
    // The importer's temporaries go to the system's temporary directory,
    // not next to the model.
    llvm::SmallString<128> tempDir;
    if (auto ec = llvm::sys::fs::createUniqueDirectory("kiln-import", tempDir))
      return llvm::createStringError(ec, "cannot create a temporary directory: %s", ec.message().c_str());
    llvm::scope_exit removeTemps([&] { llvm::sys::fs::remove_directories(tempDir); });
    // Shape computations folded first (fold_onnx_shapes.py): a Reshape whose
    // target is computed from shapes leaves torch-mlir's importer without
    // the shapes of everything after it (ViT-B/16's nn.MultiheadAttention:
    // `onnx.Transpose` on `!torch.vtensor<[],f32>` could not be lowered).
    // Without a python that has `onnx`, or where folding fails, the file is
    // imported as it is and the route says why.
    std::string source = input.str(), folding;
    if (std::optional<std::string> python = pythonBeside(importer, dirs)) {
      std::string folded = (tempDir + "/folded.onnx").str(), report = (tempDir + "/folded.txt").str();
      if (auto err = run({*python, "-c", kFoldOnnxShapesScript, source, folded, report}, options.timeoutSeconds)) {
        std::string text = llvm::toString(std::move(err));
        llvm::StringRef why = llvm::StringRef(text).rtrim("\n");
        why = why.substr(why.rfind('\n') + 1);  // the last line (npos + 1: all of it)
        folding = "shape computations not folded (" + why.take_front(160).str() + ")";
      } else if (auto buf = llvm::MemoryBuffer::getFile(report)) {
        long long n = 0;
        if (!llvm::StringRef((*buf)->getBuffer()).trim().getAsInteger(10, n) && n > 0 &&
            llvm::sys::fs::is_regular_file(folded)) {
          source = folded;
          folding = std::to_string(n) + " shape computations folded";
        }
      }
    }
    if (auto err = run({*importer, source, "--temp-dir", tempDir.str().str(), "-o", torchFile.str().str()},
                       options.timeoutSeconds))
      return std::move(err);
    auto lower = [&](const char *backend) {
      std::vector<std::string> args = {*opt, torchFile.str().str(), "--torch-onnx-to-torch-backend-pipeline",
                                       backend, "-o", output};
      if (bytecode) args.push_back("--emit-bytecode");
      return run(args, options.timeoutSeconds);
    };
    std::string front = folding.empty() ? "" : "ONNX, " + folding + " -> ";
    result.route = front + "torch-mlir ONNX importer -> torch backend -> TOSA";
    // torch-mlir's TOSA lowering takes static shapes only (a dynamic
    // sequence length fails on the first torch.aten.size.int); its
    // linalg-on-tensors lowering takes dynamic dims, and kiln raises that
    // to TOSA per call shape (kiln-raise-linalg after specialization).
    if (auto err = lower("--torch-backend-to-tosa-backend-pipeline")) {
      std::string tosaError = llvm::toString(std::move(err));
      if (auto err2 = lower("--torch-backend-to-linalg-on-tensors-backend-pipeline")) {
        // (Where folding was skipped, that may be why: say so.)
        std::string note = source == input && !folding.empty() ? "\n(the ONNX file's " + folding + ")" : "";
        return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s\n(linalg-on-tensors, tried next: %s)%s",
                                       tosaError.c_str(), llvm::toString(std::move(err2)).c_str(), note.c_str());
      }
      size_t at = tosaError.find("error: ");  // the diagnostic's first line
      std::string why = at == std::string::npos ? tosaError : tosaError.substr(at + 7);
      why = why.substr(0, std::min<size_t>(why.find('\n'), 160));
      result.route = front + "torch-mlir ONNX importer -> torch backend -> linalg on tensors (the TOSA lowering failed: " +
                     why + ")";
    }
  } else if (ext == ".pt2") {
    // The python next to torch-mlir's tools has torch and torch_mlir.
    std::optional<std::string> python = pythonBeside(findTool("torch-mlir-opt", dirs), dirs);
    if (!python) return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s", missing("python3 with torch and torch-mlir", dirs).c_str());
    // Bytecode goes through torch-mlir-opt; text is written directly.
    std::string script =
        "import sys, torch\n"
        "from torch_mlir import fx\n"
        "ep = torch.export.load(sys.argv[1])\n"
        "m = fx.export_and_import(ep, output_type='tosa', func_name='main')\n"
        "open(sys.argv[2], 'w').write(str(m))\n";
    llvm::SmallString<128> textFile(output);
    std::optional<llvm::SmallString<128>> tmp;
    if (bytecode) {
      tmp.emplace();
      if (auto ec = llvm::sys::fs::createTemporaryFile("kiln-import", "mlir", *tmp))
        return llvm::createStringError(ec, "cannot create a temporary file: %s", ec.message().c_str());
      textFile = *tmp;
    }
    llvm::scope_exit cleanup([&] {
      if (tmp) llvm::sys::fs::remove(*tmp);
    });
    if (auto err = run({*python, "-c", script, input.str(), textFile.str().str()}, options.timeoutSeconds))
      return std::move(err);
    if (bytecode) {
      auto opt = findTool("torch-mlir-opt", dirs);
      if (!opt) return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s", missing("torch-mlir-opt", dirs).c_str());
      if (auto err = run({*opt, textFile.str().str(), "--emit-bytecode", "-o", output}, options.timeoutSeconds))
        return std::move(err);
    }
    result.route = "torch.export program -> torch-mlir FX importer -> TOSA";
  } else {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot import '%s': kiln imports .onnx and .pt2 (torch.export) files; "
                                   "MLIR files (.mlir, .mlirbc) load directly",
                                   input.str().c_str());
  }

  // What kiln makes of it: load once, list the functions.
  RuntimeOptions ro;
  ro.cacheMode = CacheMode::kOff;
  auto rt = Runtime::create(ro);
  if (!rt) return rt.takeError();
  auto module = (*rt)->loadModuleFromFile(output);
  if (!module)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "imported '%s', but kiln cannot load the result: %s",
                                   input.str().c_str(), llvm::toString(module.takeError()).c_str());
  if (auto err = renameReplacing(output, finalOutput, existing)) return std::move(err);
  for (const FunctionSignature &f : (*module)->functions()) {
    std::string sig = "@" + f.name + "(";
    for (size_t i = 0; i < f.args.size(); ++i) sig += (i ? ", " : "") + f.args[i].type.str();
    sig += ") -> (";
    for (size_t i = 0; i < f.results.size(); ++i) sig += (i ? ", " : "") + f.results[i].str();
    result.functions.push_back(sig + ")");
  }
  result.graphRewrites = (*module)->graphRewrites();
  return result;
}

}  // namespace kiln::tools
