//===- OutlineParallel.cpp - parallel tiles on the executor's threads -----===//
//
// Generated code runs its parallel tiles through the runtime's
// `kiln_parallel_for(n, grain, fn(ctx, begin, end), ctx)`, on the TBB arena
// the executor runs graph steps on: no second thread pool.
//
// kiln-outline-parallel (memrefs, after bufferization): every scf.forall
// with static bounds whose captured values are static identity-layout
// memrefs or scalars, or views of them (subviews, reshapes: rebuilt inside
// the body), becomes
//   - a private function @<fn>_par<k>(%begin, %end, captures...) running the
//     linearized iterations [begin, end) of the forall's body, and
//   - a call of @kiln_par_launch_<fn>_<k>(%n, captures...), a declaration
//     tagged `kiln.parallel_body = @<fn>_par<k>`.
// Other foralls become sequential loops.
//
// kiln-parallel-launchers (LLVM dialect, bare-pointer memrefs): gives each
// launcher a body that stores its captures into an 8-byte slot each on the
// stack and calls kiln_parallel_for with a task function that loads them
// back and calls the outlined body.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNOUTLINEPARALLEL
#define GEN_PASS_DEF_KILNPARALLELLAUNCHERS
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

constexpr llvm::StringLiteral kBodyAttr = "kiln.parallel_body";
constexpr llvm::StringLiteral kParallelFor = "kiln_parallel_for";

/// A value the outlined body can take as a parameter that lowers to one
/// pointer or scalar.
bool passable(Type t) {
  if (auto m = dyn_cast<MemRefType>(t)) return m.hasStaticShape() && m.getLayout().isIdentity();
  return t.isIntOrIndexOrFloat();
}

struct OutlineParallel : impl::KilnOutlineParallelBase<OutlineParallel> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<scf::ForallOp> foralls;
    module.walk([&](scf::ForallOp op) {
      if (!op->getParentOfType<scf::ForallOp>()) foralls.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    std::map<std::string, int> counter;
    for (scf::ForallOp forall : foralls) {
      if (succeeded(outline(forall, module, counter))) continue;
      rewriter.setInsertionPoint(forall);
      if (failed(scf::forallToForLoop(rewriter, forall))) {
        forall.emitError("kiln-outline-parallel: cannot lower this forall");
        return signalPassFailure();
      }
    }
    // Nested foralls (none are generated today) run sequentially.
    SmallVector<scf::ForallOp> rest;
    module.walk([&](scf::ForallOp op) { rest.push_back(op); });
    for (scf::ForallOp op : rest) {
      rewriter.setInsertionPoint(op);
      if (failed(scf::forallToForLoop(rewriter, op))) return signalPassFailure();
    }
  }

  LogicalResult outline(scf::ForallOp forall, ModuleOp module, std::map<std::string, int> &counter) {
    if (!forall.getOutputs().empty()) return failure();
    auto lbs = forall.getStaticLowerBound(), ubs = forall.getStaticUpperBound(), steps = forall.getStaticStep();
    SmallVector<int64_t> counts;
    int64_t n = 1;
    for (size_t d = 0; d < lbs.size(); ++d) {
      if (ShapedType::isDynamic(lbs[d]) || ShapedType::isDynamic(ubs[d]) || ShapedType::isDynamic(steps[d]) ||
          steps[d] <= 0)
        return failure();
      counts.push_back(std::max<int64_t>(0, (ubs[d] - lbs[d] + steps[d] - 1) / steps[d]));
      n *= counts.back();
    }
    llvm::SetVector<Value> used;
    getUsedValuesDefinedAbove(forall.getRegion(), used);
    SmallVector<Value> captures, constants;
    // Views with strided layouts (a subview the forall writes into, e.g. a
    // padded buffer's interior) cannot be passed as bare pointers: the view
    // ops are rebuilt inside the body from the buffers they view.
    SmallVector<Operation *> views;
    llvm::DenseSet<Value> seen;
    std::function<bool(Value)> capture = [&](Value v) -> bool {
      if (!seen.insert(v).second) return true;
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>()) {
        constants.push_back(v);
        return true;
      }
      if (passable(v.getType())) {
        captures.push_back(v);
        return true;
      }
      if (!def || def->getNumResults() != 1 || def->getNumRegions() ||
          !isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp>(def))
        return false;
      for (Value operand : def->getOperands())
        if (!capture(operand)) return false;
      views.push_back(def);
      return true;
    };
    for (Value v : used)
      if (!capture(v)) return failure();
    auto parent = forall->getParentOfType<func::FuncOp>();
    std::string base = (parent ? parent.getSymName().str() : std::string("fn"));
    int k = counter[base]++;
    std::string bodyName = base + "_par" + std::to_string(k);
    std::string launchName = "kiln_par_launch_" + base + "_" + std::to_string(k);

    MLIRContext *ctx = &getContext();
    Location loc = forall.getLoc();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    SmallVector<Type> bodyInputs = {b.getIndexType(), b.getIndexType()};
    SmallVector<Type> launchInputs = {b.getIndexType()};
    for (Value v : captures) {
      bodyInputs.push_back(v.getType());
      launchInputs.push_back(v.getType());
    }
    auto body = func::FuncOp::create(b, loc, bodyName, FunctionType::get(ctx, bodyInputs, {}));
    body.setPrivate();
    auto launch = func::FuncOp::create(b, loc, launchName, FunctionType::get(ctx, launchInputs, {}));
    launch.setPrivate();
    launch->setAttr(kBodyAttr, FlatSymbolRefAttr::get(ctx, bodyName));

    // The body: for t in [begin, end): delinearize t, run the forall's body.
    Block *entry = body.addEntryBlock();
    b.setInsertionPointToStart(entry);
    IRMapping map;
    for (Value c : constants) map.map(c, b.clone(*c.getDefiningOp())->getResult(0));
    for (auto [i, v] : llvm::enumerate(captures)) map.map(v, entry->getArgument(unsigned(i + 2)));
    for (Operation *view : views) b.clone(*view, map);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(b, loc, entry->getArgument(0), entry->getArgument(1), one);
    func::ReturnOp::create(b, loc);
    b.setInsertionPointToStart(loop.getBody());
    Value rest = loop.getInductionVar();
    SmallVector<Value> ivs(counts.size());
    for (int d = int(counts.size()) - 1; d >= 0; --d) {
      Value cnt = arith::ConstantIndexOp::create(b, loc, counts[d]);
      Value idx = d == 0 ? rest : arith::RemUIOp::create(b, loc, rest, cnt).getResult();
      if (d > 0) rest = arith::DivUIOp::create(b, loc, rest, cnt);
      Value scaled = arith::MulIOp::create(b, loc, idx, arith::ConstantIndexOp::create(b, loc, steps[d]));
      ivs[d] = arith::AddIOp::create(b, loc, scaled, arith::ConstantIndexOp::create(b, loc, lbs[d]));
    }
    for (auto [iv, v] : llvm::zip(forall.getInductionVars(), ivs)) map.map(iv, v);
    for (Operation &op : forall.getBody()->without_terminator()) b.clone(op, map);

    // The call replacing the forall.
    b.setInsertionPoint(forall);
    SmallVector<Value> args = {arith::ConstantIndexOp::create(b, loc, n)};
    args.append(captures.begin(), captures.end());
    func::CallOp::create(b, loc, launch, args);
    forall.erase();
    return success();
  }
};

struct ParallelLaunchers : impl::KilnParallelLaunchersBase<ParallelLaunchers> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<LLVM::LLVMFuncOp> launchers;
    module.walk([&](LLVM::LLVMFuncOp f) {
      if (f->hasAttr(kBodyAttr) && f.isExternal()) launchers.push_back(f);
    });
    if (launchers.empty()) return;
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto voidTy = LLVM::LLVMVoidType::get(ctx);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto parallelFor = module.lookupSymbol<LLVM::LLVMFuncOp>(kParallelFor);
    if (!parallelFor)
      parallelFor = LLVM::LLVMFuncOp::create(b, module.getLoc(), kParallelFor,
                                             LLVM::LLVMFunctionType::get(voidTy, {i64, i64, ptr, ptr}));
    for (LLVM::LLVMFuncOp launch : launchers) {
      auto bodyRef = launch->getAttrOfType<FlatSymbolRefAttr>(kBodyAttr);
      auto body = bodyRef ? module.lookupSymbol<LLVM::LLVMFuncOp>(bodyRef) : nullptr;
      if (!body || body.isExternal()) {
        launch.emitError("kiln-parallel-launchers: the parallel body is missing");
        return signalPassFailure();
      }
      Location loc = launch.getLoc();
      ArrayRef<Type> bodyParams = body.getFunctionType().getParams();
      ArrayRef<Type> launchParams = launch.getFunctionType().getParams();
      if (bodyParams.size() < 2 || launchParams.size() != bodyParams.size() - 1) {
        launch.emitError("kiln-parallel-launchers: launcher and body disagree");
        return signalPassFailure();
      }
      for (Type t : launchParams.drop_front())
        if (!isa<LLVM::LLVMPointerType>(t) && !(t.isIntOrFloat() && t.getIntOrFloatBitWidth() <= 64)) {
          launch.emitError() << "kiln-parallel-launchers: cannot pass " << t << " to a parallel body";
          return signalPassFailure();
        }

      // task(ctx, begin, end): loads the captures, calls the body.
      b.setInsertionPointToEnd(module.getBody());
      auto task = LLVM::LLVMFuncOp::create(b, loc, (body.getName() + "_task").str(),
                                           LLVM::LLVMFunctionType::get(voidTy, {ptr, i64, i64}),
                                           LLVM::Linkage::Internal);
      Block *tb = task.addEntryBlock(b);
      b.setInsertionPointToStart(tb);
      SmallVector<Value> args = {tb->getArgument(1), tb->getArgument(2)};
      for (auto [i, t] : llvm::enumerate(launchParams.drop_front())) {
        Value slot = LLVM::GEPOp::create(b, loc, ptr, i64, tb->getArgument(0), ArrayRef<LLVM::GEPArg>{int32_t(i)});
        args.push_back(LLVM::LoadOp::create(b, loc, t, slot));
      }
      LLVM::CallOp::create(b, loc, body, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});

      // launch(n, captures...): captures to the stack, kiln_parallel_for.
      Block *lb = launch.addEntryBlock(b);
      launch->removeAttr(kBodyAttr);
      launch.setLinkage(LLVM::Linkage::Internal);
      b.setInsertionPointToStart(lb);
      unsigned slots = std::max<unsigned>(1, unsigned(launchParams.size() - 1));
      Value count = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(slots));
      Value frame = LLVM::AllocaOp::create(b, loc, ptr, i64, count, 8);
      for (unsigned i = 1; i < launchParams.size(); ++i) {
        Value slot = LLVM::GEPOp::create(b, loc, ptr, i64, frame, ArrayRef<LLVM::GEPArg>{int32_t(i - 1)});
        LLVM::StoreOp::create(b, loc, lb->getArgument(i), slot);
      }
      Value grain = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(1));
      Value fn = LLVM::AddressOfOp::create(b, loc, task);
      LLVM::CallOp::create(b, loc, parallelFor, ValueRange{lb->getArgument(0), grain, fn, frame});
      LLVM::ReturnOp::create(b, loc, ValueRange{});
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
