//===- StridedCopies.cpp - strided copies as loops LLVM can vectorize -----===//
//
// kiln-strided-copies: after bufferization, a memref.copy between buffers
// that are not both contiguous (a padded input's interior, a slice of an
// activation) would become a call of the generic `memrefCopy`, which walks
// element by element through strides and sizes. Such copies become loops
// over the outer dimensions that move the innermost one in whole vectors
// (vector.transfer_read/write; no work left for LLVM's loop vectorizer),
// or linalg.copy loops when the innermost size has no power-of-two vector
// divisor. Contiguous copies stay memref.copy (one memcpy). With
// `as-linalg` (the GPU), every strided copy becomes linalg.copy, whose
// parallel loops become threads.
//
//===----------------------------------------------------------------------===//
#include "lowering/pipelines/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSTRIDEDCOPIES
#include "lowering/pipelines/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

bool contiguous(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  return m && m.getLayout().isIdentity();
}

struct StridedCopies : impl::KilnStridedCopiesBase<StridedCopies> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp op) {
      if (contiguous(op.getSource().getType()) && contiguous(op.getTarget().getType())) return;
      auto src = dyn_cast<MemRefType>(op.getSource().getType());
      if (!src || !src.hasStaticShape() || src.getRank() == 0) return;
      copies.push_back(op);
    });
    for (memref::CopyOp op : copies) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto type = cast<MemRefType>(op.getSource().getType());
      Type elem = type.getElementType();
      int64_t inner = type.getShape().back();
      int64_t width = 0;
      if (!asLinalg && elem.isIntOrFloat() && elem.getIntOrFloatBitWidth() % 8 == 0)
        for (int64_t w = 512 / elem.getIntOrFloatBitWidth(); w >= 2 && !width; w /= 2)
          if (inner % w == 0) width = w;
      if (!width) {
        linalg::CopyOp::create(b, loc, op.getSource(), op.getTarget());
        op.erase();
        continue;
      }
      SmallVector<Value> lbs, ubs, steps;
      for (int64_t i = 0; i < type.getRank(); ++i) {
        lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
        ubs.push_back(arith::ConstantIndexOp::create(b, loc, type.getDimSize(i)));
        steps.push_back(arith::ConstantIndexOp::create(b, loc, i + 1 == type.getRank() ? width : 1));
      }
      auto vecType = VectorType::get({width}, elem);
      Value src = op.getSource(), dst = op.getTarget();
      scf::buildLoopNest(b, loc, lbs, ubs, steps, [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value pad = ub::PoisonOp::create(nb, l, elem);
        SmallVector<bool> inBounds = {true};
        Value v = vector::TransferReadOp::create(nb, l, vecType, src, ivs, pad, inBounds);
        vector::TransferWriteOp::create(nb, l, v, dst, ivs, inBounds);
      });
      op.erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
