//===- GroupedConvToLinalg.cpp - kiln's grouped conv op as linalg ---------===//
//
// kiln-grouped-conv-to-linalg: a grouped conv has no TOSA op, so
// kiln-raise-linalg makes it `tosa.custom kiln.grouped_conv2d` (input [N, H,
// W, G, C], filter [G, F, KH, KW, C], result [N, OH, OW, G, F]; stride,
// dilation and pad as discardable attributes: lowering/ir/Conventions.h),
// which a kernel plan runs on its handwritten kernel. For generated code it
// becomes, before tosa-to-linalg (which leaves custom ops alone), a zero
// tosa.pad where pad is not all zero and a linalg.conv_2d_nhwgc_gfhwc that
// accumulates into a fill of zeros; kiln-cpu-strategy runs that as a loop
// over the groups (groupedConvsAsLoops).
//
//===----------------------------------------------------------------------===//
#include "lowering/ir/TosaBuild.h"
#include "lowering/pipelines/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNGROUPEDCONVTOLINALG
#include "lowering/pipelines/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

/// The attribute `name` (an i64 array of `size`), or `absent` when missing.
FailureOr<SmallVector<int64_t>> arrayAttr(tosa::CustomOp op, StringRef name, size_t size, int64_t absent) {
  Attribute a = op->getAttr(name);
  if (!a) return SmallVector<int64_t>(size, absent);
  auto arr = dyn_cast<DenseI64ArrayAttr>(a);
  if (!arr || arr.size() != int64_t(size)) {
    op.emitOpError() << "kiln.grouped_conv2d: '" << name << "' must be an array of " << size << " i64 values";
    return failure();
  }
  return SmallVector<int64_t>(arr.asArrayRef());
}

LogicalResult lower(tosa::CustomOp op) {
  auto fail = [&](const Twine &why) { return op.emitOpError() << "kiln.grouped_conv2d: " << why; };
  if (op.getInputList().size() != 2 || op->getNumResults() != 1) return fail("needs an input and a filter, one result");
  auto xt = dyn_cast<RankedTensorType>(op.getInputList()[0].getType());
  auto wt = dyn_cast<RankedTensorType>(op.getInputList()[1].getType());
  auto yt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!xt || !wt || !yt || xt.getRank() != 5 || wt.getRank() != 5 || yt.getRank() != 5)
    return fail("needs input [N, H, W, G, C], filter [G, F, KH, KW, C] and result [N, OH, OW, G, F]");
  auto pad = arrayAttr(op, "pad", 4, 0);
  auto stride = arrayAttr(op, "stride", 2, 1);
  auto dilation = arrayAttr(op, "dilation", 2, 1);
  if (failed(pad) || failed(stride) || failed(dilation)) return failure();
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value x = op.getInputList()[0];
  if (llvm::any_of(*pad, [](int64_t p) { return p != 0; })) {
    if (!xt.hasStaticShape()) return fail("padding of a dynamic input");
    x = tosaPad(b, x, {0, 0, (*pad)[0], (*pad)[1], (*pad)[2], (*pad)[3], 0, 0, 0, 0}, 0.0);
  }
  if (!yt.hasStaticShape()) return fail("a dynamic result shape");
  Value empty = tensor::EmptyOp::create(b, yt.getShape(), yt.getElementType());
  Value zero = arith::ConstantOp::create(b, b.getZeroAttr(yt.getElementType()));
  Value acc = linalg::FillOp::create(b, ValueRange{zero}, ValueRange{empty})->getResult(0);
  auto attr = [&](ArrayRef<int64_t> v) {
    return DenseIntElementsAttr::get(RankedTensorType::get({2}, b.getI64Type()), v);
  };
  Value y = linalg::Conv2DNhwgcGfhwcOp::create(b, TypeRange{yt}, ValueRange{x, op.getInputList()[1]},
                                               ValueRange{acc}, attr(*stride), attr(*dilation))
                ->getResult(0);
  op->getResult(0).replaceAllUsesWith(y);
  op->erase();
  return success();
}

struct GroupedConvToLinalg : impl::KilnGroupedConvToLinalgBase<GroupedConvToLinalg> {
  void runOnOperation() override {
    SmallVector<tosa::CustomOp> ops;
    getOperation().walk([&](tosa::CustomOp op) {
      if (op.getDomainName() == kWinogradDomain && op.getOperatorName() == kGroupedConvOp) ops.push_back(op);
    });
    for (tosa::CustomOp op : ops)
      if (failed(lower(op))) return signalPassFailure();
  }
};

}  // namespace
}  // namespace kiln::lowering
