//===- HoistConstants.cpp - weights become function arguments -------------===//
//
// kiln-hoist-constants: large constants (dense_resource blobs and non-splat
// dense values with at least min-elements elements, in tosa.const or
// arith.constant) are replaced by new trailing arguments of their public
// function, each carrying its value in a `kiln.weight` argument attribute.
// The runtime then owns weights as buffers and generated code never embeds
// them. Splats and small constants stay, so they keep folding.
//
//===----------------------------------------------------------------------===//
#include "lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNHOISTCONSTANTS
#include "lowering/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

ElementsAttr hoistableValue(Operation *op, int64_t minElements) {
  ElementsAttr value;
  if (auto c = dyn_cast<tosa::ConstOp>(op)) value = c.getValues();
  else if (auto c = dyn_cast<arith::ConstantOp>(op)) value = dyn_cast<ElementsAttr>(c.getValue());
  if (!value) return {};
  if (isa<DenseResourceElementsAttr>(value)) return value;
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (dense && !dense.isSplat() && dense.getNumElements() >= minElements) return value;
  return {};
}

}  // namespace

LogicalResult hoistConstants(ModuleOp module, int64_t minElements) {
  MLIRContext *ctx = module.getContext();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal()) continue;
    llvm::DenseMap<std::pair<Attribute, Type>, BlockArgument> hoisted;
    SmallVector<Operation *> dead;
    WalkResult walk = fn.walk([&](Operation *op) {
      ElementsAttr value = hoistableValue(op, minElements);
      if (!value) return WalkResult::advance();
      Type type = op->getResult(0).getType();
      BlockArgument &arg = hoisted[{value, type}];
      if (!arg) {
        unsigned index = fn.getNumArguments();
        auto attrs = DictionaryAttr::get(ctx, {NamedAttribute(kWeightAttrName, value)});
        if (failed(fn.insertArgument(index, type, attrs, op->getLoc()))) {
          op->emitError("cannot add a weight argument to @") << fn.getSymName();
          return WalkResult::interrupt();
        }
        arg = fn.getArgument(index);
      }
      op->getResult(0).replaceAllUsesWith(arg);
      dead.push_back(op);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted()) return failure();
    for (Operation *op : dead) op->erase();
  }
  return success();
}

namespace {
struct KilnHoistConstantsPass : public impl::KilnHoistConstantsBase<KilnHoistConstantsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(hoistConstants(getOperation(), minElements))) signalPassFailure();
  }
};
}  // namespace
}  // namespace kiln::lowering
