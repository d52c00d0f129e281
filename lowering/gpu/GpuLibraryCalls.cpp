//===- GpuLibraryCalls.cpp - convs and matmuls as GPU library calls --------===//
//
// kiln-gpu-library-calls (buffers, before the linalg ops become parallel
// loops): a linalg.conv_2d_nhwc_fhwc, linalg.batch_matmul or linalg.matmul
// whose buffers are static, FP32 or FP16 and of identity layout (a conv's input may
// be the top-left corner of one whose windows the conv never leaves: the call
// then takes the whole buffer) becomes
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

/// A static FP32 or FP16 buffer of identity layout, or null.
MemRefType plainFloat(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  if (!t || !t.hasStaticShape() || !t.getLayout().isIdentity() ||
      !(t.getElementType().isF32() || t.getElementType().isF16()))
    return {};
  for (int64_t d : t.getShape())
    if (d < 1 || d > INT32_MAX) return {};
  return t;
}

/// A conv's input that is the top-left corner of a plain buffer (TOSA
/// slices a strided conv's input to the rows it reads: a subview with zero
/// offsets and unit steps that keeps N and C): that buffer, else null. The
/// caller checks that the conv over the whole buffer has the same output.
Value cornerSource(Value input) {
  auto view = input.getDefiningOp<memref::SubViewOp>();
  if (!view || !plainFloat(view.getSource())) return {};
  auto src = cast<MemRefType>(view.getSource().getType()), dst = cast<MemRefType>(input.getType());
  if (src.getRank() != 4 || dst.getRank() != 4 || src.getDimSize(0) != dst.getDimSize(0) ||
      src.getDimSize(3) != dst.getDimSize(3))
    return {};
  for (int64_t o : view.getStaticOffsets())
    if (o != 0) return {};
  for (int64_t s : view.getStaticStrides())
    if (s != 1) return {};
  for (int64_t s : view.getStaticSizes())
    if (ShapedType::isDynamic(s)) return {};
  return view.getSource();
}

/// The library operation, its parameters and its operands for `op`, or
/// nothing.
struct LibraryCall {
  llvm::StringRef operation;
  SmallVector<int64_t> params;
  SmallVector<Value> operands;
};
std::optional<LibraryCall> libraryCall(linalg::LinalgOp op, bool conv, bool matmul) {
  if (!op.hasPureBufferSemantics() || op->getNumOperands() != 3) return std::nullopt;
  SmallVector<Value> operands(op->getOperands());
  // One element type for all three (FP16 calls accumulate in FP32).
  Type element = cast<ShapedType>(operands[0].getType()).getElementType();
  for (Value v : operands)
    if (cast<ShapedType>(v.getType()).getElementType() != element) return std::nullopt;
  int64_t type = element.isF16() ? GpuLaunch::kF16 : GpuLaunch::kF32;
  if (auto cv = dyn_cast<linalg::Conv2DNhwcFhwcOp>(op.getOperation()); cv && conv) {
    // in [N,H,W,C] (the corner of [N,Hs,Ws,C]), filter [K,R,S,C], out [N,P,Q,K]
    auto inType = dyn_cast<MemRefType>(operands[0].getType());
    Value source = plainFloat(operands[0]) ? operands[0] : cornerSource(operands[0]);
    MemRefType b = plainFloat(operands[1]), c = plainFloat(operands[2]);
    if (!inType || !source || !b || !c || !inType.hasStaticShape()) return std::nullopt;
    auto in = inType.getShape(), f = b.getShape(), out = c.getShape();
    auto whole = cast<MemRefType>(source.getType()).getShape();
    SmallVector<int64_t> strides(cv.getStrides().getValues<int64_t>());
    SmallVector<int64_t> dilations(cv.getDilations().getValues<int64_t>());
    if (strides.size() != 2 || dilations.size() != 2 || in[3] != f[3] || out[0] != in[0] || out[3] != f[0])
      return std::nullopt;
    // Over the whole buffer the conv reads the same windows when it makes
    // as many output rows and columns (the rows and columns the corner
    // leaves out are ones no window reaches).
    auto outputs = [&](int64_t size, int d) { return (size - dilations[d] * (f[1 + d] - 1) - 1) / strides[d] + 1; };
    if (outputs(whole[1], 0) != out[1] || outputs(whole[2], 1) != out[2]) return std::nullopt;
    operands[0] = source;
    return LibraryCall{GpuLaunch::kConv2dNhwcFhwc,
                       {in[0], whole[1], whole[2], in[3], f[0], f[1], f[2], out[1], out[2], strides[0], strides[1],
                        dilations[0], dilations[1], type},
                       operands};
  }
  MemRefType a = plainFloat(operands[0]), b = plainFloat(operands[1]), c = plainFloat(operands[2]);
  if (!a || !b || !c) return std::nullopt;
  if (!matmul) return std::nullopt;
  if (auto bm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation())) {
    if (bm.hasUserDefinedMaps()) return std::nullopt;
    auto x = a.getShape(), y = b.getShape(), z = c.getShape();  // [B,M,K] [B,K,N] [B,M,N]
    if (x[0] != z[0] || y[0] != z[0] || x[2] != y[1] || x[1] != z[1] || y[2] != z[2]) return std::nullopt;
    return LibraryCall{GpuLaunch::kMatmul, {z[0], x[1], y[2], x[2], type}, operands};
  }
  if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation())) {
    if (mm.hasUserDefinedMaps()) return std::nullopt;
    auto x = a.getShape(), y = b.getShape(), z = c.getShape();  // [M,K] [K,N] [M,N]
    if (x[1] != y[0] || x[0] != z[0] || y[1] != z[1]) return std::nullopt;
    return LibraryCall{GpuLaunch::kMatmul, {1, x[0], y[1], x[1], type}, operands};
  }
  return std::nullopt;
}

struct GpuLibraryCalls : impl::KilnGpuLibraryCallsBase<GpuLibraryCalls> {
  using KilnGpuLibraryCallsBase::KilnGpuLibraryCallsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<std::pair<linalg::LinalgOp, LibraryCall>> found;
    module.walk([&](linalg::LinalgOp op) {
      if (auto call = libraryCall(op, conv, matmul)) found.push_back({op, std::move(*call)});
    });
    int n = 0;
    for (auto &[op, call] : found) {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToEnd(module.getBody());
      auto type = b.getFunctionType(ValueRange(call.operands).getTypes(), {});
      std::string name = "kiln_gpu_lib_" + std::to_string(n++);
      while (symbols.lookup(name)) name = "kiln_gpu_lib_" + std::to_string(n++);
      auto decl = func::FuncOp::create(b, op.getLoc(), name, type);
      decl.setPrivate();
      symbols.insert(decl);
      b.setInsertionPoint(op);
      auto callOp = func::CallOp::create(b, op.getLoc(), decl, call.operands);
      callOp->setAttr(kGpuLibraryAttr, b.getStringAttr(call.operation));
      callOp->setAttr(kGpuParamsAttr, b.getDenseI64ArrayAttr(call.params));
      Value input = op->getOperand(0);
      op->erase();
      // A corner view nothing else reads goes too (the plan has no views of
      // that kind).
      if (auto view = input.getDefiningOp<memref::SubViewOp>(); view && view->use_empty()) view->erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
