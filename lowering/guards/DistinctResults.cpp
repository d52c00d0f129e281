//===- DistinctResults.cpp - every returned buffer is its own --------------===//
//
// kiln-distinct-results: after bufferization, a function may return one
// buffer twice, or a view of a buffer it also returns (two results of a
// cluster that bufferization made share memory: a value and its reshape,
// two SSA values that folded into one). buffer-results-to-out-params turns
// each result into an out-parameter and, with hoist-static-allocs, writes an
// allocation straight into its out-parameter, which cannot be done for two
// out-parameters at once (MLIR 22 crashes on it). Every result after the
// first that reaches an already returned allocation (through view-like ops)
// is copied into a fresh buffer instead.
//
//===----------------------------------------------------------------------===//
#include "lowering/guards/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/DenseSet.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNDISTINCTRESULTS
#include "lowering/guards/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// The buffer `v` is a view of (through view-like ops), or `v` itself.
Value rootBuffer(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view) break;
    v = view.getViewSource();
  }
  return v;
}

struct DistinctResults : impl::KilnDistinctResultsBase<DistinctResults> {
  void runOnOperation() override {
    getOperation().walk([&](func::ReturnOp ret) {
      llvm::DenseSet<Value> returned;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        auto type = dyn_cast<MemRefType>(operand.get().getType());
        if (!type) continue;
        if (returned.insert(rootBuffer(operand.get())).second) continue;
        if (!type.hasStaticShape()) {
          ret.emitError("kiln-distinct-results: result ") << operand.getOperandNumber()
                                                            << " aliases another and has a dynamic shape";
          return signalPassFailure();
        }
        auto fresh = memref::AllocOp::create(b, ret.getLoc(), MemRefType::get(type.getShape(), type.getElementType()));
        memref::CopyOp::create(b, ret.getLoc(), operand.get(), fresh);
        Value result = fresh;
        if (fresh.getType() != type) result = memref::CastOp::create(b, ret.getLoc(), type, fresh);
        operand.set(result);
        returned.insert(fresh);
      }
    });
  }
};

}  // namespace
}  // namespace kiln::lowering
