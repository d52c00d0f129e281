//===- PrefetchStreams.cpp - streamed rows prefetched a distance ahead -----===//
//
// kiln-prefetch-streams (CPU, after bufferization): a register tile's
// reduction loop reads one row of its B operand per step,
//
//   scf.for %k = 0 to 256 step 1 iter_args(%acc = ...) -> (vector<7x32xf32>) {
//     %r = memref.subview %panel[0, 0, %k, 0] [1, 1, 1, 32] [1, 1, 1, 1]
//     %v = memref.subview %r[0, 0, 0, 0] [1, 1, 1, 32] ...   (rank-reducing)
//     %b = vector.transfer_read %v[%c0, %c0, %c0] ... : vector<32xf32>
//
// and where that operand is a weight streamed from L3 or memory (ResNet-50's
// last stage: 4-9 MB filters read once per call) the loop waits on each
// row as it reaches it. This pass adds, before such a read,
//
//     memref.prefetch %panel[0, 0, %k + P, 0], read, locality<2>, data
//
// (and one per further cache line of the row), P rows being `distance-bytes`
// ahead along the dimension the loop steps. The prefetch lands in L2 while
// the tile computes on the rows before it. A prefetch never faults, so rows
// past the view's end (the next block's, or past the weight) are harmless.
//
// Matched: 1-D vector reads (vector.transfer_read, vector.load) whose
// indices step with the loop, or at all-zero indices of a chain of subviews
// whose offsets below the first one taken inside the loop are all zero, that
// one stepping with the loop — in exactly one dimension with a static stride;
// the row's innermost dimension has stride 1. The loop carries at least
// kMinTileRows accumulators per element read, the memref is (a view of) a
// function argument of at least `min-stream-bytes`, and the enclosing loops
// and parallel blocks pass over the same rows at most kMaxReuse times.
// Anything else is left as it is.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNPREFETCHSTREAMS
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {
namespace {

constexpr int64_t kLineBytes = 64;
/// Fewest accumulator rows per streamed row read: a tile with fewer (a
/// GEMV, 1 FMA per load) waits on loads already, and prefetches would add
/// to them (ResNet-50's classifier: 0.43 -> 0.59 ms).
constexpr int64_t kMinTileRows = 4;
/// Most passes of the enclosing loops over the same rows (row tiles that
/// reuse them): with more, the rows come from L1/L2 on all passes but the
/// first, and the prefetches of the others only take load slots (ResNet-50's
/// 1x1 256 -> 512 on 28x28, 112 row tiles: 0.72 -> 1.09 ms). Layer 4's convs
/// pass 7 times, BERT-base's matmuls ~22.
constexpr int64_t kMaxReuse = 32;

/// Whether `v` is computed from `iv` inside `scope` (or is it).
bool dependsOn(Value v, Value iv, Operation *scope) {
  if (v == iv) return true;
  Operation *def = v.getDefiningOp();
  if (!def || !scope->isAncestor(def)) return false;
  for (Value operand : def->getOperands())
    if (dependsOn(operand, iv, scope)) return true;
  return false;
}
bool dependsOn(OpFoldResult o, Value iv, Operation *scope) {
  auto value = llvm::dyn_cast<Value>(o);
  return value && dependsOn(value, iv, scope);
}

/// Iterations of a loop dimension whose bounds and step are constants.
std::optional<int64_t> tripCount(OpFoldResult lb, OpFoldResult ub, OpFoldResult step) {
  std::optional<APInt> n = constantTripCount(lb, ub, step, /*isSigned=*/true,
                                             [](Value, Value, bool) { return std::optional<llvm::APSInt>(); });
  if (!n || n->getActiveBits() > 62) return std::nullopt;
  return int64_t(n->getZExtValue());
}

/// Prefetches for one row read `read` (vector `vecType` of memref `source`
/// at `indices`) in `loop`, whose vector iter_args hold `accumulators`
/// elements, if it matches (see the file comment).
void prefetchRow(Operation *read, Value source, ValueRange indices, VectorType vecType, scf::ForOp loop,
                 int64_t accumulators, int64_t distanceBytes, int64_t minBytes) {
  if (vecType.getRank() != 1 || !vecType.getElementType().isIntOrFloat()) return;
  // Accumulator rows per row read.
  if (accumulators / vecType.getNumElements() < kMinTileRows) return;
  int64_t elementBytes = vecType.getElementType().getIntOrFloatBitWidth() / 8;
  if (elementBytes == 0) return;
  Value iv = loop.getInductionVar();
  auto stepsWithLoop = [&](OpFoldResult o) { return dependsOn(o, iv, loop); };
  // The memref the row is read from outside the loop, and the row's
  // indices in it: the read's own (it indexes that memref with the loop's
  // variable) or those of the view taken in the loop (zero offsets below it).
  Value base;
  SmallVector<OpFoldResult> offsets;
  if (llvm::any_of(indices, [&](Value i) { return stepsWithLoop(i); })) {
    base = source;
    offsets = getAsOpFoldResult(indices);
  } else {
    if (!areAllConstantIntValue(getAsOpFoldResult(indices), 0)) return;
    for (Value v = source;;) {
      auto view = v.getDefiningOp<memref::SubViewOp>();
      if (!view || !loop->isAncestor(view)) return;
      if (llvm::any_of(view.getMixedOffsets(), stepsWithLoop)) {
        base = view.getSource();
        offsets = view.getMixedOffsets();
        break;
      }
      if (!areAllConstantIntValue(view.getMixedOffsets(), 0)) return;
      v = view.getSource();
    }
  }
  if (Operation *def = base.getDefiningOp(); def && loop->isAncestor(def)) return;
  // Only operands that stream: a function argument (a weight, an input) of
  // at least `minBytes`, which the loops before this one evicted from L2,
  // seen through views (subviews, reshapes); not temporaries.
  Value root = base;
  while (auto view = root.getDefiningOp<ViewLikeOpInterface>()) root = view.getViewSource();
  auto rootType = llvm::dyn_cast<MemRefType>(root.getType());
  if (!llvm::isa<BlockArgument>(root) || !rootType || !rootType.hasStaticShape() ||
      rootType.getNumElements() * elementBytes < minBytes)
    return;
  auto baseType = llvm::dyn_cast<MemRefType>(base.getType());
  if (!baseType) return;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(baseType.getStridesAndOffset(strides, offset)) || strides.empty() || strides.back() != 1) return;
  if (offsets.size() != strides.size()) return;
  int stepDim = -1;
  for (auto [d, o] : llvm::enumerate(offsets))
    if (stepsWithLoop(o)) {
      if (stepDim >= 0) return;  // two dimensions step with the loop
      stepDim = int(d);
    }
  if (stepDim < 0 || stepDim == int(strides.size()) - 1 || ShapedType::isDynamic(strides[stepDim]) ||
      strides[stepDim] <= 0)
    return;
  // The passes of the enclosing loops and parallel blocks (row blocks
  // reuse the rows too) over the same rows.
  int64_t reuse = 1;
  auto passes = [&](Value outerIv, Operation *outer, OpFoldResult lb, OpFoldResult ub, OpFoldResult step) {
    if (dependsOn(base, outerIv, outer) ||
        llvm::any_of(offsets, [&](OpFoldResult o) { return dependsOn(o, outerIv, outer); }))
      return true;  // a loop that steps the rows: no reuse
    std::optional<int64_t> trips = tripCount(lb, ub, step);
    return trips && (reuse *= *trips) <= kMaxReuse;
  };
  for (Operation *up = loop->getParentOp(); up && !llvm::isa<func::FuncOp>(up); up = up->getParentOp()) {
    if (auto outer = llvm::dyn_cast<scf::ForOp>(up)) {
      if (!passes(outer.getInductionVar(), outer, outer.getLowerBound(), outer.getUpperBound(), outer.getStep()))
        return;
    } else if (auto forall = llvm::dyn_cast<scf::ForallOp>(up)) {
      for (auto [forallIv, lb, ub, step] : llvm::zip(forall.getInductionVars(), forall.getMixedLowerBound(),
                                                     forall.getMixedUpperBound(), forall.getMixedStep()))
        if (!passes(forallIv, forall, lb, ub, step)) return;
    }
  }
  int64_t rowBytes = strides[stepDim] * elementBytes;
  int64_t ahead = std::max<int64_t>(1, (distanceBytes + rowBytes - 1) / rowBytes);
  int64_t lineElements = std::max<int64_t>(1, kLineBytes / elementBytes);
  int64_t readBytes = vecType.getNumElements() * elementBytes;

  OpBuilder b(read);
  Location loc = read->getLoc();
  auto indexOf = [&](OpFoldResult o) -> Value {
    if (auto value = llvm::dyn_cast<Value>(o)) return value;
    return arith::ConstantIndexOp::create(b, loc, *getConstantIntValue(o));
  };
  SmallVector<Value> at;
  for (OpFoldResult o : offsets) at.push_back(indexOf(o));
  at[stepDim] = arith::AddIOp::create(b, loc, at[stepDim], arith::ConstantIndexOp::create(b, loc, ahead));
  Value inner = at.back();
  for (int64_t line = 0; line * kLineBytes < readBytes; ++line) {
    if (line) at.back() = arith::AddIOp::create(b, loc, inner, arith::ConstantIndexOp::create(b, loc, line * lineElements));
    memref::PrefetchOp::create(b, loc, base, at, /*isWrite=*/false, /*localityHint=*/2, /*isDataCache=*/true);
  }
}

struct PrefetchStreams : impl::KilnPrefetchStreamsBase<PrefetchStreams> {
  using KilnPrefetchStreamsBase::KilnPrefetchStreamsBase;
  void runOnOperation() override {
    if (distanceBytes <= 0) return;
    getOperation().walk([&](scf::ForOp loop) {
      // A register tile's loop carries its accumulators as vectors.
      int64_t accumulators = 0;
      for (Value init : loop.getInitArgs())
        if (auto v = llvm::dyn_cast<VectorType>(init.getType())) accumulators += v.getNumElements();
      if (accumulators == 0) return;
      SmallVector<Operation *> reads(llvm::make_pointer_range(loop.getBody()->without_terminator()));
      for (Operation *op : reads) {
        if (auto read = llvm::dyn_cast<vector::TransferReadOp>(op)) {
          if (llvm::isa<MemRefType>(read.getBase().getType()))
            prefetchRow(read, read.getBase(), read.getIndices(), read.getVectorType(), loop, accumulators,
                        distanceBytes, minStreamBytes);
        } else if (auto load = llvm::dyn_cast<vector::LoadOp>(op)) {
          prefetchRow(load, load.getBase(), load.getIndices(), load.getVectorType(), loop, accumulators,
                      distanceBytes, minStreamBytes);
        }
      }
    });
  }
};

}  // namespace
}  // namespace kiln::lowering
