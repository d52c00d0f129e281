#include "lowering/Program.h"
#include "runtime/FileIO.h"
#include "runtime/Error.h"
#include "lowering/ProgramImpl.h"
#include "lowering/Passes.h"
#include "lowering/Pipelines.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/MLIRContext.h"
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
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/true);
  if (!buf)
    return error(ErrorCode::kInvalidArgument, "cannot read MLIR file '%s': %s",
                                   path.str().c_str(), buf.getError().message().c_str());
  return parse((*buf)->getBuffer(), path);
}

/// MLIR's parser recurses once per nested bracket, brace or region: a text
/// nested deeper than this would overflow its stack (a crash, not an
/// error), so such input is refused before parsing.
static constexpr int kMaxNesting = 1000;

/// "" when `text` nests (), [] and {} at most kMaxNesting deep, else where
/// it goes deeper ("line 3, column 9"). String literals and comments do not count.
static std::string tooDeep(llvm::StringRef text) {
  int depth = 0, line = 1, column = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      continue;
    }
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t eol = text.find('\n', i);
      i = (eol == llvm::StringRef::npos ? text.size() : eol) - 1;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting) return "line " + std::to_string(line) + ", column " + std::to_string(column);
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
static std::string badIndexList(llvm::StringRef text) {
  for (llvm::StringRef key : {"dimensions", "permutation"}) {
    for (size_t at = text.find(key); at != llvm::StringRef::npos; at = text.find(key, at + 1)) {
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
        return "`" + text.slice(at, std::min(text.size(), close == llvm::StringRef::npos ? at + 40 : close + 1)).str() +
               "` at line " + std::to_string(line);
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

/// An error for input that would crash MLIR 22's parsers instead of being
/// reported by them (see tooDeep, badIndexList, bytecodeReaderCrashes).
static llvm::Error refuseWhatCrashesTheParser(llvm::StringRef source, llvm::StringRef bufferName) {
  if (isBytecode(llvm::MemoryBufferRef(source, bufferName))) {
    if (std::string how = bytecodeReaderCrashes(source); !how.empty())
      return error(ErrorCode::kInvalidArgument,
                   "cannot load MLIR bytecode from '%s': the file is damaged (MLIR's bytecode reader, run on it in a "
                   "separate process, crashed: %s)",
                   bufferName.str().c_str(), how.c_str());
    return llvm::Error::success();
  }
  if (std::string where = tooDeep(source); !where.empty())
    return error(ErrorCode::kInvalidArgument,
                 "cannot load MLIR from '%s': it nests brackets, braces or regions more than %d deep (at %s), "
                 "deeper than MLIR's parser can take",
                 bufferName.str().c_str(), kMaxNesting, where.c_str());
  if (std::string bad = badIndexList(source); !bad.empty())
    return error(ErrorCode::kInvalidArgument,
                 "cannot load MLIR from '%s': %s must list integers (MLIR 22's linalg parser would crash on it)",
                 bufferName.str().c_str(), bad.c_str());
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Program>> Program::parse(llvm::StringRef source,
                                                         llvm::StringRef bufferName) {
  registerKilnPassesAndPipelines();
  if (auto err = refuseWhatCrashesTheParser(source, bufferName)) return std::move(err);
  std::unique_ptr<Program> p(new Program());
  Impl &I = *p->impl;
  DialectRegistry registry;
  registerKilnDialects(registry);
  I.ctx = std::make_shared<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  I.sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source, bufferName),
                                 llvm::SMLoc());
  if (auto err = I.diagnose(ErrorCode::kInvalidArgument, "cannot load MLIR from '" + bufferName.str() + "'", [&] {
        I.module = parseSourceFile<ModuleOp>(I.sourceMgr, ParserConfig(I.ctx.get()));
        return success(bool(I.module));
      }))
    return std::move(err);
  if (auto err = I.import(bufferName)) return std::move(err);
  return std::move(p);
}

/// "" if no call reachable from `root` recurses, else the cycle
/// ("@a calls @b, which calls @a (file:line:col)"): generated code has no
/// stack bound, so recursion is refused at load.
static std::string recursion(ModuleOp module, func::FuncOp root) {
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
        PassManager pm(I.ctx.get());
        pm.addPass(createKilnPropagateTransposes());
        // KILN_FOLD_CONSTANTS=0 keeps constant subgraphs as exported (to
        // compare, or to rule the folding out when a result looks wrong).
        const char *fold = std::getenv("KILN_FOLD_CONSTANTS");
        if (!fold || std::string(fold) != "0") pm.addPass(createKilnFoldConstants());
        return pm.run(*I.module);
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

const FunctionSignature *Program::lookup(llvm::StringRef name) const {
  for (const FunctionSignature &f : impl->functions)
    if (f.name == name) return &f;
  return nullptr;
}

llvm::Expected<Tensor> Program::Impl::weightTensor(ElementsAttr value, const TensorType &type) {
  auto it = weights.find(value.getAsOpaquePointer());
  if (it != weights.end()) return it->second;
  size_t elemSize = dtypeSize(type.dtype);
  size_t bytes = type.byteSize();
  Tensor t;
  auto fromRaw = [&](const char *data, size_t size) -> llvm::Error {
    if (size != bytes)
      return error(ErrorCode::kInvalidArgument, "weight of type %s holds %zu bytes, expected %zu",
                                     type.str().c_str(), size, bytes);
    if (reinterpret_cast<uintptr_t>(data) % elemSize == 0) {  // zero-copy
      t = Tensor::wrap(type.dtype, type.shape, const_cast<char *>(data), ctx);
      return llvm::Error::success();
    }
    auto copy = Tensor::allocate(type.dtype, type.shape, "a weight");
    if (!copy) return copy.takeError();
    t = std::move(*copy);
    if (bytes) std::memcpy(t.rawData(), data, bytes);
    return llvm::Error::success();
  };
  if (auto r = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = r.getRawHandle().getBlob();
    if (!blob)
      return error(ErrorCode::kInvalidArgument, "dense_resource '%s' has no data in the module",
                                     r.getRawHandle().getKey().str().c_str());
    ArrayRef<char> data = blob->getData();
    if (auto err = fromRaw(data.data(), data.size())) return std::move(err);
  } else if (auto d = dyn_cast<DenseElementsAttr>(value)) {
    auto allocate = [&]() -> llvm::Error {
      auto a = Tensor::allocate(type.dtype, type.shape, "a constant");
      if (!a) return a.takeError();
      t = std::move(*a);
      return llvm::Error::success();
    };
    if (type.dtype == DType::i1) {
      if (auto err = allocate()) return std::move(err);
      uint8_t *out = t.data<uint8_t>();
      for (bool b : d.getValues<bool>()) *out++ = b;
    } else if (d.isSplat()) {
      ArrayRef<char> one = d.getRawData();
      if (auto err = allocate()) return std::move(err);
      for (int64_t i = 0; i < t.numElements(); ++i)
        std::memcpy(t.data<char>() + i * elemSize, one.data(), elemSize);
    } else {
      ArrayRef<char> data = d.getRawData();
      if (auto err = fromRaw(data.data(), data.size())) return std::move(err);
    }
  } else {
    return error(ErrorCode::kUnsupported, "unsupported constant attribute kind for a weight");
  }
  weights[value.getAsOpaquePointer()] = t;
  return t;
}

llvm::Expected<std::unique_ptr<SpecializedFunction>>
Program::specialize(llvm::StringRef function, llvm::ArrayRef<TensorType> inputs, StageTimes &times,
                    const WeightLayouts &layouts) {
  const FunctionSignature *sig = lookup(function);
  if (!sig) return noSuchFunction(function, impl->functions);
  if (auto err = checkInputs(*sig, inputs)) return std::move(err);

  std::lock_guard<std::mutex> lock(impl->mu);
  auto t0 = Clock::now();
  auto out = std::make_unique<SpecializedFunction>();
  out->impl = std::make_unique<SpecializedFunction::Impl>();
  out->function = function.str();
  out->inputTypes.assign(inputs.begin(), inputs.end());
  out->impl->module = impl->module->clone();
  ModuleOp module = *out->impl->module;

  ++impl->pipelineRuns;
  // Weights first, on the original graph: the same plan finds them again
  // without compiling (Program::weights), so cached code can be reused.
  if (auto err = impl->diagnose(ErrorCode::kInvalidArgument, "cannot hoist the weights of @" + function.str(), [&] {
        return hoistConstants(module, kDefaultHoistMinElements, layouts);
      }))
    return std::move(err);
  auto hoisted = module.lookupSymbol<func::FuncOp>(function);
  std::string shapes;
  for (unsigned i = 0; i < hoisted.getNumArguments(); ++i) {
    auto argType = cast<RankedTensorType>(hoisted.getArgumentTypes()[i]);
    std::string dims = i < inputs.size() ? shapeToString(inputs[i].shape)
                                         : shapeToString(argType.getShape());
    shapes += (i ? "," : "") + dims + (dims.empty() ? "" : "x") + typeString(argType.getElementType());
  }
  KilnSpecializeShapesOptions opts;
  opts.function = function.str();
  opts.shapes = shapes;
  if (auto err = impl->diagnose(ErrorCode::kInvalidArgument,
          "cannot specialize @" + function.str() + " to (" + shapes + ")", [&] {
            PassManager pm(impl->ctx.get());
            pm.addPass(createKilnSpecializeShapes(opts));
            return pm.run(module);
          }))
    return std::move(err);

  auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
  for (unsigned i = inputs.size(); i < fn.getNumArguments(); ++i) {
    auto value = fn.getArgAttrOfType<ElementsAttr>(i, kWeightAttrName);
    std::string why;
    auto type = toTensorType(fn.getArgumentTypes()[i], why);
    if (!value || !type)
      return error(ErrorCode::kInvalidArgument, "@%s: weight argument %u is malformed: %s",
                                     function.str().c_str(), i, why.c_str());
    auto tensor = impl->weightTensor(value, *type);
    if (!tensor)
      return error(ErrorCode::kInvalidArgument, "@%s: weight at %s: %s", function.str().c_str(),
                                     locationString(fn.getArgument(i).getLoc()).c_str(),
                                     llvm::toString(tensor.takeError()).c_str());
    out->weights.push_back(*tensor);
    fn.removeArgAttr(i, kWeightAttrName);
  }
  for (Type r : fn.getResultTypes()) {
    std::string why;
    auto type = toTensorType(r, why);
    if (!type)
      return error(ErrorCode::kInvalidArgument, "@%s: result %s", function.str().c_str(), why.c_str());
    out->resultTypes.push_back(*type);
  }
  times.push_back({"specialize", msSince(t0)});
  return std::move(out);
}

uint64_t Program::pipelineRuns() const {
  std::lock_guard<std::mutex> lock(impl->mu);
  return impl->pipelineRuns;
}

llvm::Expected<std::vector<Tensor>> Program::weights(llvm::StringRef function, const WeightLayouts &layouts) {
  std::lock_guard<std::mutex> lock(impl->mu);
  auto fn = impl->module->lookupSymbol<func::FuncOp>(function);
  if (!fn || !fn.isPublic() || fn.isExternal())
    return error(ErrorCode::kInvalidArgument, "no public function @%s in the module", function.str().c_str());
  std::vector<Tensor> out;
  for (const HoistedWeight &w : planHoisting(fn, kDefaultHoistMinElements, layouts).weights) {
    std::string why;
    auto type = toTensorType(w.type, why);
    if (!type) return error(ErrorCode::kInvalidArgument, "@%s: weight: %s", function.str().c_str(), why.c_str());
    auto t = impl->weightTensor(w.value, *type);
    if (!t)
      return error(ErrorCode::kInvalidArgument, "@%s: weight at %s: %s", function.str().c_str(),
                                     locationString(w.loc).c_str(),
                                     llvm::toString(t.takeError()).c_str());
    out.push_back(*t);
  }
  return out;
}

llvm::Expected<std::string> Program::canonicalGraph(llvm::StringRef function) {
  std::lock_guard<std::mutex> lock(impl->mu);
  if (auto it = impl->canonicalGraphs.find(function); it != impl->canonicalGraphs.end()) return it->second;
  if (!impl->module->lookupSymbol<func::FuncOp>(function))
    return error(ErrorCode::kInvalidArgument, "no public function @%s in the module", function.str().c_str());
  // The graph as kiln compiles it: weights hoisted to (attribute-free)
  // arguments, so their values are not part of it; everything compiled into
  // code (small constants, attributes, callees) is.
  OwningOpRef<ModuleOp> clone = impl->module->clone();
  if (failed(hoistConstants(*clone, kDefaultHoistMinElements)))
    return error(ErrorCode::kInvalidArgument, "@%s: cannot hoist weights", function.str().c_str());
  llvm::SetVector<func::FuncOp> funcs;
  funcs.insert(clone->lookupSymbol<func::FuncOp>(function));
  for (size_t i = 0; i < funcs.size(); ++i) {
    func::FuncOp f = funcs[i];
    f.walk([&](func::CallOp call) {
      if (auto callee = clone->lookupSymbol<func::FuncOp>(call.getCallee())) funcs.insert(callee);
    });
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  for (func::FuncOp f : funcs) {
    for (unsigned a = 0; a < f.getNumArguments(); ++a) f.removeArgAttr(a, kWeightAttrName);
    f->print(os, OpPrintingFlags().printGenericOpForm());
    os << "\n";
    // Blobs left in the code (callees, small constants) print as their key
    // only: their bytes are part of the graph too.
    f.walk([&](Operation *op) {
      auto visit = [&](DenseResourceElementsAttr r) {
        AsmResourceBlob *blob = r.getRawHandle().getBlob();
        os << "blob " << r.getRawHandle().getKey() << " = ";
        if (blob) os << llvm::format_hex(llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
                                             reinterpret_cast<const uint8_t *>(blob->getData().data()),
                                             blob->getData().size())), 18);
        else os << "<missing>";
        os << "\n";
      };
      if (Attribute props = op->getPropertiesAsAttribute()) props.walk(visit);
      op->getAttrDictionary().walk(visit);
    });
  }
  impl->canonicalGraphs[function] = text;
  return text;
}

namespace {
/// IR dumps are for reading: one that cannot be written (a full disk) is
/// skipped, and never written through a link at its name.
void dumpFile(const std::string &path, llvm::StringRef text) { llvm::consumeError(writeFileReplacing(path, text)); }
std::string printed(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// --dump-ir-passes: MLIR's IR-printing instrumentation writes the module
/// after every pass that changed it, as DIR/NN.<pass>.mlir.
class PassDumps : public PassManager::IRPrinterConfig {
public:
  explicit PassDumps(std::string dir)
      : IRPrinterConfig(/*printModuleScope=*/true, /*printAfterOnlyOnChange=*/true), dir_(std::move(dir)) {}
  void printAfterIfEnabled(Pass *pass, Operation *, PrintCallbackFn print) override {
    char number[16];
    std::snprintf(number, sizeof number, "%02d", ++count_);
    std::string text;
    llvm::raw_string_ostream os(text);
    print(os);
    dumpFile(dir_ + "/" + number + "." + pass->getArgument().str() + ".mlir", text);
  }

private:
  std::string dir_;
  int count_ = 0;
};
}  // namespace

llvm::Error Program::Impl::runStages(ModuleOp module, llvm::StringRef fn, const std::vector<PipelineStage> &stages,
                                    StageTimes &times, llvm::StringRef dumpDir, bool dumpEveryPass) {
  int stageIndex = 0;
  if (!dumpDir.empty()) {  // what the pipeline starts from
    dumpFile((llvm::Twine(dumpDir) + "/" + fn + ".0.input.mlir").str(), printed(module));
  }
  for (const PipelineStage &stage : stages) {
    auto t0 = Clock::now();
    std::string passDir;
    if (!dumpDir.empty() && dumpEveryPass) {
      passDir = (llvm::Twine(dumpDir) + "/" + fn + "." + llvm::Twine(stageIndex + 1) + "." + stage.name + ".passes")
                    .str();
      llvm::sys::fs::create_directories(passDir);
    }
    if (auto err = diagnose(ErrorCode::kCompileFailed, "@" + fn.str() + ": lowering stage " + stage.name + " failed",
                            [&] {
                              PassManager pm(ctx.get());
                              if (failed(parsePassPipeline(stripAnchor(stage.pipeline), pm))) return failure();
                              if (!passDir.empty()) pm.enableIRPrinting(std::make_unique<PassDumps>(passDir));
                              return pm.run(module);
                            }))
      return err;
    times.push_back({stage.name, msSince(t0)});
    if (!dumpDir.empty()) {
      std::string path = (llvm::Twine(dumpDir) + "/" + fn.str() + "." +
                          llvm::Twine(++stageIndex) + "." + stage.name + ".mlir").str();
      dumpFile(path, printed(module));
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::Module>>
Program::lowerToLLVMIR(SpecializedFunction &fn, const CpuTuning &tuning, llvm::LLVMContext &llvmContext,
                       StageTimes &times, llvm::StringRef dumpDir, CodeFacts *facts, bool dumpEveryPass) {
  std::lock_guard<std::mutex> lock(impl->mu);
  ++impl->pipelineRuns;
  auto unlowered = Impl::unloweredModule(fn);
  if (!unlowered) return unlowered.takeError();
  ModuleOp module = *unlowered;
  if (auto err = impl->runStages(module, fn.function, cpuPipelineStages(tuning), times, dumpDir, dumpEveryPass))
    return std::move(err);
  if (facts) {
    if (auto sites = module->getAttrOfType<ArrayAttr>(kFaultSitesAttr))
      for (Attribute a : sites) facts->faultSites.push_back(cast<StringAttr>(a).str());
    if (auto bytes = module->getAttrOfType<IntegerAttr>(kScratchBytesAttr)) facts->scratchBytes = bytes.getInt();
  }
  auto t0 = Clock::now();
  std::unique_ptr<llvm::Module> llvmModule;
  if (auto err = impl->diagnose(ErrorCode::kCompileFailed, "@" + fn.function + ": translation to LLVM IR failed", [&] {
        llvmModule = translateModuleToLLVMIR(module, llvmContext, "kiln." + fn.function);
        return success(bool(llvmModule));
      }))
    return std::move(err);
  times.push_back({"translate", msSince(t0)});
  fn.impl->module = nullptr;
  return std::move(llvmModule);
}

}  // namespace kiln::lowering
