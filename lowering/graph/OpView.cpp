//===- OpView.cpp - ops as the runtime sees them ---------------------------===//
#include "lowering/graph/OpView.h"
#include "lowering/graph/ProgramImpl.h"
#include "ops/OpTable.h"
#include "runtime/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace kiln::lowering {

bool isFreeOp(Operation *op) { return isa<tosa::ConstOp, tosa::ConstShapeOp, arith::ConstantOp>(op); }

bool isGroupedConv(Operation *op) {
  auto c = dyn_cast<tosa::CustomOp>(op);
  return c && c.getDomainName() == kWinogradDomain && c.getOperatorName() == kGroupedConvOp;
}

bool isAnchorOp(Operation *op) {
  return isa<tosa::Conv2DOp, tosa::DepthwiseConv2DOp, tosa::TransposeConv2DOp, tosa::Conv3DOp, tosa::MatMulOp,
             tosa::MaxPool2dOp, tosa::AvgPool2dOp, linalg::ConvolutionOpInterface, linalg::ContractionOpInterface>(op) ||
         isGroupedConv(op);
}

std::string kernelKey(Operation *op) {
  if (auto c = dyn_cast<tosa::CustomOp>(op))
    return "tosa.custom:" + c.getDomainName().str() + "." + c.getOperatorName().str();
  return op->getName().getStringRef().str();
}

namespace {

std::optional<ops::Attr> toKernelAttr(Attribute a) {
  if (auto b = dyn_cast<BoolAttr>(a)) return int64_t(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    if (i.getType().isInteger(1)) return int64_t(i.getValue().getZExtValue());
    return int64_t(i.getValue().getSExtValue());
  }
  if (auto f = dyn_cast<FloatAttr>(a)) return f.getValueAsDouble();
  if (auto l = dyn_cast<DenseI64ArrayAttr>(a)) return std::vector<int64_t>(l.asArrayRef().begin(), l.asArrayRef().end());
  if (auto l = dyn_cast<DenseI32ArrayAttr>(a)) return std::vector<int64_t>(l.asArrayRef().begin(), l.asArrayRef().end());
  if (auto t = dyn_cast<TypeAttr>(a)) return typeString(t.getValue());
  if (auto s = dyn_cast<StringAttr>(a)) return s.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  a.print(os);
  return text;
}

/// A constant operand as a kernel attribute (shape lists, scalar tensors).
std::optional<ops::Attr> foldConstant(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def) return std::nullopt;
  Attribute value;
  if (auto c = dyn_cast<tosa::ConstShapeOp>(def)) value = c.getValues();
  else if (auto c = dyn_cast<tosa::ConstOp>(def)) value = c.getValues();
  else if (auto c = dyn_cast<arith::ConstantOp>(def)) value = c.getValue();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!dense) return std::nullopt;
  Type et = dense.getElementType();
  if (isa<tosa::ConstShapeOp>(def) || dense.getNumElements() > 1) {
    if (!et.isIntOrIndex()) return std::nullopt;
    std::vector<int64_t> out;
    for (const APInt &x : dense.getValues<APInt>()) out.push_back(x.getSExtValue());
    return out;
  }
  if (dense.getNumElements() != 1) return std::nullopt;
  if (isa<FloatType>(et)) return double((*dense.getValues<APFloat>().begin()).convertToDouble());
  if (et.isInteger(1)) return int64_t((*dense.getValues<APInt>().begin()).getZExtValue());
  return int64_t((*dense.getValues<APInt>().begin()).getSExtValue());
}

}  // namespace

KernelView kernelView(Operation *op) {
  KernelView v;
  v.key = kernelKey(op);
  if (auto props = dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute a : props)
      if (auto k = toKernelAttr(a.getValue())) v.attrs.set(a.getName().str(), *k);
  for (NamedAttribute a : op->getDiscardableAttrs()) {
    if (a.getName().strref().starts_with("kiln.")) continue;  // kiln's own marks (placement, reasons)
    if (auto k = toKernelAttr(a.getValue())) v.attrs.set(a.getName().str(), *k);
  }
  const ops::OpSpec *spec = ops::lookupOp(op->getName().getStringRef());
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    const ops::OperandSpec *o = spec && i < spec->operands.size() ? &spec->operands[i] : nullptr;
    if (o && o->folded) {
      const std::string &name = o->name;
      auto folded = foldConstant(operand);
      if (!folded) {
        v.whyNot = "operand '" + name + "' is not a constant";
        return v;
      }
      v.attrs.set(name, *folded);
      continue;
    }
    v.data.push_back(operand);
  }
  if (isa<tosa::CastOp>(op))
    if (auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType()))
      v.attrs.set("to", typeString(t.getElementType()));
  return v;
}

/// The kernel that takes this op as specialized ("" and the reason when none).
std::string kernelFor(Operation *op, const KernelView &view, const KernelOracle &oracle, std::string &why,
                      std::vector<TensorType> *inputs, std::vector<TensorType> *results) {
  if (!view.whyNot.empty()) {
    why = view.whyNot;
    return "";
  }
  if (op->getNumRegions()) {
    why = "ops with regions run as JIT code";
    return "";
  }
  std::vector<TensorType> in, want;
  for (Value v : view.data) {
    auto t = toTensorType(v.getType(), why);
    if (!t) return "";
    in.push_back(*t);
  }
  for (Value r : op->getResults()) {
    auto t = toTensorType(r.getType(), why);
    if (!t) return "";
    want.push_back(*t);
  }
  auto kernel = oracle.kernelFor(view.key, in, view.attrs, want);
  if (!kernel) {
    why = toStatus(kernel.takeError()).message;
    return "";
  }
  if (inputs) *inputs = std::move(in);
  if (results) *results = std::move(want);
  return *kernel;
}

/// Every operand (also of nested ops) defined outside `op`.
llvm::SmallVector<Value> externalOperands(Operation *op) {
  llvm::SetVector<Value> out;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentRegion()->getParentOp())) out.insert(v);
  });
  return {out.begin(), out.end()};
}


}  // namespace kiln::lowering
