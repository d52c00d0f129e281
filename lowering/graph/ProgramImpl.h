// Internals shared by Program.cpp and Partition.cpp (not a public header).
#pragma once

#include "lowering/graph/Program.h"
#include "lowering/ir/IRText.h"
#include "lowering/ir/ThreadDiagnostics.h"
#include "lowering/pipelines/Pipelines.h"
#include "runtime/Error.h"
#include "runtime/Clock.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace kiln::lowering {
using namespace mlir;



inline std::string argumentName(func::FuncOp fn, unsigned i) {
  if (auto s = fn.getArgAttrOfType<StringAttr>(i, "kiln.name")) return s.str();
  if (auto path = fn.getArgAttrOfType<ArrayAttr>(i, "tf_saved_model.index_path"))
    if (!path.empty())
      if (auto s = dyn_cast<StringAttr>(path[0])) return s.str();
  if (auto entry = fn->getAttrOfType<DictionaryAttr>("tf.entry_function"))
    if (auto inputs = entry.getAs<StringAttr>("inputs")) {
      SmallVector<StringRef> names;
      inputs.getValue().split(names, ',');
      if (i < names.size()) return names[i].trim().str();
    }
  return "";
}

inline std::string resultName(func::FuncOp fn, unsigned i) {
  if (auto s = fn.getResultAttrOfType<StringAttr>(i, "kiln.name")) return s.str();
  if (auto path = fn.getResultAttrOfType<ArrayAttr>(i, "tf_saved_model.index_path"))
    if (!path.empty())
      if (auto s = dyn_cast<StringAttr>(path[0])) return s.str();
  if (auto entry = fn->getAttrOfType<DictionaryAttr>("tf.entry_function"))
    if (auto outputs = entry.getAs<StringAttr>("outputs")) {
      SmallVector<StringRef> names;
      outputs.getValue().split(names, ',');
      if (i < names.size()) return names[i].trim().str();
    }
  return "";
}

inline std::string stripAnchor(StringRef pipeline) {
  StringRef body = pipeline;
  if (body.consume_front("builtin.module(")) body = body.drop_back();
  return body.str();
}


struct SpecializedFunction::Impl {
  OwningOpRef<ModuleOp> module;
};


/// Input that would crash MLIR 22's parsers instead of being reported by
/// them (too deep, bad linalg index lists, bytecode that crashes its
/// reader), as an error naming where (ProgramLimits.cpp). `code`: text's
/// codeStretches (unused for bytecode).
llvm::Error refuseWhatCrashesTheParser(llvm::StringRef source, llvm::StringRef bufferName,
                                       llvm::ArrayRef<std::pair<size_t, size_t>> code);
/// The stretches [begin, end) of `text` outside string literals and `//`
/// comments, in order (ProgramLimits.cpp).
std::vector<std::pair<size_t, size_t>> codeStretches(llvm::StringRef text);
/// MLIR text whose float hex literals (`dense<"0x...">` of 256 bytes or
/// more, static tensor types) are `dense_resource<__kiln_hex_N>`
/// references instead, and whose big builtin resources hold no data, and
/// the decoded blobs for those keys; boolean hex literals of a byte per
/// element (MLIR after 22) packed as MLIR 22 reads them (HexLiterals.cpp).
struct LiftedText {
  std::string text;
  std::vector<std::pair<std::string, mlir::AsmResourceBlob>> blobs;
  /// Boolean literals in a newer MLIR's form (a byte per element)
  /// rewritten into MLIR 22's (bits).
  size_t rewrittenBooleans = 0;
  /// The blobs' data, still hex in the source (HexDecoding writes it):
  /// pieces of at most kDecodeChunk bytes.
  struct Decode {
    const char *hex;
    char *out;
    size_t bytes;
  };
  std::vector<Decode> decodes;
};
/// nullopt when the text has no such literal (or uses such keys itself).
/// `code`: source's codeStretches. The blobs are allocated, not yet
/// decoded: HexDecoding does that, while the text parses.
std::optional<LiftedText> liftHexLiterals(llvm::StringRef source, llvm::ArrayRef<std::pair<size_t, size_t>> code);
/// Decodes a LiftedText's blobs from the source's hex (which must outlive
/// it) on `pool`'s threads, started at construction (on the calling thread
/// alone without a pool); wait() lends the calling thread to what is left
/// and says whether every digit was one.
class HexDecoding {
public:
  HexDecoding(const LiftedText &lifted, llvm::ThreadPoolInterface *pool);
  HexDecoding(const HexDecoding &) = delete;
  HexDecoding &operator=(const HexDecoding &) = delete;
  ~HexDecoding() { wait(); }
  bool wait();

private:
  void work();
  const std::vector<LiftedText::Decode> &decodes_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> bad_{false};
  std::unique_ptr<llvm::ThreadPoolTaskGroup> group_;
};
/// "" if no call reachable from `root` recurses, else the cycle
/// (ProgramLimits.cpp).
std::string recursion(ModuleOp module, func::FuncOp root);

struct Program::Impl {
  std::shared_ptr<MLIRContext> ctx;
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module;
  std::vector<FunctionSignature> functions;
  /// Exclusive for everything that reads or changes the module, the maps
  /// below or the context's loaded dialects; lowerings of specialized
  /// functions (their own modules) share it once their pipeline is primed
  /// (LoweringLock).
  std::shared_mutex mu;
  std::mutex diagnosticsMu;                       // ThreadDiagnostics' printing
  llvm::DenseMap<const void *, Tensor> weights;  // by attribute identity
  std::atomic<uint64_t> pipelineRuns{0};          // specializations + lowerings
  std::atomic<bool> cpuPrimed{false}, gpuPrimed{false};  // a lowering through that pipeline succeeded
  llvm::StringMap<std::string> canonicalGraphs;   // by function (the module never changes)
  /// The module with its weights hoisted in the plain layouts (no layout
  /// flag set), as canonicalGraph made it, by function: the first
  /// specialization of that function takes it (a kernel plan's, whose
  /// layouts are plain, instead of cloning and hoisting again); dropped
  /// when the function's weights are found without one (Program::weights:
  /// code from a cache).
  llvm::StringMap<OwningOpRef<ModuleOp>> hoistedPlain;
  std::string rewrites;                           // what the load-time graph rewrites did
  StageTimes loadTimes;                           // Program::loadTimes

  /// The lock a lowering holds. The first lowering through a pipeline runs
  /// alone: its pass managers load every dialect their passes need into the
  /// context. After it, a lowering only creates IR in its own module and
  /// reads the context's registries, which a threaded MLIRContext allows from
  /// several threads at once: lowerings share the lock (the JIT compiles a
  /// model's kernels in parallel; before, MLIR's half of every compile ran
  /// one at a time). Always exclusive on a context without threading.
  class LoweringLock {
  public:
    LoweringLock(Impl &impl, std::atomic<bool> &primed) : primed_(primed) {
      if (impl.ctx->isMultithreadingEnabled() && primed.load(std::memory_order_acquire))
        shared_ = std::shared_lock<std::shared_mutex>(impl.mu);
      else
        exclusive_ = std::unique_lock<std::shared_mutex>(impl.mu);
    }
    /// The pipeline ran to its end: later lowerings may share.
    void succeeded() {
      if (exclusive_.owns_lock()) primed_.store(true, std::memory_order_release);
    }

  private:
    std::atomic<bool> &primed_;
    std::shared_lock<std::shared_mutex> shared_;
    std::unique_lock<std::shared_mutex> exclusive_;
  };

  /// Runs `body` with MLIR diagnostics captured; on failure the error says
  /// `what` failed and lists the diagnostics with their source locations.
  /// The error's Status::location is the first error diagnostic's.
  template <typename F> llvm::Error diagnose(ErrorCode code, llvm::StringRef what, F &&body) {
    std::string text, firstLocation;
    llvm::raw_string_ostream os(text);
    LogicalResult result = failure();
    {
      ThreadDiagnostics handler(sourceMgr, diagnosticsMu, ctx.get(), os, firstLocation);
      result = body();
    }
    if (succeeded(result)) return llvm::Error::success();
    std::string msg = text;
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    if (msg.empty()) msg = "(no diagnostic was emitted)";
    return errorAt(code, firstLocation, "%s:\n%s", what.str().c_str(), msg.c_str());
  }

  /// The MLIR of `fn`, or an error when partitioning or a lowering already
  /// consumed it.
  static llvm::Expected<ModuleOp> unloweredModule(SpecializedFunction &fn) {
    if (!fn.impl || !fn.impl->module)
      return error(ErrorCode::kInternal, "@%s was already lowered", fn.function.c_str());
    return *fn.impl->module;
  }

  /// Runs `stages` on `module` (the specialized `fn`) in order, timing each
  /// into `times`; with `dumpDir`, writes the IR after each stage there as
  /// <fn>.<k>.<stage>.mlir (and the input as <fn>.0.input.mlir); with
  /// `dumpEveryPass`, also the module after each pass that changed it, in
  /// <fn>.<k>.<stage>.passes/. Caller holds `mu` (shared or exclusive).
  llvm::Error runStages(ModuleOp module, llvm::StringRef fn, const std::vector<PipelineStage> &stages,
                        StageTimes &times, llvm::StringRef dumpDir, bool dumpEveryPass = false);

  llvm::Expected<Tensor> weightTensor(ElementsAttr value, const TensorType &type);
  /// After `module` is set: rejects dialects kiln does not lower and reads
  /// the public functions' signatures.
  llvm::Error import(llvm::StringRef bufferName);
};


}  // namespace kiln::lowering
