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
#include "mlir/Dialect/Func/IR/FuncOps.h"

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
  // tosa.rescale needs its multiplier and shift at compile time.
  for (Operation *user : op->getResult(0).getUsers())
    if (isa<tosa::RescaleOp>(user)) return {};
  if (isa<DenseResourceElementsAttr>(value)) return value;
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (dense && !dense.isSplat() && dense.getNumElements() >= minElements) return value;
  return {};
}

}  // namespace

HoistPlan planHoisting(func::FuncOp fn, int64_t minElements) {
  HoistPlan plan;
  llvm::DenseMap<std::pair<Attribute, Type>, unsigned> index;
  fn.walk([&](Operation *op) {
    ElementsAttr value = hoistableValue(op, minElements);
    if (!value) return;
    Type type = op->getResult(0).getType();
    auto [it, inserted] = index.try_emplace({value, type}, unsigned(plan.weights.size()));
    if (inserted) plan.weights.push_back({value, type, op->getLoc()});
    plan.uses.push_back({op, it->second});
  });
  return plan;
}

LogicalResult hoistConstants(ModuleOp module, int64_t minElements) {
  MLIRContext *ctx = module.getContext();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal()) continue;
    HoistPlan plan = planHoisting(fn, minElements);
    unsigned first = fn.getNumArguments();
    for (const HoistedWeight &w : plan.weights) {
      auto attrs = DictionaryAttr::get(ctx, {NamedAttribute(kWeightAttrName, w.value)});
      if (failed(fn.insertArgument(fn.getNumArguments(), w.type, attrs, w.loc)))
        return fn.emitError("cannot add a weight argument to @") << fn.getSymName();
    }
    for (auto [op, weight] : plan.uses) {
      op->getResult(0).replaceAllUsesWith(fn.getArgument(first + weight));
      op->erase();
    }
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
