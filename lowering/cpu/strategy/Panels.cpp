// Reads of panel-stored weights after the schedule (see Rewrites.h): the
// slices a conv's or matmul's tiles take of a weight that kiln-hoist-
// constants stored in panels become slices of the panels, and the
// transposes that restored the weight's logical layout go away.
#include "lowering/cpu/strategy/Rewrites.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/SetVector.h"

namespace kiln::lowering::strategy {
using namespace mlir;
namespace {

/// Whether `v` is a multiple of `n`: a constant, the induction variable
/// of an scf.for whose bounds and step are (its tiles' offsets), or what
/// folds to one (the tiling's iv * n).
bool multipleOf(IRRewriter &rewriter, OpFoldResult v, int64_t n) {
  if (std::optional<int64_t> c = getConstantIntValue(v)) return *c % n == 0;
  Value value = cast<Value>(v);
  if (auto iv = dyn_cast<BlockArgument>(value))
    if (auto loop = dyn_cast<scf::ForOp>(iv.getOwner()->getParentOp()); loop && iv == loop.getInductionVar()) {
      std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()),
                             step = getConstantIntValue(loop.getStep());
      return lb && step && *lb % n == 0 && *step % n == 0;
    }
  OpBuilder::InsertionGuard guard(rewriter);
  if (Operation *def = value.getDefiningOp()) rewriter.setInsertionPointAfter(def);
  else rewriter.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
  OpFoldResult rest = affine::makeComposedFoldedAffineApply(rewriter, value.getLoc(),
                                                            rewriter.getAffineDimExpr(0) % n, ArrayRef<OpFoldResult>{v});
  if (isZeroInteger(rest)) return true;
  if (auto r = dyn_cast<Value>(rest)) rewriter.eraseOp(r.getDefiningOp());
  return false;
}

}  // namespace

/// A filter stored in panels (WeightLayouts::panelStreamingFilters)
/// reaches the conv as transpose(collapse(transpose(panels))): the graph's
/// way back to FHWC, then the strategy's to HWCF. Each parallel block of
/// the conv slices one block of fc filters out of it, which is one panel:
/// the slice becomes a slice of the panels (a contiguous view), and the two
/// transposes (each a copy of the whole filter on every call) go away. An
/// unsliced use keeps them (correct, slow).
void readPanels(ModuleOp module) {
  SmallVector<tensor::ExtractSliceOp> slices;
  module.walk([&](tensor::ExtractSliceOp s) { slices.push_back(s); });
  IRRewriter rewriter(module.getContext());
  llvm::SetVector<Operation *> maybeDead;
  for (tensor::ExtractSliceOp slice : slices) {
    auto hwcf = slice.getSource().getDefiningOp<linalg::TransposeOp>();
    if (!hwcf || hwcf.getPermutation() != ArrayRef<int64_t>{1, 2, 3, 0}) continue;
    auto collapse = hwcf.getInput().getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse || collapse.getReassociationIndices() != SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}, {4}})
      continue;
    auto grouped = collapse.getSrc().getDefiningOp<linalg::TransposeOp>();
    if (!grouped || grouped.getPermutation() != ArrayRef<int64_t>{0, 4, 1, 2, 3}) continue;
    Value panels = grouped.getInput();
    auto panelType = cast<RankedTensorType>(panels.getType());
    int64_t fc = panelType.getDimSize(4);
    // The slice: every (kh, kw, c), fc filters from a multiple of fc.
    auto sliceType = slice.getResultType();
    if (sliceType.getRank() != 4 || !slice.hasUnitStride() ||
        sliceType.getShape() != ArrayRef<int64_t>{panelType.getDimSize(1), panelType.getDimSize(2),
                                                  panelType.getDimSize(3), fc})
      continue;
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
    if (!llvm::all_of(ArrayRef(offsets).take_front(3), [](OpFoldResult o) { return isZeroInteger(o); })) continue;
    // The offset is a multiple of fc when offset mod fc folds to 0
    // (a constant, or the tiling's iv * fc).
    rewriter.setInsertionPoint(slice);
    Location loc = slice.getLoc();
    OpFoldResult rest = affine::makeComposedFoldedAffineApply(
        rewriter, loc, rewriter.getAffineDimExpr(0) % fc, ArrayRef<OpFoldResult>{offsets[3]});
    if (!isZeroInteger(rest)) {
      if (auto v = dyn_cast<Value>(rest)) rewriter.eraseOp(v.getDefiningOp());
      continue;
    }
    OpFoldResult panel = affine::makeComposedFoldedAffineApply(
        rewriter, loc, rewriter.getAffineDimExpr(0).floorDiv(fc), ArrayRef<OpFoldResult>{offsets[3]});
    OpFoldResult zero = rewriter.getIndexAttr(0), one = rewriter.getIndexAttr(1);
    SmallVector<OpFoldResult> panelOffsets = {panel, zero, zero, zero, zero};
    SmallVector<OpFoldResult> sizes = {one};
    for (int64_t d : sliceType.getShape()) sizes.push_back(rewriter.getIndexAttr(d));
    Value read = tensor::ExtractSliceOp::create(rewriter, loc, sliceType, panels, panelOffsets, sizes,
                                                SmallVector<OpFoldResult>(5, one));
    rewriter.replaceOp(slice, read);
    maybeDead.insert(hwcf);
    maybeDead.insert(collapse);
    maybeDead.insert(grouped);
  }
  for (Operation *op : maybeDead)  // users first: the HWCF transpose, the collapse, the first transpose
    if (op->use_empty()) rewriter.eraseOp(op);
}

/// A matmul's B stored in panels (WeightLayouts::panelMatmulWeights,
/// [P, K, nc]) reaches it as collapse(expand(transpose(panels))), [P, K,
/// nc] -> [K, P, nc] -> [1, K, N]. After tiling, each register tile reads
/// nc-wide rows of it, from a multiple of nc, through a chain of slices:
/// each such slice becomes one slice of the panels (rows of a contiguous
/// run), and the transpose (a copy of the whole weight on every call)
/// goes away. Reads of other shapes keep it (correct, slow).
void readMatmulPanels(ModuleOp module) {
  SmallVector<tensor::ExtractSliceOp> slices;
  module.walk([&](tensor::ExtractSliceOp s) { slices.push_back(s); });
  IRRewriter rewriter(module.getContext());
  llvm::SetVector<Operation *> maybeDead;
  for (tensor::ExtractSliceOp slice : slices) {
    auto type = slice.getResultType();
    int64_t rank = type.getRank();
    if ((rank != 2 && rank != 3) || slice.getSourceType().getRank() != rank) continue;
    // The chain of unit-stride, rank-keeping slices up to the weight.
    SmallVector<tensor::ExtractSliceOp> chain;
    Value root = slice.getSource();
    bool ok = true;
    while (auto s = root.getDefiningOp<tensor::ExtractSliceOp>()) {
      if (!s.hasUnitStride() || s.getSourceType().getRank() != rank) {
        ok = false;
        break;
      }
      chain.push_back(s);
      root = s.getSource();
    }
    if (!ok) continue;
    auto collapse = root.getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse) continue;
    Value grouped = collapse.getSrc();
    // [1, K, P, nc] -> [1, K, N], or [K, P, nc] -> [K, N].
    SmallVector<ReassociationIndices> want =
        rank == 3 ? SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}} : SmallVector<ReassociationIndices>{{0}, {1, 2}};
    if (collapse.getReassociationIndices() != want) continue;
    if (rank == 3) {
      auto expand = grouped.getDefiningOp<tensor::ExpandShapeOp>();
      if (!expand || expand.getReassociationIndices() != SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}} ||
          expand.getResultType().getDimSize(0) != 1)
        continue;
      maybeDead.insert(expand);
      grouped = expand.getSrc();
    }
    auto transpose = grouped.getDefiningOp<linalg::TransposeOp>();
    if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0, 2}) continue;
    Value panels = transpose.getInput();
    auto panelType = cast<RankedTensorType>(panels.getType());
    int64_t nc = panelType.getDimSize(2);
    // The slice: nc columns (one batch) from a multiple of nc.
    if (type.getDimSize(rank - 1) != nc || (rank == 3 && type.getDimSize(0) != 1)) continue;
    // Every slice of the chain in batch 0, every column offset a multiple
    // of nc (checked before any offset arithmetic is built).
    bool whole = true;
    SmallVector<tensor::ExtractSliceOp> all = {slice};
    all.append(chain.begin(), chain.end());
    for (tensor::ExtractSliceOp s : all) {
      SmallVector<OpFoldResult> o = s.getMixedOffsets();
      whole = whole && (rank == 2 || isZeroInteger(o[0])) && multipleOf(rewriter, o[rank - 1], nc);
    }
    if (!whole) continue;
    rewriter.setInsertionPoint(slice);
    Location loc = slice.getLoc();
    AffineExpr d0 = rewriter.getAffineDimExpr(0), d1 = rewriter.getAffineDimExpr(1);
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
    for (tensor::ExtractSliceOp s : chain) {
      SmallVector<OpFoldResult> outer = s.getMixedOffsets();
      for (int64_t d = 0; d < rank; ++d)
        offsets[d] = affine::makeComposedFoldedAffineApply(rewriter, loc, d0 + d1, {offsets[d], outer[d]});
    }
    OpFoldResult col = offsets[rank - 1], row = offsets[rank - 2];
    OpFoldResult panel =
        affine::makeComposedFoldedAffineApply(rewriter, loc, d0.floorDiv(nc), ArrayRef<OpFoldResult>{col});
    OpFoldResult zero = rewriter.getIndexAttr(0), one = rewriter.getIndexAttr(1);
    SmallVector<OpFoldResult> panelOffsets = {panel, row, zero};
    SmallVector<OpFoldResult> sizes = {one, rewriter.getIndexAttr(type.getDimSize(rank - 2)),
                                       rewriter.getIndexAttr(nc)};
    Value read = tensor::ExtractSliceOp::create(rewriter, loc, type, panels, panelOffsets, sizes,
                                                SmallVector<OpFoldResult>(3, one));
    rewriter.replaceOp(slice, read);
    for (tensor::ExtractSliceOp s : chain) maybeDead.insert(s);
    maybeDead.insert(collapse);
    maybeDead.insert(transpose);
  }
  // Users before what they read: outer slices, the collapse, the expand,
  // the transpose, as each loses its last user.
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *op : maybeDead)
      if (op->getBlock() && op->use_empty()) {
        maybeDead.remove(op);
        rewriter.eraseOp(op);
        erased = true;
        break;
      }
  }
}

}  // namespace kiln::lowering::strategy
