//===- SpecializeShapes.cpp - specialize a function to static shapes ------===//
//
// kiln-specialize-shapes: keeps one function (renamed kiln_fn, public; the
// others become private and die unless called), gives its arguments the
// static types of a call's inputs, propagates shapes (tosa-infer-shapes for
// TOSA users, tensor.cast + canonicalization for linalg/tensor users), and
// sets the function's result types to the inferred static types.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSPECIALIZESHAPES
#include "lowering/graph/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Rewrites the signature and the argument uses; no pattern rewriting.
LogicalResult retypeArguments(ModuleOp module, StringRef function, ArrayRef<Type> argTypes,
                              func::FuncOp &out) {
  auto fn = module.lookupSymbol<func::FuncOp>(function);
  if (!fn) return module.emitError() << "no function @" << function << " in the module";
  if (fn.isExternal()) return fn.emitError() << "function @" << function << " has no body";
  if (argTypes.size() != fn.getNumArguments())
    return fn.emitError() << "@" << function << " takes " << fn.getNumArguments()
                          << " arguments, specialization gives " << argTypes.size();
  if (!fn.getBody().hasOneBlock() && !fn.getBody().empty()) {
    // Multi-block bodies are fine; only the entry block's arguments change.
  }
  for (auto other : module.getOps<func::FuncOp>())
    if (other != fn) other.setPrivate();
  fn.setPublic();

  Block &entry = fn.getBody().front();
  OpBuilder b(&entry, entry.begin());
  for (auto [i, newType] : llvm::enumerate(argTypes)) {
    BlockArgument arg = entry.getArgument(i);
    Type oldType = arg.getType();
    if (oldType == newType) continue;
    auto oldT = dyn_cast<RankedTensorType>(oldType);
    auto newT = dyn_cast<RankedTensorType>(newType);
    if (!oldT || !newT || oldT.getElementType() != newT.getElementType() ||
        failed(verifyCompatibleShape(oldT, newT)))
      return fn.emitError() << "argument " << i << " of @" << function << " has type "
                            << oldType << ", which " << newType << " does not specialize";
    arg.setType(newType);
    Value cast;
    for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
      // TOSA ops take refined operand types and re-infer their results; every
      // other user sees the old type through a cast that canonicalization folds.
      if (isa<tosa::TosaDialect>(use.getOwner()->getDialect())) continue;
      if (!cast) cast = tensor::CastOp::create(b, arg.getLoc(), oldType, arg);
      if (use.getOwner() != cast.getDefiningOp()) use.set(cast);
    }
  }
  fn.setType(FunctionType::get(module.getContext(), entry.getArgumentTypes(),
                               fn.getResultTypes()));

  if (function != kSpecializedFnName) {
    if (module.lookupSymbol(kSpecializedFnName))
      return module.emitError() << "the module already defines @" << kSpecializedFnName
                                << ", a name kiln reserves";
    if (failed(SymbolTable::replaceAllSymbolUses(fn, StringAttr::get(module.getContext(),
                                                                     kSpecializedFnName),
                                                 module)))
      return fn.emitError("cannot rename the specialized function");
    fn.setSymName(kSpecializedFnName);
  }
  out = fn;
  return success();
}

/// Sets the result types from what the return op produces, looking through
/// (and dropping) casts that only forget static information.
LogicalResult fixResultTypes(func::FuncOp fn, StringRef originalName) {
  func::ReturnOp ret;
  unsigned numReturns = 0;
  fn.walk([&](func::ReturnOp r) {
    if (r->getParentOp() == fn) { ret = r; ++numReturns; }
  });
  if (numReturns != 1)
    return fn.emitError() << "@" << originalName << " must have exactly one func.return, found "
                          << numReturns;
  SmallVector<Type> results;
  for (auto [i, operand] : llvm::enumerate(ret->getOpOperands())) {
    Value v = operand.get();
    SmallVector<tensor::CastOp> bypassed;
    while (auto c = v.getDefiningOp<tensor::CastOp>()) {
      auto src = dyn_cast<RankedTensorType>(c.getSource().getType());
      if (!src || !src.hasStaticShape()) break;
      bypassed.push_back(c);
      v = c.getSource();
    }
    operand.set(v);
    // The casts nothing reads any more go here (outermost first), not in
    // another canonicalize of the whole graph.
    for (tensor::CastOp c : bypassed)
      if (c->use_empty()) c->erase();
      else break;
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return fn.emitError() << "result " << i << " of @" << originalName << " has type "
                            << v.getType()
                            << " after specialization; kiln needs static result shapes";
    results.push_back(t);
  }
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), results));
  return success();
}

/// Replaces casts that only forget static shape information by their source
/// where every user is a TOSA op (TOSA ops take more static operands and
/// re-infer their results). Returns whether anything changed.
bool stripShapeErasingCasts(func::FuncOp fn) {
  bool changed = false;
  fn.walk([&](tensor::CastOp cast) {
    auto src = dyn_cast<RankedTensorType>(cast.getSource().getType());
    if (!src || !src.hasStaticShape() || cast.getType() == src) return;
    if (!llvm::all_of(cast->getUsers(), [](Operation *u) {
          return u->getDialect() && isa<tosa::TosaDialect>(u->getDialect());
        }))
      return;
    cast.getResult().replaceAllUsesWith(cast.getSource());
    changed = true;
  });
  return changed;
}

constexpr const char *kCanonicalizeCse = "canonicalize{region-simplify=disabled},cse";

struct KilnSpecializeShapesPass
    : public impl::KilnSpecializeShapesBase<KilnSpecializeShapesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Type> types;
    SmallVector<StringRef> parts;
    StringRef(shapes).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (StringRef p : parts) {
      Type t = parseType(("tensor<" + p.trim() + ">").str(), module.getContext());
      if (!t) {
        module.emitError() << "kiln-specialize-shapes: bad type '" << p << "' in shapes option";
        return signalPassFailure();
      }
      types.push_back(t);
    }
    func::FuncOp fn;
    if (failed(retypeArguments(module, function, types, fn))) return signalPassFailure();
    // This runs for every new shape of a dynamic dim (each sequence length
    // of a text model) before its call can run, so it does only what the
    // graph needs: inlining and symbol DCE where there are calls or other
    // functions; the inliner without its own canonicalize (the one after
    // it does that), canonicalize without region simplification (one
    // block); no canonicalize after fixResultTypes. BERT-base: 78 -> 35 ms.
    bool anyCall = false;
    module.walk([&](CallOpInterface) {
      anyCall = true;
      return WalkResult::interrupt();
    });
    bool otherFunctions = llvm::range_size(module.getOps<func::FuncOp>()) > 1;
    // Program::specialize runs this pass without the pass manager's
    // verification after each nested pass (~3 ms each on BERT-base): the
    // IR is verified here once shapes are inferred — where arguments whose
    // shapes disagree inside the graph show, and the error names the op —
    // before canonicalization folds anything, and once at the end.
    auto inferShapes = [&](const std::string &before) {
      OpPassManager infer("builtin.module");
      if (failed(parsePassPipeline(before + "func.func(tosa-infer-shapes)", infer)) ||
          failed(runPipeline(infer, module)) || failed(verify(module)))
        return failure();
      OpPassManager simplify("builtin.module");
      return success(succeeded(parsePassPipeline(kCanonicalizeCse, simplify)) &&
                     succeeded(runPipeline(simplify, module)));
    };
    if (failed(inferShapes(std::string(anyCall ? "inline{default-pipeline=}," : "") +
                           (anyCall || otherFunctions ? "symbol-dce," : ""))))
      return signalPassFailure();
    // Shape-erasing casts in the source graph hide static shapes from TOSA
    // users; drop them and infer again until every type is static.
    for (int round = 0; round < 4 && stripShapeErasingCasts(fn); ++round)
      if (failed(inferShapes(""))) return signalPassFailure();
    if (failed(fixResultTypes(fn, function))) return signalPassFailure();
    // linalg ops that had dynamic shapes at load were not raised to TOSA
    // then (the raise is static-only); now that every shape is known, they
    // are, so a model exported with dynamic dims runs the TOSA route
    // (kernels, weight layouts, the conv and matmul strategies) as a static
    // export does.
    bool anyLinalg = false;
    fn.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "linalg") anyLinalg = true;
    });
    if (anyLinalg) {
      OpPassManager raise("builtin.module");
      raise.addPass(createKilnRaiseLinalg());
      raise.addPass(createKilnPropagateTransposes());
      if (failed(runPipeline(raise, module))) return signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
