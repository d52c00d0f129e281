//===- EntryWrapper.cpp - one C signature for every compiled function -----===//
//
// kiln-entry-wrapper: on LLVM-dialect IR lowered with bare-pointer memrefs,
// adds `llvm.func @kiln_entry(%args: !llvm.ptr)` which loads the i-th buffer
// pointer from args[i] and calls @kiln_fn with them. The runtime then calls
// every compiled function as `void kiln_entry(void **buffers)`.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNENTRYWRAPPER
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

struct KilnEntryWrapperPass : public impl::KilnEntryWrapperBase<KilnEntryWrapperPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto target = module.lookupSymbol<LLVM::LLVMFuncOp>(kSpecializedFnName);
    if (!target || target.isExternal()) {
      module.emitError() << "kiln-entry-wrapper: no llvm.func @" << kSpecializedFnName
                         << " with a body";
      return signalPassFailure();
    }
    if (module.lookupSymbol(kEntryName)) {
      module.emitError() << "kiln-entry-wrapper: @" << kEntryName << " already exists";
      return signalPassFailure();
    }
    LLVM::LLVMFunctionType fnType = target.getFunctionType();
    if (!isa<LLVM::LLVMVoidType>(fnType.getReturnType())) {
      target.emitError("kiln-entry-wrapper: expected results to be out-parameters (void return)");
      return signalPassFailure();
    }
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    for (auto [i, t] : llvm::enumerate(fnType.getParams())) {
      if (t != ptrType) {
        target.emitError() << "kiln-entry-wrapper: parameter " << i << " is " << t
                           << ", expected a bare buffer pointer";
        return signalPassFailure();
      }
    }
    Location loc = target.getLoc();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto entryType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptrType});
    auto entry = LLVM::LLVMFuncOp::create(b, loc, kEntryName, entryType);
    Block *block = entry.addEntryBlock(b);
    b.setInsertionPointToStart(block);
    SmallVector<Value> args;
    for (unsigned i = 0; i < fnType.getNumParams(); ++i) {
      Value slot = LLVM::GEPOp::create(b, loc, ptrType, ptrType, block->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      args.push_back(LLVM::LoadOp::create(b, loc, ptrType, slot));
    }
    LLVM::CallOp::create(b, loc, target, args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
};

}  // namespace
}  // namespace kiln::lowering
