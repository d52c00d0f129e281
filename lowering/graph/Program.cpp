// Loading a program: parsing MLIR text or bytecode (after the checks in
// ProgramLimits.cpp), verifying it, refusing dialects kiln does not lower,
// the graph rewrites that hold for every specialization, and the public
// functions' signatures.
#include "lowering/graph/Program.h"
#include "runtime/FileIO.h"
#include "runtime/Error.h"
#include "lowering/graph/ProgramImpl.h"
#include "lowering/graph/BatchDimension.h"
#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/ThreadPool.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"
#include "llvm/IR/Module.h"
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
void registerKilnPassesAndPipelines() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerKilnStagePasses();
    registerKilnGraphPasses();
  });
}


namespace {
/// MLIR's threads for every Program's contexts (nested pass pipelines,
/// verification), made as work needs them, at most one per core. Never
/// destroyed: a context may outlive static destruction.
llvm::ThreadPoolInterface &mlirThreadPool() {
  static auto *pool = new llvm::DefaultThreadPool();
  return *pool;
}
}  // namespace

const std::vector<std::string> &Program::supportedDialects() {
  static const std::vector<std::string> d = {"builtin", "func",   "tosa", "linalg",
                                             "arith",   "math",   "tensor", "scf"};
  return d;
}

SpecializedFunction::~SpecializedFunction() = default;

std::string SpecializedFunction::printGraph() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (impl && impl->module)
    impl->module->print(os, OpPrintingFlags().elideLargeElementsAttrs(16));
  return s;
}

Program::Program() : impl(std::make_unique<Impl>()) {}
Program::~Program() {
  // The module must die before its context.
  if (impl) impl->module = nullptr;
}

llvm::Expected<std::unique_ptr<Program>> Program::parseFile(llvm::StringRef path) {
  auto t0 = Clock::now();
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/true);
  if (!buf)
    return error(ErrorCode::kInvalidArgument, "cannot read MLIR file '%s': %s",
                                   path.str().c_str(), buf.getError().message().c_str());
  double readMs = msSince(t0);
  auto p = parse((*buf)->getBuffer(), path);
  if (p) (*p)->impl->loadTimes.insert((*p)->impl->loadTimes.begin(), StageTime{"read", readMs});
  // Nothing reads the file's mapping once it is parsed (the source manager
  // holds a copy of what is left of the text), and unmapping it walks its
  // page tables: ~3 ms of RegNetY-400MF's 35 MB text, on the pool instead
  // of before the load returns.
  std::shared_ptr<llvm::MemoryBuffer> file(std::move(*buf));
  mlirThreadPool().async([file = std::move(file)]() mutable { file.reset(); });
  return p;
}

llvm::Expected<std::unique_ptr<Program>> Program::parse(llvm::StringRef source,
                                                         llvm::StringRef bufferName) {
  registerKilnPassesAndPipelines();
  // `lift`: big hex literals decoded by kiln (HexLiterals.cpp), not by
  // MLIR's lexer; a digit that is not one makes `badDigits` true and the
  // text is parsed again as it was, for MLIR's parser to name the literal
  // and its line.
  auto load = [&](bool lift, bool &badDigits) -> llvm::Expected<std::unique_ptr<Program>> {
    StageTimes times;
    auto t0 = Clock::now();
    auto lap = [&](const char *stage) {
      times.push_back({stage, msSince(t0)});
      t0 = Clock::now();
    };
    // The text's stretches outside string literals serve both (read once).
    std::optional<LiftedText> lifted;
    std::vector<std::pair<size_t, size_t>> code;
    if (!isBytecode(llvm::MemoryBufferRef(source, bufferName))) {
      code = codeStretches(source);
      if (lift && (lifted = liftHexLiterals(source, code))) code = codeStretches(lifted->text);
    }
    // The literals decode on the pool while this thread parses the text.
    std::optional<HexDecoding> decoding;
    if (lifted) decoding.emplace(*lifted, &mlirThreadPool());
    llvm::StringRef text = lifted ? llvm::StringRef(lifted->text) : source;
    lap("literals");
    if (auto err = refuseWhatCrashesTheParser(text, bufferName, code)) return std::move(err);
    std::unique_ptr<Program> p(new Program());
    Impl &I = *p->impl;
    DialectRegistry registry;
    registerKilnDialects(registry);
    // Threaded (the JIT lowers a model's kernels in parallel: LoweringLock),
    // on one pool for every Program: a context of its own would keep a thread
    // per core for each loaded model.
    I.ctx = std::make_shared<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
    I.ctx->setThreadPool(mlirThreadPool());
    I.sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, bufferName), llvm::SMLoc());
    if (auto err = I.diagnose(ErrorCode::kInvalidArgument, "cannot load MLIR from '" + bufferName.str() + "'", [&] {
          // Verified once the lifted blobs are in place (the parser declares
          // their keys, empty, as it meets them).
          I.module = parseSourceFile<ModuleOp>(I.sourceMgr, ParserConfig(I.ctx.get(), /*verifyAfterParse=*/false));
          if (!I.module) return failure();
          lap("parse");
          if (lifted) {
            if (!decoding->wait()) {
              badDigits = true;
              return failure();
            }
            lap("literals (rest)");
            DialectResourceBlobManager &blobs =
                DenseResourceElementsHandle::getManagerInterface(I.ctx.get()).getBlobManager();
            // A dense literal's key was declared empty; a resource's holds
            // an empty blob of its alignment.
            for (auto &[key, blob] : lifted->blobs)
              if (DialectResourceBlobManager::BlobEntry *entry = blobs.lookup(key);
                  entry && (!entry->getBlob() || entry->getBlob()->getData().empty()))
                blobs.update(key, std::move(blob));
          }
          LogicalResult verified = verify(*I.module);
          lap("verify");
          return verified;
        }))
      return std::move(err);
    I.loadTimes = std::move(times);
    if (auto err = I.import(bufferName)) return std::move(err);
    return std::move(p);
  };
  bool badDigits = false;
  auto p = load(/*lift=*/true, badDigits);
  if (!badDigits) return p;
  if (!p) llvm::consumeError(p.takeError());
  return load(/*lift=*/false, badDigits);
}

/// Ops of every function by name, constants and returns left out.
static std::map<std::string, int64_t> opCounts(ModuleOp module) {
  std::map<std::string, int64_t> counts;
  module.walk([&](Operation *op) {
    if (isa<ModuleOp, func::FuncOp, func::ReturnOp>(op) || op->hasTrait<OpTrait::ConstantLike>()) return;
    ++counts[op->getName().getStringRef().str()];
  });
  return counts;
}

/// "558 -> 352 ops in 41.2 ms (tosa.sub 53 -> 0, ...)": what the load-time
/// graph rewrites changed.
static std::string describeRewrites(const std::map<std::string, int64_t> &before,
                                    const std::map<std::string, int64_t> &after, double ms) {
  int64_t total[2] = {0, 0};
  std::string changes;
  std::set<std::string> names;
  for (auto &[n, c] : before) names.insert(n), total[0] += c;
  for (auto &[n, c] : after) names.insert(n), total[1] += c;
  for (const std::string &n : names) {
    auto b = before.find(n), a = after.find(n);
    int64_t cb = b == before.end() ? 0 : b->second, ca = a == after.end() ? 0 : a->second;
    if (cb != ca) changes += (changes.empty() ? "" : ", ") + n + " " + std::to_string(cb) + " -> " + std::to_string(ca);
  }
  return std::to_string(total[0]) + " -> " + std::to_string(total[1]) + " ops in " +
         llvm::formatv("{0:f1}", ms).str() + " ms" + (changes.empty() ? "" : " (" + changes + ")");
}

/// Rank-0 dense_resource constants become plain dense constants holding the
/// same bytes. MLIR 22's memref.global lowering reads a rank-0 initial
/// value's element through ElementsAttr iteration, which dense_resource does
/// not provide: such a constant left in generated code (a callee's, which
/// weight hoisting does not reach) stopped the process with SIGTRAP. A blob
/// with no data or the wrong size is left for the weights' checks to name.
static void inlineScalarBlobs(ModuleOp module) {
  auto plain = [](ElementsAttr value) -> DenseElementsAttr {
    auto r = dyn_cast_or_null<DenseResourceElementsAttr>(value);
    if (!r || r.getType().getRank() != 0) return {};
    AsmResourceBlob *blob = r.getRawHandle().getBlob();
    Type et = r.getType().getElementType();
    if (!blob || !et.isIntOrIndexOrFloat()) return {};
    ArrayRef<char> bytes = blob->getData();
    size_t width = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
    if (bytes.size() != width) return {};
    if (et.isInteger(1))
      return DenseElementsAttr::get(r.getType(), bytes[0] != 0);
    return DenseElementsAttr::getFromRawBuffer(r.getType(), bytes);
  };
  module.walk([&](Operation *op) {
    if (auto c = dyn_cast<tosa::ConstOp>(op)) {
      if (DenseElementsAttr d = plain(c.getValuesAttr())) c.setValuesAttr(d);
    } else if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (DenseElementsAttr d = plain(dyn_cast<ElementsAttr>(c.getValue()))) c.setValueAttr(d);
    }
  });
}

llvm::Error Program::Impl::import(llvm::StringRef bufferName) {
  Impl &I = *this;
  // Only dialects kiln lowers may appear.
  if (auto err = I.diagnose(ErrorCode::kUnsupported, "unsupported operation in '" + bufferName.str() + "'", [&] {
        WalkResult r = I.module->walk([&](Operation *op) {
          StringRef ns = op->getName().getDialectNamespace();
          if (ns.empty()) ns = "builtin";
          if (llvm::is_contained(supportedDialects(), ns.str())) return WalkResult::advance();
          // Exporters' checks: a fault at run time when false (kiln-guard-traps).
          if (isa<cf::AssertOp>(op)) return WalkResult::advance();
          op->emitError() << "op '" << op->getName() << "' is from dialect '" << ns
                          << "', which kiln does not compile (supported: "
                          << llvm::join(supportedDialects(), ", ") << "; and cf.assert)";
          return WalkResult::interrupt();
        });
        return failure(r.wasInterrupted());
      }))
    return err;

  inlineScalarBlobs(*I.module);

  // Graph rewrites that hold for every specialization run once, at load:
  // what the weights' plan (Program::weights) sees is what compiles.
  auto t0 = Clock::now();
  std::map<std::string, int64_t> before = opCounts(*I.module);
  if (auto err = I.diagnose(ErrorCode::kInvalidArgument, "graph rewrites failed on '" + bufferName.str() + "'", [&] {
        // Each pass timed on its own (loadTimes). Verified once after the
        // three, not after each: a few ms of every load (RegNet-400MF's
        // rewrites 24-29 -> 21-23 ms); a pass that broke the IR is still
        // caught here, before anything compiles.
        auto run = [&](const char *stage, std::unique_ptr<Pass> pass) {
          auto start = Clock::now();
          PassManager pm(I.ctx.get());
          pm.enableVerifier(false);
          pm.addPass(std::move(pass));
          LogicalResult r = pm.run(*I.module);
          I.loadTimes.push_back({stage, msSince(start)});
          return r;
        };
        if (failed(run("raise-linalg", createKilnRaiseLinalg())) ||
            failed(run("propagate-transposes", createKilnPropagateTransposes())))
          return failure();
        // KILN_FOLD_CONSTANTS=0 keeps constant subgraphs as exported (to
        // compare, or to rule the folding out when a result looks wrong).
        const char *fold = std::getenv("KILN_FOLD_CONSTANTS");
        if ((!fold || std::string(fold) != "0") && failed(run("fold-constants", createKilnFoldConstants())))
          return failure();
        auto start = Clock::now();
        LogicalResult verified = verify(*I.module);
        I.loadTimes.push_back({"verify rewrites", msSince(start)});
        return verified;
      }))
    return err;
  I.rewrites = describeRewrites(before, opCounts(*I.module), msSince(t0));

  for (auto fn : I.module->getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal()) continue;
    FunctionSignature sig;
    sig.name = fn.getSymName().str();
    sig.location = locationString(fn.getLoc());
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      std::string why;
      auto t = toTensorType(fn.getArgumentTypes()[i], why);
      if (!t && sig.unsupported.empty())
        sig.unsupported = "argument " + std::to_string(i) + ": " + why;
      if (t && t->isStatic() && t->byteSize() == SIZE_MAX && sig.unsupported.empty())
        sig.unsupported = "argument " + std::to_string(i) + ": tensor<" + t->str() +
                          "> has more bytes than 64 bits can count";
      sig.args.push_back({argumentName(fn, i), t.value_or(TensorType())});
    }
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      std::string why;
      auto t = toTensorType(fn.getResultTypes()[i], why);
      if (!t && sig.unsupported.empty())
        sig.unsupported = "result " + std::to_string(i) + ": " + why;
      if (t && t->isStatic() && t->byteSize() == SIZE_MAX && sig.unsupported.empty())
        sig.unsupported = "result " + std::to_string(i) + ": tensor<" + t->str() +
                          "> has more bytes than 64 bits can count";
      sig.results.push_back(t.value_or(TensorType()));
      sig.resultNames.push_back(resultName(fn, i));
    }
    if (sig.unsupported.empty()) sig.unsupported = recursion(*I.module, fn);
    if (sig.unsupported.empty()) sig.batch = analyzeBatchDimension(fn);
    I.functions.push_back(std::move(sig));
  }
  // A module with nothing to call (an empty file, only private functions)
  // is refused here, not at its first call.
  if (I.functions.empty())
    return error(ErrorCode::kInvalidArgument,
                 "'%s' has no public function to call (kiln calls a module's public func.func ops)",
                 bufferName.str().c_str());
  return llvm::Error::success();
}

const std::vector<FunctionSignature> &Program::functions() const { return impl->functions; }

const std::string &Program::graphRewrites() const { return impl->rewrites; }

const StageTimes &Program::loadTimes() const { return impl->loadTimes; }

const FunctionSignature *Program::lookup(llvm::StringRef name) const {
  for (const FunctionSignature &f : impl->functions)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace kiln::lowering
