//===- ScratchBuffers.cpp - a kernel's temporaries in one planned buffer --===//
//
// kiln-scratch-buffers (CPU, after bufferization): the temporaries kiln_fn
// allocates in its body's top block (static shapes, identity layouts,
// freed in that block or not at all) become views of one scratch buffer of
// N bytes that the runtime hands the kernel:
//
//   %s = func.call @kiln_scratch_acquire(N) : (i64) -> memref<Nxi8>
//   %a = memref.view %s[offset][] : memref<Nxi8> to memref<36x196x64xf32>
//   ...                                  (their memref.deallocs removed)
//   func.call @kiln_scratch_release(%s) : (memref<Nxi8>) -> ()
//   return
//
// N goes to the module attribute kiln.scratch_bytes. The executor plans a
// step's scratch in the execution's arena beside the activations
// (runtime/Executable.h), so a kernel's temporaries land in memory the
// steps just before it used, warm in cache, where a block of their own
// (malloc) is cold on every call: the first Winograd 3x3 of each ResNet-50
// stage wrote its 2 x 1.8 MB of transformed input and products through
// to memory. Each temporary gets its own range (no reuse between them).
// Functions that call functions of this module are left alone (a callee
// could free a temporary).
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSCRATCHBUFFERS
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// Bytes of `type` when a temporary of it can live in the scratch buffer,
/// else 0.
int64_t scratchBytesOf(MemRefType type) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() || type.getMemorySpace()) return 0;
  Type element = type.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8) return 0;
  return type.getNumElements() * (element.getIntOrFloatBitWidth() / 8);
}

struct ScratchBuffers : impl::KilnScratchBuffersBase<ScratchBuffers> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(kSpecializedFnName);
    if (!fn || fn.isExternal() || !fn.getBody().hasOneBlock()) return;
    // A call into this module's own functions could free a temporary.
    bool callsLocal = false;
    fn.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      callsLocal |= !callee || !callee.isExternal();
    });
    if (callsLocal) return;

    Block &body = fn.getBody().front();
    struct Temp {
      memref::AllocOp alloc;
      int64_t offset;
    };
    llvm::SmallVector<Temp> temps;
    int64_t total = 0;
    for (Operation &op : body) {
      auto alloc = dyn_cast<memref::AllocOp>(op);
      if (!alloc || !alloc.getDynamicSizes().empty() || !alloc.getSymbolOperands().empty()) continue;
      int64_t bytes = scratchBytesOf(alloc.getType());
      if (!bytes) continue;
      bool movable = true;
      for (Operation *user : alloc->getUsers()) {
        if (isa<func::ReturnOp, func::CallOp>(user)) movable = false;
        if (isa<memref::DeallocOp>(user) && user->getBlock() != &body) movable = false;
      }
      if (!movable) continue;
      int64_t align = std::max<int64_t>(64, alloc.getAlignment().value_or(64));
      total = (total + align - 1) / align * align;
      temps.push_back({alloc, total});
      total += bytes;
    }
    if (temps.empty()) return;
    total = (total + 63) / 64 * 64;

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    auto scratchType = MemRefType::get({total}, IntegerType::get(ctx, 8));
    auto i64 = IntegerType::get(ctx, 64);
    if (module.lookupSymbol(kScratchAcquireSymbol) || module.lookupSymbol(kScratchReleaseSymbol)) {
      module.emitError("kiln-scratch-buffers: the module already declares ") << kScratchAcquireSymbol;
      return signalPassFailure();
    }
    b.setInsertionPointToStart(module.getBody());
    auto acquire = func::FuncOp::create(b, fn.getLoc(), kScratchAcquireSymbol,
                                        FunctionType::get(ctx, {i64}, {scratchType}));
    auto release =
        func::FuncOp::create(b, fn.getLoc(), kScratchReleaseSymbol, FunctionType::get(ctx, {scratchType}, {}));
    acquire.setPrivate();
    release.setPrivate();

    b.setInsertionPointToStart(&body);
    Location loc = fn.getLoc();
    Value n = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(total));
    Value scratch = func::CallOp::create(b, loc, acquire, ValueRange{n}).getResult(0);
    for (Temp &t : temps) {
      b.setInsertionPoint(t.alloc);
      Value offset = arith::ConstantIndexOp::create(b, t.alloc.getLoc(), t.offset);
      Value view = memref::ViewOp::create(b, t.alloc.getLoc(), t.alloc.getType(), scratch, offset, ValueRange{});
      for (Operation *user : llvm::make_early_inc_range(t.alloc->getUsers()))
        if (isa<memref::DeallocOp>(user)) user->erase();
      t.alloc.replaceAllUsesWith(view);
      t.alloc.erase();
    }
    b.setInsertionPoint(body.getTerminator());
    func::CallOp::create(b, loc, release, ValueRange{scratch});
    module->setAttr(kScratchBytesAttr, b.getI64IntegerAttr(total));
  }
};

}  // namespace
}  // namespace kiln::lowering
