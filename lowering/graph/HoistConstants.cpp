//===- HoistConstants.cpp - weights become function arguments -------------===//
//
// kiln-hoist-constants: large constants (dense_resource blobs and non-splat
// dense values with at least min-elements elements, in tosa.const or
// arith.constant) are replaced by new trailing arguments of their public
// function, each carrying its value in a `kiln.weight` argument attribute.
// The runtime then owns weights as buffers and generated code never embeds
// them. Splats and small constants stay, so they keep folding. With
// conv-filters-hwcf, an f32 constant read only as tosa.conv2d's filter is
// stored HWCF (transposed once, here, into a blob named after the source
// constant) and read back through tosa.transpose, which cancels against the
// conv strategy's own transpose: the filter is never transposed per call.
// With conv-winograd, a filter read only by 3x3 stride-1 convs that take the
// same Winograd tile (lowering/cpu/Winograd.h) is stored transformed,
// [a, a, C, F], and read through `tosa.custom kiln.winograd_filter` placed
// just before each conv, which kiln-winograd-conv folds into the conv.
// With pad-weight-rows, tosa.matmul's constant B operands, HWCF filters and
// Winograd-stored filters are stored with longer rows
// (WeightLayouts::padMatmulWeights) and read back through a tosa.slice (then
// the HWCF transpose or the winograd_filter read) just before each user.
// With panel-streaming-filters, filters of convs that stream them
// (streamingFilterBlock) are stored HWCF in panels of fc filters, [F/fc, KH,
// KW, C, fc], read back through tosa.transpose + tosa.reshape; with
// panel-matmul-weights (WeightLayouts::panelMatmulWeights), tosa.matmul B
// weights that generated code streams (matmulPanelWidth) in panels of w
// columns, [N/w, K, w], read back the same way.
//
//===----------------------------------------------------------------------===//
#include "lowering/graph/Passes.h"
#include "lowering/graph/Permute.h"
#include "lowering/cpu/Winograd.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Threading.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <functional>
#include <map>
#include <tuple>

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNHOISTCONSTANTS
#include "lowering/graph/Passes.h.inc"
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

/// `op`'s result (of `type`: static, f32, of `rank`) is read only as
/// operand 1 of `OpT` ops (and read at all).
template <typename OpT>
bool onlyWeightOf(Operation *op, Type type, int64_t rank) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || t.getRank() != rank || !t.hasStaticShape() || !t.getElementType().isF32()) return false;
  Value v = op->getResult(0);
  if (v.use_empty()) return false;
  for (OpOperand &use : v.getUses())
    if (!isa<OpT>(use.getOwner()) || use.getOperandNumber() != 1) return false;
  return true;
}

/// A filter only tosa.conv2d reads as its weight, in FHWC f32.
bool isConvFilter(Operation *op, Type type) { return onlyWeightOf<tosa::Conv2DOp>(op, type, 4); }

/// A weight only tosa.matmul reads, as its B operand, in f32.
bool isMatmulWeight(Operation *op, Type type) { return onlyWeightOf<tosa::MatMulOp>(op, type, 3); }

/// The work of filling derived weights, which planHoisting runs in
/// parallel once it has planned every weight (ResNet-50's filter permutes
/// and Winograd transforms took 180-200 ms on one thread, before any kernel
/// could compile).
using Fills = std::vector<std::function<void()>>;

/// A weight computed from `value` (`sourceBytes` of it) by `make`, as a
/// dense_resource of `result` whose data is filled when `fills` run. The
/// blob is named after the source value's identity in this context (its
/// resource key, or the uniqued attribute), `perm` and `suffix`, so every
/// plan of the same program (specialization, warm cache starts) finds the
/// one copy made at the first without reading the data again.
ElementsAttr derivedWeight(Fills &fills, ElementsAttr value, RankedTensorType result, llvm::ArrayRef<int64_t> perm,
                           const std::string &suffix, size_t sourceBytes,
                           std::function<void(const char *source, char *out)> make) {
  std::string name = "kiln_w_";
  if (auto r = dyn_cast<DenseResourceElementsAttr>(value))
    name += r.getRawHandle().getKey().str();
  else
    name += llvm::utohexstr(reinterpret_cast<uintptr_t>(value.getAsOpaquePointer()), /*LowerCase=*/true);
  name += "_p";
  for (int64_t p : perm) name += std::to_string(p);
  name += suffix;
  MLIRContext *ctx = result.getContext();
  auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
  if (DialectResourceBlobManager::BlobEntry *entry = manager.getBlobManager().lookup(name))
    return DenseResourceElementsAttr::get(result, DenseResourceElementsHandle(entry, ctx->getLoadedDialect<BuiltinDialect>()));
  llvm::ArrayRef<char> bytes = rawBytes(value);
  if (bytes.size() != sourceBytes) return {};
  size_t elemBytes = result.getElementTypeBitWidth() / 8;
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(size_t(result.getNumElements()) * elemBytes,
                                                       std::max<size_t>(elemBytes, 8), /*dataIsMutable=*/true);
  // The blob's memory stays where it is when the manager takes it.
  fills.push_back([make = std::move(make), source = bytes.data(), out = blob.getMutableData().data()] {
    make(source, out);
  });
  return DenseResourceElementsAttr::get(result, manager.insert(name, std::move(blob)));
}

/// Copies `rows` rows of `row` elements (`elemBytes` each) from `in` to
/// `out`, each followed by `padding` zero elements there.
void copyRowsPadded(const char *in, char *out, int64_t rows, int64_t row, int64_t padding, size_t elemBytes) {
  size_t rowBytes = size_t(row) * elemBytes, padBytes = size_t(padding) * elemBytes;
  for (int64_t r = 0; r < rows; ++r) {
    char *dst = out + size_t(r) * (rowBytes + padBytes);
    std::memcpy(dst, in + size_t(r) * rowBytes, rowBytes);
    std::memset(dst + rowBytes, 0, padBytes);
  }
}

/// `value` of `type` with its dimensions permuted by `perm` and `padding`
/// zero elements added to each innermost row, as a dense_resource made once
/// (derivedWeight).
ElementsAttr permuted(Fills &fills, ElementsAttr value, RankedTensorType type, llvm::ArrayRef<int64_t> perm, int64_t padding) {
  Type elem = type.getElementType();
  if (!elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() % 8 || !type.hasStaticShape() || !type.getRank())
    return {};
  size_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  SmallVector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(type.getDimSize(p));
  std::string suffix;
  for (int64_t d : shape) suffix += "_" + std::to_string(d);
  if (padding) suffix += "_pad" + std::to_string(padding);
  int64_t row = shape.back();
  shape.back() += padding;
  return derivedWeight(fills, value, RankedTensorType::get(shape, elem), perm, suffix,
                       size_t(type.getNumElements()) * elemBytes,
                       [=, perm = SmallVector<int64_t>(perm)](const char *source, char *out) {
                         if (!padding) return permute(source, out, type.getShape(), perm, elemBytes);
                         std::vector<char> rows(size_t(type.getNumElements()) * elemBytes);
                         permute(source, rows.data(), type.getShape(), perm, elemBytes);
                         copyRowsPadded(rows.data(), out, type.getNumElements() / row, row, padding, elemBytes);
                       });
}

/// `value` of `type` (f32) permuted by `perm` to a layout L, stored in
/// panels of `w` of its last dimension: [L.back() / w, L[from], ..., L[r-2],
/// w], the first `from` dimensions of L (each 1) dropped. Conv filters: L =
/// HWCF, from 0, [F/fc, KH, KW, C, fc]; matmul B operands: L = [1, K, N],
/// from 1, [N/w, K, w]. Named after L's kept dimensions, `tag` and w.
ElementsAttr panelled(Fills &fills, ElementsAttr value, RankedTensorType type, llvm::ArrayRef<int64_t> perm, int64_t w,
                      int64_t from, llvm::StringRef tag) {
  Type elem = type.getElementType();
  if (!elem.isF32() || !type.hasStaticShape() || int64_t(perm.size()) <= from + 1) return {};
  SmallVector<int64_t> layout;
  for (int64_t p : perm) layout.push_back(type.getDimSize(p));
  if (w <= 0 || layout.back() % w || llvm::any_of(ArrayRef(layout).take_front(from), [](int64_t d) { return d != 1; }))
    return {};
  SmallVector<int64_t> kept(layout.begin() + from, layout.end());
  int64_t q = int64_t(kept.size());
  SmallVector<int64_t> split(kept.begin(), kept.end() - 1), shape = {kept.back() / w}, order = {q - 1};
  split.append({kept.back() / w, w});
  for (int64_t d = 0; d + 1 < q; ++d) {
    shape.push_back(kept[d]);
    order.push_back(d);
  }
  shape.push_back(w);
  order.push_back(q);
  std::string suffix;
  for (int64_t d : kept) suffix += "_" + std::to_string(d);
  suffix += tag.str() + std::to_string(w);
  size_t bytes = size_t(type.getNumElements()) * 4;
  return derivedWeight(fills, value, RankedTensorType::get(shape, elem), perm, suffix, bytes,
                       [=, perm = SmallVector<int64_t>(perm)](const char *source, char *out) {
                         std::vector<char> rows(bytes);
                         permute(source, rows.data(), type.getShape(), perm, 4);
                         permute(rows.data(), out, split, order, 4);
                       });
}

/// The panel width (matmulPanelWidth) of every tosa.matmul reading `op`'s
/// result as its B operand ([1, K, N], one batch), or 0 when one does not
/// stream it or they differ.
int64_t matmulPanelOf(Operation *op, const CpuTuning &tuning) {
  auto b = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t width = -1;
  for (Operation *user : op->getResult(0).getUsers()) {
    auto mm = cast<tosa::MatMulOp>(user);
    auto a = dyn_cast<RankedTensorType>(mm.getA().getType());
    if (!a || !a.hasStaticShape() || a.getRank() != 3 || a.getDimSize(0) != 1 || b.getDimSize(0) != 1 ||
        !a.getElementType().isF32())
      return 0;
    int64_t w = matmulPanelWidth(a.getDimSize(1), b.getDimSize(2), b.getDimSize(1), tuning);
    if (w == 0 || (width != -1 && w != width)) return 0;
    width = w;
  }
  return width < 0 ? 0 : width;
}

/// The filter block (streamingFilterBlock) every conv reading `op`'s result
/// (an FHWC filter only tosa.conv2d reads) streams its filter in, or 0 when
/// one does not or they differ. A dynamic batch counts as 1: weights are
/// laid out once, for the batch-1 code a dynamic batch's range calls run
/// (code specialized to a bigger batch still reads the panels, one per
/// block: the conv strategy).
int64_t filterBlockOf(Operation *op, const CpuTuning &tuning) {
  auto filter = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t block = -1;
  for (Operation *user : op->getResult(0).getUsers()) {
    auto conv = cast<tosa::Conv2DOp>(user);
    auto out = dyn_cast<RankedTensorType>(conv.getType());
    if (!out || out.getRank() != 4 || !out.getElementType().isF32()) return 0;
    if (out.isDynamicDim(1) || out.isDynamicDim(2) || out.isDynamicDim(3)) return 0;
    int64_t batch = out.isDynamicDim(0) ? 1 : out.getDimSize(0);
    int64_t fc = streamingFilterBlock(filter.getDimSize(1), filter.getDimSize(2), filter.getDimSize(3),
                                      filter.getDimSize(0), out.getDimSize(2),
                                      batch * out.getDimSize(1) * out.getDimSize(2), tuning);
    if (fc == 0 || (block != -1 && fc != block)) return 0;
    block = fc;
  }
  return block < 0 ? 0 : block;
}

/// The Winograd tile every conv reading `op`'s result (an FHWC filter only
/// tosa.conv2d reads) takes, or 0: 3x3, stride 1, dilation 1, f32, static
/// output maps with enough tiles (winograd::tileFor), channel counts in
/// whole 8-lane vectors, the same tile for all.
int winogradTileOf(Operation *op) {
  auto filter = cast<RankedTensorType>(op->getResult(0).getType());
  if (filter.getDimSize(1) != 3 || filter.getDimSize(2) != 3 || filter.getDimSize(0) % 8 ||
      filter.getDimSize(3) % 8)
    return 0;
  int tile = -1;
  for (Operation *user : op->getResult(0).getUsers()) {
    auto conv = cast<tosa::Conv2DOp>(user);
    auto in = dyn_cast<RankedTensorType>(conv.getInput().getType());
    auto out = dyn_cast<RankedTensorType>(conv.getType());
    if (!in || !out || !in.getElementType().isF32() || !out.getElementType().isF32() || out.getRank() != 4 ||
        out.isDynamicDim(1) || out.isDynamicDim(2) || !llvm::all_of(conv.getStride(), [](int64_t s) { return s == 1; }) ||
        !llvm::all_of(conv.getDilation(), [](int64_t d) { return d == 1; }))
      return 0;
    int m = winograd::tileFor(out.getDimSize(0), out.getDimSize(1), out.getDimSize(2));
    if (m == 0 || (tile != -1 && m != tile)) return 0;
    tile = m;
  }
  return tile < 0 ? 0 : tile;
}

/// `value` (of `type`, permuted by `perm` to F x 3 x 3 x C) transformed for
/// F(m x m, 3 x 3) as an [a, a, C, F + padding] dense_resource made once
/// (derivedWeight), `padding` zeros after each row of F.
ElementsAttr winogradFilter(Fills &fills, ElementsAttr value, RankedTensorType type, llvm::ArrayRef<int64_t> perm, int m,
                            int64_t padding) {
  if (!type.getElementType().isF32() || !type.hasStaticShape()) return {};
  int64_t f = type.getDimSize(perm[0]), c = type.getDimSize(perm[3]);
  int a = winograd::matrices(m).a;
  auto result = RankedTensorType::get({a, a, c, f + padding}, type.getElementType());
  std::string suffix = "_winograd" + std::to_string(m) + (padding ? "_pad" + std::to_string(padding) : "");
  return derivedWeight(fills, value, result, perm, suffix, size_t(type.getNumElements()) * 4,
                       [=, perm = SmallVector<int64_t>(perm)](const char *source, char *out) {
                         std::vector<float> fhwc(size_t(type.getNumElements()));
                         permute(source, reinterpret_cast<char *>(fhwc.data()), type.getShape(), perm, 4);
                         if (!padding)
                           return winograd::transformFilter(fhwc.data(), f, c, m, reinterpret_cast<float *>(out));
                         std::vector<float> u(size_t(a * a * c * f));
                         winograd::transformFilter(fhwc.data(), f, c, m, u.data());
                         copyRowsPadded(reinterpret_cast<const char *>(u.data()), out, a * a * c, f, padding, 4);
                       });
}

/// The constant transposes of `op`'s value that can run once, now: the op
/// whose result the weight replaces (the last transpose of a chain where
/// each has one user) and the composed permutation.
Operation *foldTransposes(Operation *op, SmallVector<int64_t> &perm) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  perm.clear();
  for (int64_t i = 0; i < type.getRank(); ++i) perm.push_back(i);
  Operation *end = op;
  while (end->getResult(0).hasOneUse()) {
    auto t = dyn_cast<tosa::TransposeOp>(*end->getResult(0).getUsers().begin());
    if (!t || !cast<RankedTensorType>(t.getType()).hasStaticShape()) break;
    ArrayRef<int32_t> p = t.getPerms();
    if (p.size() != perm.size()) break;
    SmallVector<int64_t> composed;
    for (int32_t j : p) composed.push_back(perm[j]);  // out dim j = source dim perm[p[j]]
    perm = composed;
    end = t;
  }
  return end;
}

/// `weight` without the `padding` elements at the end of its rows.
Value unpadRows(ImplicitLocOpBuilder &b, Value weight, int64_t padding) {
  auto stored = cast<RankedTensorType>(weight.getType());
  SmallVector<int64_t> rows(stored.getShape());
  rows.back() -= padding;
  return tosa::SliceOp::create(b, RankedTensorType::get(rows, stored.getElementType()), weight,
                               tosa::getTosaConstShape(b, SmallVector<int64_t>(rows.size(), 0)),
                               tosa::getTosaConstShape(b, rows));
}

}  // namespace

HoistPlan planHoisting(func::FuncOp fn, int64_t minElements, const WeightLayouts &layouts) {
  HoistPlan plan;
  Fills fills;
  std::map<std::tuple<const void *, const void *, std::string>, unsigned> index;
  fn.walk([&](Operation *op) {
    ElementsAttr value = hoistableValue(op, minElements);
    if (!value) return;
    Type type = op->getResult(0).getType();
    // Transposes of weights run once, here (exporters emit them around
    // every conv's filter); a conv filter is then stored HWCF.
    SmallVector<int64_t> perm;
    Operation *end = isa<RankedTensorType>(type) ? foldTransposes(op, perm) : op;
    Type endType = end->getResult(0).getType();
    bool filter = isConvFilter(end, endType);
    // A filter of Winograd convs is stored transformed, another conv
    // filter HWCF, any other weight as its transposes leave it.
    int winogradTile = layouts.convWinograd && filter ? winogradTileOf(end) : 0;
    ElementsAttr stored;
    std::string key;
    int64_t rowPadding = 0, filterBlock = 0, matmulPanel = 0;
    if (winogradTile) {
      // Rows of F, as HWCF filters' (see below).
      if (layouts.padFilterRows) rowPadding = rowPaddingOf(cast<RankedTensorType>(endType).getDimSize(0));
      stored = winogradFilter(fills, value, cast<RankedTensorType>(type), perm, winogradTile, rowPadding);
      if (stored)
        key = "w" + std::to_string(winogradTile) + ":";
      else
        winogradTile = rowPadding = 0;  // cannot transform these bytes (an elided blob)
    }
    bool hwcf = false;
    if (!stored) {
      hwcf = layouts.convFiltersHWCF && filter;
      if (hwcf) {
        SmallVector<int64_t> toHWCF;
        for (int64_t j : {1, 2, 3, 0}) toHWCF.push_back(perm[j]);
        perm = toHWCF;
      }
      // A streamed filter in panels (each one contiguous run), else rows a
      // register tile walks down, padded.
      if (hwcf && layouts.panelStreamingFilters) filterBlock = filterBlockOf(end, layouts.tuning);
      // (Panels are one contiguous run each and stay unpadded: padding
      // their rows and planes as HWCF filters' measured no faster.)
      if (filterBlock) {
        stored = panelled(fills, value, cast<RankedTensorType>(type), perm, filterBlock, /*from=*/0, "_panel");
        if (!stored) filterBlock = 0;  // (an elided blob): as other filters
      }
      // A streamed matmul weight in panels of its register tiles' columns.
      if (!filterBlock && layouts.panelMatmulWeights && isMatmulWeight(end, endType))
        matmulPanel = matmulPanelOf(end, layouts.tuning);
      if (matmulPanel) {
        stored = panelled(fills, value, cast<RankedTensorType>(type), perm, matmulPanel, /*from=*/1, "_mpanel");
        if (!stored) matmulPanel = 0;  // (an elided blob): padded rows
      }
      if (!filterBlock && !matmulPanel) {
        if ((hwcf && layouts.padFilterRows) || (layouts.padMatmulWeights && isMatmulWeight(end, endType)))
          rowPadding = rowPaddingOf(cast<RankedTensorType>(type).getDimSize(perm.back()));
        bool identity = !rowPadding;
        for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
        stored = identity ? value : permuted(fills, value, cast<RankedTensorType>(type), perm, rowPadding);
      }
      if (!stored) {  // cannot permute these bytes (an elided blob): as it is
        stored = value;
        end = op;
        hwcf = false;
        rowPadding = 0;
      }
    }
    for (int64_t p : perm) key += std::to_string(p) + ",";
    if (rowPadding) key += "pad" + std::to_string(rowPadding);
    if (filterBlock) key += "panel" + std::to_string(filterBlock);
    if (matmulPanel) key += "mpanel" + std::to_string(matmulPanel);
    auto [it, inserted] = index.try_emplace({value.getAsOpaquePointer(), type.getAsOpaquePointer(), key},
                                            unsigned(plan.weights.size()));
    if (inserted) {
      HoistedWeight w{stored, stored == value ? type : stored.getShapedType(), op->getLoc()};
      w.filterHWCF = hwcf;
      w.winogradTile = winogradTile;
      w.rowPadding = rowPadding;
      w.filterBlock = filterBlock;
      w.matmulPanel = matmulPanel;
      plan.weights.push_back(w);
    }
    plan.uses.push_back({end, it->second});
  });
  mlir::parallelFor(fn.getContext(), 0, fills.size(), [&](size_t i) { fills[i](); });
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
      if (int m = plan.weights[weight].winogradTile) {
        // Each conv reads the filter back through an op of its own (after
        // a slice of the padded rows), just before it, so that they land in
        // one cluster.
        Type fhwc = op->getResult(0).getType();
        for (OpOperand &use : llvm::make_early_inc_range(op->getResult(0).getUses())) {
          ImplicitLocOpBuilder b(use.getOwner()->getLoc(), use.getOwner());
          Value u = arg;
          if (int64_t padding = plan.weights[weight].rowPadding) u = unpadRows(b, arg, padding);
          auto read = tosa::CustomOp::create(b, TypeRange{fhwc}, kWinogradFilterOp, kWinogradDomain,
                                             "m=" + std::to_string(m), ValueRange{u});
          use.set(read->getResult(0));
        }
      } else if (int64_t fc = plan.weights[weight].filterBlock) {
        // Panels back to FHWC: [P, KH, KW, C, fc] -> [P, fc, KH, KW, C] ->
        // [F, KH, KW, C]. The conv strategy reads each parallel block's
        // panel directly and the two ops fold away (kiln-cpu-strategy).
        auto fhwc = cast<RankedTensorType>(op->getResult(0).getType());
        auto panels = cast<RankedTensorType>(arg.getType());
        ImplicitLocOpBuilder b(op->getLoc(), op);
        SmallVector<int64_t> grouped = {panels.getDimSize(0), fc, fhwc.getDimSize(1), fhwc.getDimSize(2),
                                        fhwc.getDimSize(3)};
        Value t = tosa::TransposeOp::create(b, RankedTensorType::get(grouped, fhwc.getElementType()), arg,
                                            b.getDenseI32ArrayAttr({0, 4, 1, 2, 3}));
        arg = tosa::ReshapeOp::create(b, fhwc, t, tosa::getTosaConstShape(b, fhwc.getShape()));
      } else if (int64_t w = plan.weights[weight].matmulPanel) {
        // Panels back to [1, K, N]: [P, K, w] -> [K, P, w] -> [1, K, N].
        // The matmul strategy reads each register tile's panel directly
        // and the two ops fold away (kiln-cpu-strategy).
        auto b3 = cast<RankedTensorType>(op->getResult(0).getType());
        auto panels = cast<RankedTensorType>(arg.getType());
        ImplicitLocOpBuilder b(op->getLoc(), op);
        SmallVector<int64_t> rows = {panels.getDimSize(1), panels.getDimSize(0), w};
        Value t = tosa::TransposeOp::create(b, RankedTensorType::get(rows, b3.getElementType()), arg,
                                            b.getDenseI32ArrayAttr({1, 0, 2}));
        arg = tosa::ReshapeOp::create(b, b3, t, tosa::getTosaConstShape(b, b3.getShape()));
      } else if (int64_t padding = plan.weights[weight].rowPadding) {
        // Each user reads the rows back through a slice of its own (and,
        // for a filter stored HWCF, the transpose back to FHWC), just
        // before it, so that they land in its cluster and fold into its
        // loads.
        for (OpOperand &use : llvm::make_early_inc_range(op->getResult(0).getUses())) {
          ImplicitLocOpBuilder b(use.getOwner()->getLoc(), use.getOwner());
          Value read = unpadRows(b, arg, padding);
          if (plan.weights[weight].filterHWCF)
            read = tosa::TransposeOp::create(b, op->getResult(0).getType(), read, b.getDenseI32ArrayAttr({3, 0, 1, 2}));
          use.set(read);
        }
      } else if (plan.weights[weight].filterHWCF) {
        // The graph still reads FHWC: one transpose back, which the conv's
        // own transpose to HWCF cancels after lowering.
        OpBuilder b(op);
        arg = tosa::TransposeOp::create(b, op->getLoc(), op->getResult(0).getType(), arg,
                                        b.getDenseI32ArrayAttr({3, 0, 1, 2}));
      }
      op->getResult(0).replaceAllUsesWith(arg);
      // The op and the chain of folded transposes behind it.
      for (Operation *cur = op; cur && cur->use_empty();) {
        Operation *prev = cur->getNumOperands() ? cur->getOperand(0).getDefiningOp() : nullptr;
        cur->erase();
        cur = prev;
      }
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
    layouts.convWinograd = convWinograd;
    layouts.padMatmulWeights = layouts.padFilterRows = padWeightRows;
    layouts.panelMatmulWeights = panelMatmulWeights;
    if (panelMatmulWeights) layouts.tuning = CpuTuning::fromFeatures("+avx512f");
    if (failed(hoistConstants(getOperation(), minElements, layouts))) signalPassFailure();
  }
};
}  // namespace
}  // namespace kiln::lowering
