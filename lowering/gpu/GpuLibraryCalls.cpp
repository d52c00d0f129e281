//===- GpuLibraryCalls.cpp - convs and matmuls as GPU library calls --------===//
//
// kiln-gpu-library-calls (buffers, before the linalg ops become parallel
// loops): a linalg.conv_2d_nhwc_fhwc, linalg.batch_matmul or linalg.matmul
// whose buffers are static, FP32 and of identity layout becomes
//   func.call @kiln_gpu_lib_<n>(%in, %filter, %out)
//       {kiln.gpu_library = "conv2d_nhwc_fhwc", kiln.gpu_params = array<i64: ...>}
// of a private declaration of the call's own type. readGpuLowering turns the
// call into a library launch of the plan (GpuLowering.h lists the
// parameters); the device runtime runs it through cuDNN or cuBLAS
// (runtime/cuda/CudaLibraries.h). Anything else stays linalg and becomes
// generated kernels.
//
//===----------------------------------------------------------------------===//
#include "lowering/gpu/GpuLowering.h"
#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNGPULIBRARYCALLS
#include "lowering/gpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// A static FP32 buffer of identity layout, or null.
MemRefType plainF32(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  if (!t || !t.hasStaticShape() || !t.getLayout().isIdentity() || !t.getElementType().isF32()) return {};
  for (int64_t d : t.getShape())
    if (d < 1 || d > INT32_MAX) return {};
  return t;
}

/// The library operation and its parameters for `op`, or nothing.
std::optional<std::pair<llvm::StringRef, SmallVector<int64_t>>> libraryCall(linalg::LinalgOp op, bool conv,
                                                                            bool matmul) {
  if (!op.hasPureBufferSemantics() || op->getNumOperands() != 3) return std::nullopt;
  MemRefType a = plainF32(op->getOperand(0)), b = plainF32(op->getOperand(1)), c = plainF32(op->getOperand(2));
  if (!a || !b || !c) return std::nullopt;
  if (auto cv = dyn_cast<linalg::Conv2DNhwcFhwcOp>(op.getOperation()); cv && conv) {
    // in [N,H,W,C], filter [K,R,S,C], out [N,P,Q,K]
    auto in = a.getShape(), f = b.getShape(), out = c.getShape();
    SmallVector<int64_t> strides(cv.getStrides().getValues<int64_t>());
    SmallVector<int64_t> dilations(cv.getDilations().getValues<int64_t>());
    if (strides.size() != 2 || dilations.size() != 2 || in[3] != f[3] || out[0] != in[0] || out[3] != f[0])
      return std::nullopt;
    return std::make_pair(llvm::StringRef(GpuLaunch::kConv2dNhwcFhwc),
                          SmallVector<int64_t>{in[0], in[1], in[2], in[3], f[0], f[1], f[2], out[1], out[2],
                                               strides[0], strides[1], dilations[0], dilations[1]});
  }
  if (!matmul) return std::nullopt;
  if (auto bm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation())) {
    if (bm.hasUserDefinedMaps()) return std::nullopt;
    auto x = a.getShape(), y = b.getShape(), z = c.getShape();  // [B,M,K] [B,K,N] [B,M,N]
    if (x[0] != z[0] || y[0] != z[0] || x[2] != y[1] || x[1] != z[1] || y[2] != z[2]) return std::nullopt;
    return std::make_pair(llvm::StringRef(GpuLaunch::kMatmul), SmallVector<int64_t>{z[0], x[1], y[2], x[2]});
  }
  if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation())) {
    if (mm.hasUserDefinedMaps()) return std::nullopt;
    auto x = a.getShape(), y = b.getShape(), z = c.getShape();  // [M,K] [K,N] [M,N]
    if (x[1] != y[0] || x[0] != z[0] || y[1] != z[1]) return std::nullopt;
    return std::make_pair(llvm::StringRef(GpuLaunch::kMatmul), SmallVector<int64_t>{1, x[0], y[1], x[1]});
  }
  return std::nullopt;
}

struct GpuLibraryCalls : impl::KilnGpuLibraryCallsBase<GpuLibraryCalls> {
  using KilnGpuLibraryCallsBase::KilnGpuLibraryCallsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<std::pair<linalg::LinalgOp, std::pair<llvm::StringRef, SmallVector<int64_t>>>> found;
    module.walk([&](linalg::LinalgOp op) {
      if (auto call = libraryCall(op, conv, matmul)) found.push_back({op, std::move(*call)});
    });
    int n = 0;
    for (auto &[op, call] : found) {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToEnd(module.getBody());
      auto type = b.getFunctionType(op->getOperandTypes(), {});
      std::string name = "kiln_gpu_lib_" + std::to_string(n++);
      while (symbols.lookup(name)) name = "kiln_gpu_lib_" + std::to_string(n++);
      auto decl = func::FuncOp::create(b, op.getLoc(), name, type);
      decl.setPrivate();
      symbols.insert(decl);
      b.setInsertionPoint(op);
      auto callOp = func::CallOp::create(b, op.getLoc(), decl, op->getOperands());
      callOp->setAttr(kGpuLibraryAttr, b.getStringAttr(call.first));
      callOp->setAttr(kGpuParamsAttr, b.getDenseI64ArrayAttr(call.second));
      op->erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
