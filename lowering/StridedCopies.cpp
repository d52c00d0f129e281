//===- StridedCopies.cpp - strided copies as loops LLVM can vectorize -----===//
//
// kiln-strided-copies: after bufferization, a memref.copy between buffers
// that are not both contiguous (a padded input's interior, a slice of an
// activation) would become a call of the generic `memrefCopy`, which walks
// element by element through strides and sizes. Such copies become
// linalg.copy, which lowers to loops whose innermost dimension LLVM
// vectorizes. Contiguous copies stay memref.copy (one memcpy).
//
//===----------------------------------------------------------------------===//
#include "lowering/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNSTRIDEDCOPIES
#include "lowering/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

bool contiguous(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  return m && m.getLayout().isIdentity();
}

struct StridedCopies : impl::KilnStridedCopiesBase<StridedCopies> {
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
      linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
      op.erase();
    }
  }
};

}  // namespace
}  // namespace kiln::lowering
