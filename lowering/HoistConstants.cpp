//===- HoistConstants.cpp - weights become function arguments -------------===//
//
// kiln-hoist-constants: large constants (dense_resource blobs and non-splat
// dense values with at least min-elements elements, in tosa.const or
// arith.constant) are replaced by new trailing arguments of their public
// function, each carrying its value in a `kiln.weight` argument attribute.
// The runtime then owns weights as buffers and generated code never embeds
// them. Splats and small constants stay, so they keep folding. With
// conv-filters-hwcf, an f32 constant read only as tosa.conv2d's filter is
// stored HWCF (transposed once, here, into a blob named after its data) and
// read back through tosa.transpose, which cancels against the conv
// strategy's own transpose: the filter is never transposed per call.
//
//===----------------------------------------------------------------------===//
#include "lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <cstring>

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

/// The bytes of a constant's elements, or an empty range if unknown (an
/// elided blob, a splat).
llvm::ArrayRef<char> rawBytes(ElementsAttr value) {
  if (auto r = dyn_cast<DenseResourceElementsAttr>(value)) {
    if (AsmResourceBlob *blob = r.getRawHandle().getBlob()) return blob->getData();
    return {};
  }
  if (auto d = dyn_cast<DenseElementsAttr>(value); d && !d.isSplat()) return d.getRawData();
  return {};
}

/// A filter only tosa.conv2d reads as its weight, in FHWC f32.
bool isConvFilter(Operation *op, Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || t.getRank() != 4 || !t.hasStaticShape() || !t.getElementType().isF32()) return false;
  Value v = op->getResult(0);
  if (v.use_empty()) return false;
  for (OpOperand &use : v.getUses())
    if (!isa<tosa::Conv2DOp>(use.getOwner()) || use.getOperandNumber() != 1) return false;
  return true;
}

/// `value` (FHWC) as an HWCF dense_resource. The blob is named after the
/// data's hash, so every plan of the same program (specialization, warm
/// cache starts) finds the one copy made at the first.
ElementsAttr toHWCF(ElementsAttr value, RankedTensorType fhwc) {
  llvm::ArrayRef<char> bytes = rawBytes(value);
  int64_t F = fhwc.getDimSize(0), KH = fhwc.getDimSize(1), KW = fhwc.getDimSize(2), C = fhwc.getDimSize(3);
  if (bytes.size() != size_t(F * KH * KW * C) * sizeof(float)) return {};
  auto hwcf = RankedTensorType::get({KH, KW, C, F}, fhwc.getElementType());
  uint64_t hash = llvm::xxh3_64bits(llvm::arrayRefFromStringRef(llvm::StringRef(bytes.data(), bytes.size())));
  std::string name = llvm::formatv("kiln_hwcf_{0}_{1}x{2}x{3}x{4}", llvm::utohexstr(hash, /*LowerCase=*/true), KH, KW,
                                   C, F)
                         .str();
  MLIRContext *ctx = fhwc.getContext();
  auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
  if (DialectResourceBlobManager::BlobEntry *entry = manager.getBlobManager().lookup(name))
    return DenseResourceElementsAttr::get(hwcf, DenseResourceElementsHandle(entry, ctx->getLoadedDialect<BuiltinDialect>()));
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(bytes.size(), alignof(float), /*dataIsMutable=*/true);
  auto *in = reinterpret_cast<const float *>(bytes.data());
  auto *out = reinterpret_cast<float *>(blob.getMutableData().data());
  for (int64_t f = 0; f < F; ++f)
    for (int64_t h = 0; h < KH; ++h)
      for (int64_t w = 0; w < KW; ++w)
        for (int64_t c = 0; c < C; ++c) {
          float x;
          std::memcpy(&x, in + ((f * KH + h) * KW + w) * C + c, sizeof x);  // blobs may be unaligned
          out[((h * KW + w) * C + c) * F + f] = x;
        }
  return DenseResourceElementsAttr::get(hwcf, manager.insert(name, std::move(blob)));
}

}  // namespace

HoistPlan planHoisting(func::FuncOp fn, int64_t minElements, const WeightLayouts &layouts) {
  HoistPlan plan;
  llvm::DenseMap<std::tuple<Attribute, Type, unsigned>, unsigned> index;
  fn.walk([&](Operation *op) {
    ElementsAttr value = hoistableValue(op, minElements);
    if (!value) return;
    Type type = op->getResult(0).getType();
    bool hwcf = layouts.convFiltersHWCF && isConvFilter(op, type);
    auto [it, inserted] = index.try_emplace({value, type, unsigned(hwcf)}, unsigned(plan.weights.size()));
    if (inserted) {
      HoistedWeight w{value, type, op->getLoc()};
      if (hwcf)
        if (ElementsAttr packed = toHWCF(value, cast<RankedTensorType>(type))) {
          w.value = packed;
          w.type = packed.getShapedType();
          w.filterHWCF = true;
        }
      plan.weights.push_back(w);
    }
    plan.uses.push_back({op, it->second});
  });
  return plan;
}

LogicalResult hoistConstants(ModuleOp module, int64_t minElements, const WeightLayouts &layouts) {
  MLIRContext *ctx = module.getContext();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal()) continue;
    HoistPlan plan = planHoisting(fn, minElements, layouts);
    unsigned first = fn.getNumArguments();
    for (const HoistedWeight &w : plan.weights) {
      auto attrs = DictionaryAttr::get(ctx, {NamedAttribute(kWeightAttrName, w.value)});
      if (failed(fn.insertArgument(fn.getNumArguments(), w.type, attrs, w.loc)))
        return fn.emitError("cannot add a weight argument to @") << fn.getSymName();
    }
    for (auto [op, weight] : plan.uses) {
      Value arg = fn.getArgument(first + weight);
      if (plan.weights[weight].filterHWCF) {
        // The graph still reads FHWC: one transpose back, which the conv's
        // own transpose to HWCF cancels after lowering.
        OpBuilder b(op);
        arg = tosa::TransposeOp::create(b, op->getLoc(), op->getResult(0).getType(), arg,
                                        b.getDenseI32ArrayAttr({3, 0, 1, 2}));
      }
      op->getResult(0).replaceAllUsesWith(arg);
      op->erase();
    }
  }
  return success();
}

namespace {
struct KilnHoistConstantsPass : public impl::KilnHoistConstantsBase<KilnHoistConstantsPass> {
  using Base::Base;
  void runOnOperation() override {
    WeightLayouts layouts;
    layouts.convFiltersHWCF = convFiltersHWCF;
    if (failed(hoistConstants(getOperation(), minElements, layouts))) signalPassFailure();
  }
};
}  // namespace
}  // namespace kiln::lowering
