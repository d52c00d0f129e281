//===- CpuStrategy.cpp - per-op code-generation strategy for the host CPU -===//
//
// kiln-cpu-strategy: on linalg-on-tensors, chooses for each op a strategy
// from its class, its static shapes and the host (vector width, vector
// registers, L2 size), writes the strategies of the whole module as one
// transform-dialect schedule and applies it with the transform interpreter.
//
//   matmul, batch_matmul   parallel blocks [Mc, Nc] (scf.forall when big
//                          enough), a k block, then a register tile
//                          [mr, nr, 1]; vectorized to a vector.contract whose
//                          accumulator is hoisted out of the k loop, lowered
//                          to outer products (broadcast A x vector of B, FMA).
//   conv_2d_nhwc_fhwc/hwcf filter to HWCF (a packed constant filter's
//                          transpose cancels: see kiln-hoist-constants),
//                          parallel blocks of output rows and of output
//                          channels sized for L2 (a filter that streams
//                          from memory: blocks of one register tile of
//                          filters, each read from its own contiguous
//                          panel), then a register tile over
//                          (output width, output channels), decomposed to 1-D
//                          convolutions and vectorized like matmul.
//   depthwise conv, pooling  rows of output pixels x channel vectors, the
//                          accumulator kept across the window (TOSA's
//                          depthwise hwcm with one filter per channel is
//                          first rewritten to hwc).
//   fused into the above   a matmul's, conv's, depthwise conv's or
//                          pooling's accumulator init (fill, bias
//                          broadcast) and its elementwise epilogue
//                          (activation, residual add) run inside its
//                          parallel tiles, the epilogue updating the result
//                          in place: one pass over the output instead of
//                          three, while it is in cache. A batch-1 matmul
//                          flattened for its epilogue becomes 2-D first.
//                          Where a register tile's filter columns fit the
//                          cache (inRegisters), a conv's init and epilogue
//                          run in its register tiles instead: the bias
//                          starts the accumulator, the epilogue finishes
//                          it, one store (a second schedule, applied after
//                          the first and after readPanels).
//   pads                   the source copied into the padded tensor's
//                          interior, vector fills of the border only.
//   row reductions         vector partials across the row, one horizontal
//                          reduction at the end.
//   outer reductions       vectors across the innermost (parallel) loop,
//                          the accumulator in a register across the rows.
//   elementwise / fill     innermost dimension in whole vectors, the
//                          remainder peeled into one static tail (no masks).
//
// Register tiles are chosen by `chooseRegisterTile`: among tiles whose sizes
// divide the op's (so every tile is static and needs no mask) and whose
// vectors are powers of two, the one with the most FMAs per load that fits
// the vector registers with room for the B row and the A broadcast. Where
// every such tile waits on loads (AVX2 on 7-wide maps), a conv's output
// columns or a matmul's rows are first split (transform.structured.split)
// into whole tiles of a better size and one static tail tile.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"
#include "lowering/cpu/CpuStrategy.h"
#include "lowering/cpu/Schedule.h"
#include "lowering/cpu/StrategySupport.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/IR/TransformOps.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln::lowering {
#define GEN_PASS_DEF_KILNCPUSTRATEGY
#include "lowering/cpu/Passes.h.inc"
}  // namespace kiln::lowering

using namespace mlir;

namespace kiln::lowering {

using namespace strategy;

namespace {

struct CpuStrategy : impl::KilnCpuStrategyBase<CpuStrategy> {
  using KilnCpuStrategyBase::KilnCpuStrategyBase;

  /// depthwise_conv_2d_nhwc_hwcm with one filter per channel (what TOSA's
  /// depthwise_conv2d lowers to) as depthwise_conv_2d_nhwc_hwc, which the
  /// schedule can decompose and vectorize.
  void dropUnitMultiplier(ModuleOp module) {
    SmallVector<linalg::DepthwiseConv2DNhwcHwcmOp> ops;
    module.walk([&](linalg::DepthwiseConv2DNhwcHwcmOp op) {
      auto filter = dyn_cast<RankedTensorType>(op.getInputs()[1].getType());
      auto init = dyn_cast<RankedTensorType>(op.getOutputs()[0].getType());
      if (op.hasPureTensorSemantics() && filter && init && filter.hasStaticShape() && init.hasStaticShape() &&
          filter.getDimSize(3) == 1 && allF32(op))
        ops.push_back(op);
    });
    for (linalg::DepthwiseConv2DNhwcHwcmOp op : ops) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      SmallVector<ReassociationIndices> filterMap = {{0}, {1}, {2, 3}}, outMap = {{0}, {1}, {2}, {3, 4}};
      Value filter = tensor::CollapseShapeOp::create(b, loc, op.getInputs()[1], filterMap);
      Value init = tensor::CollapseShapeOp::create(b, loc, op.getOutputs()[0], outMap);
      auto dw = linalg::DepthwiseConv2DNhwcHwcOp::create(b, loc, TypeRange{init.getType()},
                                                         ValueRange{op.getInputs()[0], filter}, ValueRange{init},
                                                         op.getStrides(), op.getDilations());
      Value out = tensor::ExpandShapeOp::create(b, loc, op->getResult(0).getType(), dw->getResult(0), outMap);
      op->getResult(0).replaceAllUsesWith(out);
      op->erase();
    }
    if (!ops.empty()) dropTrailingUnitLoops(module);
  }

  /// Elementwise generics whose innermost loop has one iteration (the bias
  /// and activation after a depthwise conv run on its 5-D hwcm result) would
  /// be vectorized one element at a time: they lose that loop (operands
  /// collapsed, result expanded), and the reshapes and fills around them
  /// fold, so the vector strategy sees the channels as the innermost loop.
  void dropTrailingUnitLoops(ModuleOp module) {
    SmallVector<linalg::GenericOp> generics;
    module.walk([&](linalg::GenericOp op) {
      if (!op.hasPureTensorSemantics() || op.getNumLoops() < 2 || op.getNumParallelLoops() != op.getNumLoops()) return;
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();
      if (bounds.back() == 1) generics.push_back(op);
    });
    linalg::ControlDropUnitDims options;
    options.controlFn = [](Operation *op) {
      SmallVector<unsigned> dims;
      auto generic = dyn_cast<linalg::GenericOp>(op);
      if (!generic) return dims;
      SmallVector<int64_t> bounds = generic.getStaticLoopRanges();
      for (unsigned d = bounds.size(); d-- > 1 && bounds[d] == 1;) dims.push_back(d);
      return dims;
    };
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::DropUnitDimsResult> dropped = linalg::dropUnitDims(rewriter, op, options);
      if (failed(dropped)) continue;
      rewriter.replaceOp(op, dropped->replacements);
    }
    foldReshapes(module);
  }

  /// A 1x1 stride-1 conv (NHWC) is a matmul of its pixels, [N*H*W, C], by
  /// its filter, [C, F]: it becomes a linalg.matmul on collapsed views, and
  /// its accumulator init and elementwise epilogue are collapsed with it
  /// (the reshapes between them fold), so that the matmul strategy tiles
  /// it with its fused ops. As a conv the register tile's rows must divide
  /// the output width (4 x 64 on a 28-wide map); as a matmul they may take
  /// any number of pixels. Convs that stream their filter keep the conv
  /// strategy (and its panels).
  void convs1x1AsMatmuls(ModuleOp module, const CpuTuning &tuning) {
    SmallVector<linalg::LinalgOp> convs;
    module.walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp>(op) || !op.hasPureTensorSemantics() ||
          !allStatic(op) || !allF32(op))
        return;
      auto in = cast<RankedTensorType>(op.getDpsInputOperand(0)->get().getType());
      auto out = cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();  // n, oh, ow, f, kh, kw, c
      if (bounds[4] != 1 || bounds[5] != 1 || in.getDimSize(1) != out.getDimSize(1) ||
          in.getDimSize(2) != out.getDimSize(2))
        return;
      int64_t pixels = bounds[0] * bounds[1] * bounds[2], ow = bounds[2], f = bounds[3];
      if (streamingFilterBlock(1, 1, bounds[6], f, ow, pixels, tuning) > 0) return;
      // Only where the matmul's register tile loads less per FMA (on
      // 14-wide maps AVX-512 takes 4 x 64 over 196 pixels instead of
      // 7 x 32 over 14) ...
      RegisterTile asConv = chooseRegisterTile(ow, f, tuning, true), asMatmul = chooseRegisterTile(pixels, f, tuning, true);
      if (registerTileScore(asMatmul, pixels, tuning) < kMatmulTileGain * registerTileScore(asConv, ow, tuning))
        return;
      // ... and where the result (after an epilogue) is not written into a
      // bigger tensor (the padded input of the next conv), which the
      // collapsed rows cannot be a view of.
      Value last = op->getResult(0);
      if (last.hasOneUse())
        if (auto g = dyn_cast<linalg::GenericOp>(*last.getUsers().begin()); g && g->getNumResults() == 1)
          last = g->getResult(0);
      for (Operation *user : last.getUsers())
        if (!isa<linalg::LinalgOp, func::ReturnOp>(user)) return;
      convs.push_back(op);
    });
    if (convs.empty()) return;
    IRRewriter rewriter(&getContext());
    SmallVector<ReassociationIndices> pixels = {{0, 1, 2}, {3}};
    llvm::SmallPtrSet<Operation *, 8> made;
    for (linalg::LinalgOp op : convs) {
      rewriter.setInsertionPoint(op);
      Location loc = op.getLoc();
      auto flat = [&](Value v) { return tensor::CollapseShapeOp::create(rewriter, loc, v, pixels).getResult(); };
      // The filter as [C, F] (an FHWC filter that is a transpose of an
      // HWCF one, kiln-hoist-constants' stored form, already reads that
      // form: hwcfFilters).
      Value filter = op.getDpsInputOperand(1)->get();
      if (isa<linalg::Conv2DNhwcFhwcOp>(op)) {
        auto type = cast<RankedTensorType>(filter.getType());  // F x 1 x 1 x C
        Value init = tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{1, 1, type.getDimSize(3), type.getDimSize(0)},
                                             type.getElementType());
        filter = linalg::TransposeOp::create(rewriter, loc, filter, init, ArrayRef<int64_t>{1, 2, 3, 0})->getResult(0);
      }
      Value b = flat(filter);
      Value init = flat(op.getDpsInitOperand(0)->get());
      auto mm = linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()},
                                         ValueRange{flat(op.getDpsInputOperand(0)->get()), b}, ValueRange{init});
      made.insert(mm);
      Value result = tensor::ExpandShapeOp::create(rewriter, loc, op->getResult(0).getType(), mm->getResult(0), pixels);
      rewriter.replaceOp(op, result);
    }
    // The ops around each new matmul (its init, its epilogue: elementwise
    // over N x H x W x F) collapsed the same way; the reshapes between them
    // fold.
    SmallVector<linalg::GenericOp> around;
    module.walk([&](linalg::GenericOp g) {
      if (g.getNumLoops() != 4 || !isVectorizableElementwise(g) || !allStatic(g)) return;
      bool touches = false;
      for (Value v : g->getOperands())
        if (auto e = v.getDefiningOp<tensor::ExpandShapeOp>(); e && made.contains(e.getSrc().getDefiningOp()))
          touches = true;
      for (Operation *user : g->getUsers())
        if (auto c = dyn_cast<tensor::CollapseShapeOp>(user))
          for (Operation *u : c->getUsers()) touches |= made.contains(u);
      if (touches) around.push_back(g);
    });
    for (linalg::GenericOp g : around) {
      if (!linalg::areDimSequencesPreserved(g.getIndexingMapsArray(), pixels)) continue;
      rewriter.setInsertionPoint(g);
      FailureOr<linalg::CollapseResult> c = linalg::collapseOpIterationDims(g, pixels, rewriter);
      if (failed(c)) continue;
      rewriter.replaceOp(g, c->results);
    }
    foldReshapes(module);
  }

  /// The reshapes a rank change leaves behind folded away: collapse of
  /// expand (and back), reshapes of fills and of empty tensors.
  void foldReshapes(ModuleOp module) {
    RewritePatternSet patterns(&getContext());
    linalg::FillOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::EmptyOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::populateFoldTensorEmptyPatterns(patterns);
    (void)applyPatternsGreedily(module, std::move(patterns));
  }

  /// A matmul of batch 1 whose result is flattened for an elementwise
  /// epilogue (what TOSA's 3-D matmul + reshape + bias add become) as a 2-D
  /// linalg.matmul the epilogue reads directly, and an elementwise op that
  /// follows the epilogue through a reshape back to 3-D (BERT's GELU after
  /// the bias) fused into it: the epilogue can then be fused into the
  /// matmul's parallel tiles like a conv's.
  void flattenMatmulEpilogues(ModuleOp module) {
    SmallVector<linalg::BatchMatmulOp> bmms;
    module.walk([&](linalg::BatchMatmulOp op) {
      auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (op.hasPureTensorSemantics() && !op.hasUserDefinedMaps() && type && type.hasStaticShape() &&
          type.getDimSize(0) == 1 && allF32(op) && op->getResult(0).hasOneUse())
        if (auto c = dyn_cast<tensor::CollapseShapeOp>(*op->getResult(0).getUsers().begin());
            c && c.getResultType().getRank() == 2 && c.getReassociationIndices().front().size() == 2)
          bmms.push_back(op);
    });
    if (bmms.empty()) return;
    IRRewriter rewriter(&getContext());
    SmallVector<ReassociationIndices> dropBatch = {{0, 1}, {2}};
    SmallVector<Value> results;
    for (linalg::BatchMatmulOp op : bmms) {
      auto collapse = cast<tensor::CollapseShapeOp>(*op->getResult(0).getUsers().begin());
      rewriter.setInsertionPoint(op);
      Location loc = op.getLoc();
      auto flat = [&](Value v) { return tensor::CollapseShapeOp::create(rewriter, loc, v, dropBatch).getResult(); };
      Value init = flat(op.getOutputs()[0]);
      auto mm = linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()},
                                         ValueRange{flat(op.getInputs()[0]), flat(op.getInputs()[1])}, ValueRange{init});
      rewriter.replaceOp(collapse, mm->getResults());
      rewriter.eraseOp(op);
      results.push_back(mm->getResult(0));
    }
    // The epilogue's elementwise successor through expand_shape to 1 x M x N:
    // its unit batch loop dropped, the reshapes cancel, and the two fuse.
    for (Value r : results) {
      if (!r.hasOneUse()) continue;
      auto epilogue = dyn_cast<linalg::GenericOp>(*r.getUsers().begin());
      if (!epilogue || !isVectorizableElementwise(epilogue) || !epilogue->getResult(0).hasOneUse()) continue;
      auto expand = dyn_cast<tensor::ExpandShapeOp>(*epilogue->getResult(0).getUsers().begin());
      if (!expand || expand.getResultType().getRank() != 3 || expand.getResultType().getDimSize(0) != 1 ||
          !expand->hasOneUse())
        continue;
      auto next = dyn_cast<linalg::GenericOp>(*expand->getUsers().begin());
      if (!next || !isVectorizableElementwise(next) || next.getNumLoops() != 3) continue;
      linalg::ControlDropUnitDims options;
      Operation *nextOp = next.getOperation();
      options.controlFn = [nextOp](Operation *op) {
        return op == nextOp ? SmallVector<unsigned>{0} : SmallVector<unsigned>{};
      };
      rewriter.setInsertionPoint(next);
      FailureOr<linalg::DropUnitDimsResult> dropped = linalg::dropUnitDims(rewriter, next, options);
      if (failed(dropped)) continue;
      rewriter.replaceOp(next, dropped->replacements);
      auto flatNext = cast<linalg::GenericOp>(dropped->resultOp.getOperation());
      // collapse(expand(epilogue)) -> epilogue, then fuse.
      for (OpOperand &in : flatNext->getOpOperands())
        if (auto c = in.get().getDefiningOp<tensor::CollapseShapeOp>())
          if (auto e = c.getSrc().getDefiningOp<tensor::ExpandShapeOp>();
              e && e == expand && e.getSrcType() == c.getResultType()) {
            in.set(e.getSrc());
            if (c->use_empty()) rewriter.eraseOp(c);
          }
      if (!expand->use_empty()) continue;
      rewriter.eraseOp(expand);
      for (OpOperand &in : flatNext->getOpOperands()) {
        if (in.get() != epilogue->getResult(0) || !linalg::areElementwiseOpsFusable(&in)) continue;
        rewriter.setInsertionPoint(flatNext);
        FailureOr<linalg::ElementwiseOpFusionResult> fusedOps = linalg::fuseElementwiseOps(rewriter, &in);
        if (failed(fusedOps)) break;
        for (OpResult res : flatNext->getResults()) rewriter.replaceAllUsesWith(res, fusedOps->replacements[res]);
        rewriter.eraseOp(flatNext);
        if (epilogue->use_empty()) rewriter.eraseOp(epilogue);  // now inside the fused op
        break;
      }
    }
    foldReshapes(module);
  }

  /// tensor.pad of static shapes with a constant value: the source copied
  /// into the interior of a new tensor, and fills of the border only (one
  /// slab per padded side, vectorized like any fill). Filling the whole
  /// padded tensor first would write a stride-2 depthwise conv's 5 MB input
  /// twice. Other pads: a fill of the whole and an insert (upstream).
  void decomposePads(ModuleOp module) {
    SmallVector<tensor::PadOp> pads;
    module.walk([&](tensor::PadOp pad) { pads.push_back(pad); });
    if (pads.empty()) return;
    IRRewriter rewriter(&getContext());
    for (tensor::PadOp pad : pads) {
      RankedTensorType type = pad.getResultType(), srcType = pad.getSourceType();
      Value value = pad.getConstantPaddingValue();
      if (!type.hasStaticShape() || !srcType.hasStaticShape() || !value || pad.getNofold()) continue;
      // Amounts given as attributes or as constant SSA values (tosa.pad's
      // lowering leaves arith.constants).
      SmallVector<int64_t> low, high;
      bool constant = true;
      for (auto [mixed, out] : {std::pair(pad.getMixedLowPad(), &low), std::pair(pad.getMixedHighPad(), &high)})
        for (OpFoldResult r : mixed) {
          std::optional<int64_t> c = getConstantIntValue(r);
          constant &= c.has_value();
          out->push_back(c.value_or(0));
        }
      if (!constant) continue;
      // The padded buffer is created at the top of the block: it then
      // dominates the source's producer, and empty-tensor elimination lets
      // that producer write straight into the interior (no copy).
      Location loc = pad.getLoc();
      rewriter.setInsertionPointToStart(pad->getBlock());
      Value cur = tensor::EmptyOp::create(rewriter, loc, type.getShape(), type.getElementType());
      rewriter.setInsertionPoint(pad);
      int64_t rank = type.getRank();
      SmallVector<int64_t> ones(rank, 1);
      auto fold = [&](llvm::ArrayRef<int64_t> v) { return getAsIndexOpFoldResult(&getContext(), v); };
      cur = tensor::InsertSliceOp::create(rewriter, loc, pad.getSource(), cur, fold(low), fold(srcType.getShape()),
                                          fold(ones));
      for (int64_t d = 0; d < rank; ++d) {
        for (bool before : {true, false}) {
          int64_t width = before ? low[d] : high[d];
          if (width == 0) continue;
          // Dimensions before d: the interior; d: this side; after d: all.
          SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape());
          for (int64_t e = 0; e < d; ++e) {
            offsets[e] = low[e];
            sizes[e] = srcType.getDimSize(e);
          }
          offsets[d] = before ? 0 : low[d] + srcType.getDimSize(d);
          sizes[d] = width;
          Value slab = tensor::ExtractSliceOp::create(rewriter, loc, cur, fold(offsets), fold(sizes), fold(ones));
          Value filled = linalg::FillOp::create(rewriter, loc, value, slab).getResult(0);
          cur = tensor::InsertSliceOp::create(rewriter, loc, filled, cur, fold(offsets), fold(sizes), fold(ones));
        }
      }
      rewriter.replaceOp(pad, cur);
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<linalg::DecomposePadOpPattern>(&getContext());
    (void)applyPatternsGreedily(module, std::move(patterns));
  }

  /// Elementwise ops and fills (`bounds`: the loop ranges of the op, or of
  /// the tile a fusion left of it): the innermost dimension in whole
  /// vectors, the remainder peeled into one static tail (no masks).
  static void elementwise(Schedule &schedule, const std::string &h0, llvm::ArrayRef<int64_t> bounds, int64_t lanes) {
    int64_t inner = bounds.back();
    int64_t width = int64_t(llvm::bit_floor(uint64_t(std::min(inner, 2 * lanes))));
    SmallVector<int64_t> sizes(bounds.size(), 1), vec(bounds.size(), 1);
    for (size_t i = 0; i < bounds.size(); ++i)
      if (bounds[i] == 1) sizes[i] = 0;
    sizes.back() = width == inner ? 0 : width;
    vec.back() = width;
    int loops = 0;
    for (int64_t t : sizes) loops += t != 0;
    std::string h = schedule.tile(h0, sizes);
    if (inner % width == 0) {
      schedule.vectorize(h);
      return;
    }
    // Full tiles, then one static remainder: no masks once the bounds
    // fold (vector sizes equal the tiles').
    auto [main, rest] = schedule.peelInnermost(h, loops);
    schedule.vectorize(main, vec);
    vec.back() = inner % width;
    schedule.vectorize(rest, vec);
  }

  /// `h` (the op `op`, loop ranges `bounds`) in the parallel tiles
  /// parallelRowBlocks gives it, if any (memory-bound: each thread's core
  /// streams its share); returns the op's handle inside them and leaves
  /// `bounds` as the tile's.
  static std::string parallelRows(Schedule &schedule, const std::string &h, linalg::LinalgOp op,
                                  SmallVector<int64_t> &bounds) {
    SmallVector<int64_t> blocks = parallelRowBlocks(op, bounds);
    if (blocks.empty()) return h;
    for (size_t i = 0; i < blocks.size(); ++i)
      if (blocks[i]) bounds[i] = blocks[i];
    return schedule.tileForall(h, blocks);
  }

  /// The register tiles of `h` (a conv or matmul tile whose loop `rowDim`
  /// has `rows` iterations): tiled by `sizes(rt.m)`, decomposed (convs) and
  /// vectorized; with a tail the op is first split after the full tiles and
  /// the last `rt.tail` rows get a tile of their own.
  template <typename Sizes>
  static void registerTiles(Schedule &schedule, const std::string &h, int64_t rowDim, int64_t rows,
                            const RegisterTile &rt, Sizes sizes, bool decompose = true,
                            llvm::ArrayRef<int64_t> interchange = {}) {
    auto finish = [&](const std::string &part, int64_t tileRows) {
      std::string t = schedule.tile(part, sizes(tileRows), interchange);
      if (decompose) t = schedule.op("decompose", t);
      schedule.vectorize(t);
    };
    if (!rt.tail) return finish(h, rt.m);
    auto [full, tail] = schedule.split(h, rowDim, rows - rt.tail);
    finish(full, rt.m);
    finish(tail, rt.tail);
  }

  /// What a matmul's, conv's, depthwise conv's or pooling op's parallel
  /// tiles compute with it: the op that fills its accumulator (a fill, or the bias broadcast),
  /// and its only user when that is an elementwise op over its result (bias,
  /// activation, residual add). Both are fused into the op's parallel tiles,
  /// so each runs on a tile while it is in cache, not as a pass of its own
  /// over the whole output.
  struct Fused {
    linalg::LinalgOp init;      // null: none
    linalg::GenericOp epilogue;  // null: none
  };
  static Fused fusable(linalg::LinalgOp op) {
    Fused f{};
    Value result = op->getResult(0);
    auto resultType = dyn_cast<RankedTensorType>(result.getType());
    if (!resultType) return f;
    if (auto init = op.getDpsInitOperand(0)->get().getDefiningOp<linalg::LinalgOp>();
        init && init->hasOneUse() && init.hasPureTensorSemantics() && allStatic(init) &&
        (isa<linalg::FillOp>(init) || isVectorizableElementwise(init)) && init->getResult(0).getType() == resultType)
      f.init = init;
    if (!result.hasOneUse()) return f;
    auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
    if (!user || !user.hasPureTensorSemantics() || !allStatic(user) || !isVectorizableElementwise(user) ||
        user->getNumResults() != 1 || user->getResult(0).getType() != resultType)
      return f;
    for (OpOperand *in : user.getDpsInputOperands())
      if (in->get() == result && !user.getMatchingIndexingMap(in).isIdentity()) return f;
    if (!user.getRegionOutputArgs()[0].use_empty()) return f;
    f.epilogue = user;
    return f;
  }

  /// The epilogue rewritten to update `result` in place: it reads the
  /// result through its output (not as an input), so that each parallel
  /// tile is accumulated and finished in one buffer, the output's. (With
  /// the result as an input and a fresh output, bufferization copies, and
  /// fusing through both uses computes the tile twice.)
  static linalg::GenericOp inPlaceEpilogue(linalg::GenericOp epilogue, Value result) {
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    SmallVector<unsigned> dropped;
    for (OpOperand *in : epilogue.getDpsInputOperands()) {
      if (in->get() == result) {
        dropped.push_back(in->getOperandNumber());
        continue;
      }
      inputs.push_back(in->get());
      maps.push_back(epilogue.getMatchingIndexingMap(in));
    }
    maps.push_back(epilogue.getMatchingIndexingMap(epilogue.getDpsInitOperand(0)));
    OpBuilder b(epilogue);
    auto updated = linalg::GenericOp::create(b, epilogue.getLoc(), epilogue->getResultTypes(), inputs,
                                             ValueRange{result}, maps, epilogue.getIteratorTypesArray());
    updated.getRegion().takeBody(epilogue.getRegion());
    Block &body = updated.getRegion().front();
    BlockArgument out = body.getArguments().back();
    for (unsigned i : llvm::reverse(dropped)) {
      body.getArgument(i).replaceAllUsesWith(out);
      body.eraseArgument(i);
    }
    epilogue->replaceAllUsesWith(updated);
    epilogue->erase();
    return updated;
  }

  /// Whether conv `op` computes its fused init and epilogue (`f`) in its
  /// register tiles `reg` (`reduction` = KH * KW * C): a tile then runs the
  /// whole reduction at once, reading its filter columns (reduction x
  /// reg.n) for every pixel tile, so those must fit half of L2; the
  /// tiles have no tail (one tile shape); the filter is HWCF (no transpose
  /// left to fuse) and no operand is computed by an op that the greedy
  /// fusion would pull into the tiles.
  static bool inRegisters(linalg::LinalgOp op, const Fused &f, const RegisterTile &reg, int64_t reduction) {
    if ((!f.init && !f.epilogue) || reg.tail || reduction * reg.n * 4 > kRegisterFusedColumnBytes) return false;
    if (!isa<linalg::Conv2DNhwcHwcfOp>(op) && panelWidth(op) == 0) return false;
    return !computedOperands(op, f);
  }

  /// Whether an input of `op` or of its fused ops is computed by an op that
  /// transform.structured.fuse would pull into the register tiles.
  static bool computedOperands(linalg::LinalgOp op, const Fused &f) {
    auto computed = [](Value v) { return v.getDefiningOp<TilingInterface>() != nullptr; };
    for (Value v : op.getDpsInputs())
      if (computed(v)) return true;
    for (linalg::LinalgOp fusedOp : {f.init, linalg::LinalgOp(f.epilogue)})
      if (fusedOp)
        for (Value v : fusedOp.getDpsInputs())
          if (computed(v)) return true;
    return false;
  }

  /// fc where `op` is an FHWC conv whose filter is stored in panels of fc
  /// filters ([F/fc, KH, KW, C, fc]: kiln-hoist-constants' streamed
  /// filters, the collapse of a transpose that readPanels turns into panel
  /// reads), else 0.
  static int64_t panelWidth(linalg::LinalgOp op) {
    if (!isa<linalg::Conv2DNhwcFhwcOp>(op)) return 0;
    auto collapse = op.getDpsInputs()[1].getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse || collapse.getReassociationIndices() != SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}, {4}})
      return 0;
    auto grouped = collapse.getSrc().getDefiningOp<linalg::TransposeOp>();
    if (!grouped || grouped.getPermutation() != ArrayRef<int64_t>{0, 4, 1, 2, 3}) return 0;
    return cast<RankedTensorType>(grouped.getInput().getType()).getDimSize(4);
  }

  /// An FHWC conv whose filter is the transpose of an HWCF tensor (how
  /// kiln's packed constant filters reach a torch export's convs) reads the
  /// HWCF tensor itself: what transform.structured.transpose_conv2d and
  /// the transposes' cancelling would make of it later, made before the
  /// schedule, so that the conv has no producer on its filter side.
  void hwcfFilters(ModuleOp module) {
    SmallVector<linalg::Conv2DNhwcFhwcOp> convs;
    module.walk([&](linalg::Conv2DNhwcFhwcOp op) {
      auto t = op.getInputs()[1].getDefiningOp<linalg::TransposeOp>();
      if (op.hasPureTensorSemantics() && t && t.getPermutation() == ArrayRef<int64_t>{3, 0, 1, 2}) convs.push_back(op);
    });
    for (linalg::Conv2DNhwcFhwcOp op : convs) {
      OpBuilder b(op);
      Value filter = op.getInputs()[1].getDefiningOp<linalg::TransposeOp>().getInput();
      auto conv = linalg::Conv2DNhwcHwcfOp::create(b, op.getLoc(), op->getResultTypes(),
                                                   ValueRange{op.getInputs()[0], filter}, op.getOutputs(),
                                                   op.getStrides(), op.getDilations());
      op->replaceAllUsesWith(conv);
      op->erase();
    }
  }

  void runOnOperation() override {
    if (vectorBits <= 0) return;
    CpuTuning tuning{vectorBits, vectorRegisters, l2Bytes, l1Bytes};
    dropUnitMultiplier(getOperation());
    hwcfFilters(getOperation());
    decomposePads(getOperation());
    convs1x1AsMatmuls(getOperation(), tuning);
    flattenMatmulEpilogues(getOperation());
    const int64_t lanes = std::max<int64_t>(1, vectorBits / 32);  // f32 per vector
    ModuleOp module = getOperation();
    Schedule schedule;
    /// Applied after `schedule`: the register tiles of convs whose init and
    /// epilogue are computed in them (see inRegisters).
    Schedule registerPhase;
    int64_t sid = 0;
    Builder b(&getContext());
    // Ops fused into another op's tiles get no strategy of their own.
    llvm::DenseMap<Operation *, Fused> fused;
    llvm::DenseSet<Operation *> claimed;
    SmallVector<linalg::LinalgOp> anchors;
    module.walk([&](linalg::LinalgOp op) {
      auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation());
      if (op.hasPureTensorSemantics() && allStatic(op) && allF32(op) &&
          (isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp, linalg::DepthwiseConv2DNhwcHwcOp,
               linalg::PoolingNhwcMaxOp, linalg::PoolingNhwcSumOp>(op) ||
           (mm && !mm.hasUserDefinedMaps())))
        anchors.push_back(op);
    });
    for (linalg::LinalgOp op : anchors) {
      Fused f = fusable(op);
      if (f.init) claimed.insert(f.init);
      if (f.epilogue) {
        f.epilogue = inPlaceEpilogue(f.epilogue, op->getResult(0));
        claimed.insert(f.epilogue);
      }
      fused[op] = f;
    }
    auto idOf = [](linalg::LinalgOp op) { return op->getAttrOfType<IntegerAttr>(kStrategyIdAttr).getInt(); };
    auto tagOp = [&](Operation *op) {
      op->setAttr(kStrategyIdAttr, b.getI64IntegerAttr(sid));
      return schedule.match(sid++);
    };
    /// Tiles the op `h` (loop ranges `bounds`) into parallel tiles of
    /// `sizes` (an scf.forall) together with what `f` fuses into them:
    /// the epilogue is tiled and the op fused into its tiles, else the op
    /// is tiled; the accumulator's init is fused after. Returns the op's
    /// handle inside the tiles.
    /// The handles tileFusedParts leaves: the op, its epilogue and init
    /// (empty when none) inside the scf.forall.
    struct FusedParts {
      std::string op, epilogue, init;
    };
    auto tileFusedParts = [&](std::string h, llvm::ArrayRef<int64_t> bounds, llvm::ArrayRef<int64_t> sizes,
                              const Fused &f) {
      FusedParts parts;
      std::string forall;
      if (f.epilogue) {
        auto [epi, loop] = schedule.tileForallWithLoop(tagOp(f.epilogue), sizes);
        parts.epilogue = epi;
        std::tie(h, forall) = schedule.fuseInto(h, loop);
      } else {
        SmallVector<int64_t> opSizes(sizes.begin(), sizes.end());
        opSizes.resize(bounds.size(), 0);
        std::tie(h, forall) = schedule.tileForallWithLoop(h, opSizes);
      }
      parts.op = h;
      if (f.init) parts.init = schedule.fuseInto(tagOp(f.init), forall).first;
      return parts;
    };
    /// The op `h` (tagged `opSid`, loops: the 4 parallel ones of an NHWC
    /// conv, depthwise conv or pooling, then its reductions) in parallel
    /// tiles of `forallSizes` with its init and epilogue, each computed in
    /// the register tiles `regSizes` (those 4 loops, in the order `order`
    /// when given): fused by a second schedule (registerPhase), which
    /// tiles the epilogue (else the op) and pulls the op and its init in
    /// through their destinations. With `peelFilters` the filter loop is
    /// peeled into whole tiles and the rest, each op then taken in its two
    /// static tiles.
    auto inRegisterTiles = [&](const std::string &h, llvm::ArrayRef<int64_t> bounds,
                               llvm::ArrayRef<int64_t> forallSizes, const Fused &f, int64_t opSid,
                               llvm::ArrayRef<int64_t> regSizes, llvm::ArrayRef<int64_t> order, bool peelFilters) {
      FusedParts parts = tileFusedParts(h, bounds, forallSizes, f);
      // (Tiled named ops lose their tag.)
      schedule.retag(parts.op, opSid);
      if (f.epilogue) schedule.retag(parts.epilogue, idOf(f.epilogue));
      if (f.init) schedule.retag(parts.init, idOf(f.init));
      SmallVector<int64_t> sizes(regSizes), loops(order), reductions(bounds.size(), 1);
      if (!f.epilogue) {
        sizes.resize(bounds.size(), 0);
        if (!loops.empty())
          for (size_t d = regSizes.size(); d < bounds.size(); ++d) loops.push_back(int64_t(d));
      }
      std::fill_n(reductions.begin(), regSizes.size(), 0);
      Schedule &r = registerPhase;
      std::string loop = r.fuse(r.match(f.epilogue ? idOf(f.epilogue) : opSid), sizes, loops).second;
      auto finish = [&](auto handleOf) {
        std::string t = r.tile(handleOf(opSid), reductions);
        r.vectorize(r.op("decompose", t));
        if (f.epilogue) r.vectorize(handleOf(idOf(f.epilogue)));
        if (f.init) r.vectorize(handleOf(idOf(f.init)));
      };
      if (!peelFilters) return finish([&](int64_t id) { return r.matchIn(id, loop); });
      // The filter loop peeled, its bounds folded, each op's two tiles
      // (whole, rest) taken in turn.
      r.peelLoop(loop);
      r.canonicalize();
      llvm::DenseMap<int64_t, SmallVector<std::string>> halves;
      for (int64_t id : {opSid, f.epilogue ? idOf(f.epilogue) : -1, f.init ? idOf(f.init) : -1})
        if (id >= 0) halves[id] = r.splitHandle(r.match(id), 2);
      for (int piece : {0, 1})
        finish([&](int64_t id) { return halves[id][piece]; });
    };
    auto tileFused = [&](std::string h, llvm::ArrayRef<int64_t> bounds, llvm::ArrayRef<int64_t> sizes,
                         const Fused &f) {
      SmallVector<int64_t> tileBounds(bounds.begin(), bounds.begin() + sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i]) tileBounds[i] = sizes[i];
      FusedParts parts = tileFusedParts(h, bounds, sizes, f);
      if (f.epilogue) elementwise(schedule, parts.epilogue, tileBounds, lanes);
      if (f.init) elementwise(schedule, parts.init, tileBounds, lanes);
      return parts.op;
    };
    /// Fused ops of an op that is not tiled in parallel: strategies of
    /// their own.
    auto unfused = [&](Fused f) {
      if (f.init) elementwise(schedule, tagOp(f.init), f.init.getStaticLoopRanges(), lanes);
      if (f.epilogue) elementwise(schedule, tagOp(f.epilogue), f.epilogue.getStaticLoopRanges(), lanes);
    };
    module.walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics() || !allStatic(op) || claimed.contains(op)) return;
      auto tag = [&] { return tagOp(op); };
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) && allF32(op)) {
        auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation());
        auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
        if ((mm && mm.hasUserDefinedMaps()) || (bmm && bmm.hasUserDefinedMaps())) return;
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        bool batched = bounds.size() == 4;
        int64_t M = bounds[batched], N = bounds[batched + 1], K = bounds[batched + 2];
        int64_t B = batched ? bounds[0] : 1;
        MatmulBlocks mb = matmulBlocks(B, M, N, K, tuning);
        int64_t kc = mb.kc, nc = mb.nc, mc = mb.mc;
        bool parallel = mb.parallel;
        SmallVector<int64_t> blocks = {mc == M ? 0 : mc, nc == N ? 0 : nc, 0};
        SmallVector<int64_t> reduction = {0, 0, kc == K ? 0 : kc};
        if (batched) {
          blocks.insert(blocks.begin(), B > 1 ? 1 : 0);
          reduction.insert(reduction.begin(), 0);
        }
        std::string h = tag();
        Fused f = batched ? Fused{} : fused[op];
        if (parallel && (f.init || f.epilogue))
          h = tileFused(h, bounds, {blocks[0], blocks[1]}, f);
        else {
          unfused(f);
          h = parallel ? schedule.tileForall(h, blocks) : schedule.tile(h, blocks);
        }
        h = schedule.tile(h, reduction);
        RegisterTile rb = mb.rb;
        // Column tiles outside row tiles: a tile's k block of B (kc x
        // rb.n, in L1) serves every row tile before the next is read
        // (rows outside read the block's nc columns of B, from L2, for
        // each row tile; BERT-base's kernels took 1.04-1.06x the time).
        SmallVector<int64_t> colsOuter =
            batched ? SmallVector<int64_t>{0, 2, 1, 3} : SmallVector<int64_t>{1, 0, 2};
        registerTiles(
            schedule, h, /*rowDim=*/batched ? 1 : 0, mc, rb,
            [&](int64_t rows) {
              SmallVector<int64_t> sizes = {rows, rb.n, 1};
              if (batched) sizes.insert(sizes.begin(), 0);
              return sizes;
            },
            /*decompose=*/false, colsOuter);
        return;
      }
      if (isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp>(op) && allF32(op)) {
        // Loops: n, oh, ow, f, kh, kw, c (both layouts).
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        int64_t OW = bounds[2], F = bounds[3], KH = bounds[4], KW = bounds[5], C = bounds[6];
        RegisterTile rt = chooseRegisterTile(OW, F, tuning);
        Fused f = fused[op];
        if (rt.n < 4) {
          // Too few channels to vectorize well: loops, but on an HWCF filter
          // all the same, so that a packed filter's transpose cancels.
          if (isa<linalg::Conv2DNhwcFhwcOp>(op)) schedule.op("transpose_conv2d", tag());
          unfused(f);
          return;
        }
        int64_t filterRowBytes = KH * KW * C * 4;
        int64_t NB = bounds[0], OH = bounds[1];
        // A conv that streams its filter (streamingFilterBlock): blocks of
        // filters wide enough to read long runs of each filter row, every
        // output row in each block, so that one thread reads each filter
        // byte once.
        int64_t streamBlock = streamingFilterBlock(KH, KW, C, F, OW, NB * OH * OW, tuning);
        bool streaming = streamBlock > 0;
        int64_t fc = streaming ? streamBlock
                               : blockOf(F, rt.n, std::max<int64_t>(rt.n, tuning.l2Bytes / 2 / filterRowBytes));
        // The register tile within a block of fc filters (a multiple of the
        // tile the blocks were sized by), rows split off where a tile that
        // does not divide OW fits the registers better.
        RegisterTile reg = chooseRegisterTile(OW, fc, tuning, /*allowTail=*/true);
        int64_t convSid = sid;
        std::string h = tag();
        if (isa<linalg::Conv2DNhwcFhwcOp>(op)) h = schedule.op("transpose_conv2d", h);
        bool parallel = 2.0 * NB * OH * OW * F * KH * KW * C >= kParallelMinFlops;
        if (parallel) {
          // Blocks of output rows (and filter blocks) for the threads.
          int64_t ohb = streaming ? OH : rowBlockForThreads(OH, NB * (F / fc));
          parallel = NB * (OH / ohb) * (F / fc) > 1;
          SmallVector<int64_t> forallSizes = {NB > 1 ? 1 : 0, ohb == OH ? 0 : ohb, 0, fc == F ? 0 : fc};
          // Register tiles for computing in them: where the tile's vectors
          // would be partly empty (24 filters: 3 tiles of 8 lanes of 16),
          // tiles of whole vectors and one of the rest (16 + 8).
          RegisterTile cols = reg;
          bool peelCols = false;
          if (reg.n < lanes && fc == F && F > lanes && F % lanes) {
            cols = chooseRegisterTile(OW, lanes, tuning);
            peelCols = cols.n == lanes && OW % cols.m == 0;
            if (!peelCols) cols = reg;
          } else if (KH * KW * C * reg.n * 4 > kRegisterFusedColumnBytes && reg.n / 2 >= lanes) {
            // Narrower tiles where the tile's filter columns would not fit
            // (1x1 convs over 512 channels on 28-wide maps: 7 x 32, not
            // 4 x 64), while they still do enough FMAs per load.
            RegisterTile narrow = chooseRegisterTile(OW, reg.n / 2, tuning);
            if (narrow.n == reg.n / 2 && !narrow.tail && tileScore(narrow.m, narrow.n, tuning) >= kNarrowTileScore)
              cols = narrow;
          }
          if (parallel && inRegisters(op, f, cols, KH * KW * C)) {
            // The init and the epilogue in the register tiles: each tile's
            // accumulator starts from the init (the bias) in registers, runs
            // the whole reduction, and is finished (bias, activation,
            // residual) and stored once. Loops: filter tiles outermost (a
            // tile's filter columns stay in cache for every pixel), then
            // rows, then column tiles.
            inRegisterTiles(h, bounds, forallSizes, f, convSid, {NB > 1 ? 1 : 0, 1, cols.m, cols.n}, {0, 3, 1, 2},
                            peelCols);
            return;
          }
          if (parallel) h = tileFused(h, bounds, forallSizes, f);
        }
        if (!parallel) {
          unfused(f);
          h = schedule.tile(h, {0, 0, 0, fc == F ? 0 : fc, 0, 0, 0});
        }
        // Input-channel blocks whose filter slice (KH x KW x cb x one
        // register tile of filters) stays in L1 while every output row and
        // column tile of the block reuses it: without them each output row
        // streams the whole filter block from L2 again (a 1x1 conv with
        // 2048 channels ran at 6% of peak, blocked at 85%).
        // The block's rows of the (unpacked, HWCF) filter lie F floats
        // apart: with many filters each row is on a page of its own, and
        // with F * 4 a multiple of 4 KiB all of them fall into the same L1
        // sets. The rows a block spans are capped at 128 KiB: on an AVX2
        // host (Zen) the stride-2 1x1 conv 13x13x1024 -> 2048 went from
        // 7.2-7.4 to 2.7-3.4 ms per call (BM_ResNet50Conv/20). (Huge pages
        // do not remove such aliasing: it is in the L1 sets.)
        // Constant filters are now stored with padded rows (kiln-hoist-
        // constants), which removes the aliasing itself; the cap stays for
        // filters that are not, and dropping it for padded ones measured
        // within the noise.
        // A filter read from panels spans the panel's width, not F: layer
        // 4's 3x3 convs take blocks of 16 channels, not 4, its stride-2 1x1
        // 128, not 16 (those kernels 0.92-0.97x their time, ResNet-50 in
        // kiln profile --serial, alternating).
        int64_t panel = panelWidth(op);
        int64_t spanF = panel > 0 ? std::min(F, panel) : F;
        int64_t cbLimit = std::min<int64_t>(tuning.l1Bytes / (KH * KW * rt.n * 4),
                                            kFilterBlockSpanBytes / (KH * KW * spanF * 4));
        int64_t cb = blockOf(C, 1, std::max<int64_t>(1, cbLimit));
        // A panel's block reads its whole reduction where that slice stays
        // in L2 while every output row reuses it: the panel is then read
        // start to end in one run (blocks of 16 channels read 2 KiB runs
        // 64 KiB apart, nine at a time, each a new stream for the
        // prefetchers). Layer 4's 3x3 convs (590 KiB slices on AVX-512)
        // 0.80-0.90x their time, its stride-2 1x1 0.94x (kiln profile
        // --serial of ResNet-50, alternating).
        if (panel > 0 && KH * KW * C * rt.n * 4 <= kStreamedReductionBytes) cb = C;
        if (cb < C) h = schedule.tile(h, {0, 0, 0, 0, 0, 0, cb});
        registerTiles(schedule, h, /*rowDim=*/2, OW, reg, [&](int64_t rows) {
          return SmallVector<int64_t>{NB > 1 ? 1 : 0, 1, rows, reg.n, 1, 1, 1};
        });
        return;
      }
      if (isa<linalg::DepthwiseConv2DNhwcHwcOp, linalg::PoolingNhwcMaxOp, linalg::PoolingNhwcSumOp>(op) &&
          allF32(op)) {
        // Depthwise conv and pooling. Loops: n, oh, ow, c, kh, kw. Vectors
        // over channels, rows of output pixels; the accumulator stays in
        // registers across kh and kw.
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        int64_t NB = bounds[0], OH = bounds[1], OW = bounds[2], C = bounds[3];
        RegisterTile rt = chooseRegisterTile(OW, C, tuning);
        Fused f = fused[op];
        if (rt.n < 4) {
          unfused(f);
          return;
        }
        int64_t opSid = sid;
        std::string h = tag();
        bool parallel = 2.0 * NB * OH * OW * C * bounds[4] * bounds[5] >= kParallelMinFlops / 4;
        if (parallel) {
          int64_t ohb = rowBlockForThreads(OH, NB);
          parallel = NB * (OH / ohb) > 1;
          SmallVector<int64_t> forallSizes = {NB > 1 ? 1 : 0, ohb == OH ? 0 : ohb, 0, 0};
          if (parallel && (f.init || f.epilogue) && !computedOperands(op, f)) {
            // The init and epilogue in the register tiles, as for convs
            // (inRegisters): the window is small, so the whole reduction
            // runs in each tile anyway.
            inRegisterTiles(h, bounds, forallSizes, f, opSid, {NB > 1 ? 1 : 0, 1, rt.m, rt.n}, {},
                            /*peelFilters=*/false);
            return;
          }
          if (parallel) h = tileFused(h, bounds, forallSizes, f);
        }
        if (!parallel) unfused(f);
        h = schedule.tile(h, {NB > 1 ? 1 : 0, 1, rt.m, rt.n, 1, 1});
        h = schedule.op("decompose", h);
        schedule.vectorize(h);
        return;
      }
      if (isVectorizableOuterReduction(op)) {
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        int64_t inner = bounds.back();
        int64_t width = reductionWidth(inner, lanes * 32 / uniformFloatBits(op));
        if (width == 0) return;
        // Vectors across the innermost loop (and one element of the other
        // parallel loops), then the reduction loops one step at a time
        // inside: the accumulator vector stays in a register.
        auto iters = op.getIteratorTypesArray();
        SmallVector<int64_t> outer(bounds.size(), 0), reduction(bounds.size(), 0);
        for (size_t i = 0; i + 1 < bounds.size(); ++i) {
          if (bounds[i] == 1) continue;
          (iters[i] == utils::IteratorType::parallel ? outer : reduction)[i] = 1;
        }
        outer.back() = width == inner ? 0 : width;
        std::string h = schedule.tile(tag(), outer);
        h = schedule.tile(h, reduction);
        schedule.vectorize(h);
        return;
      }
      if (isVectorizableRowReduction(op)) {
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        int64_t inner = bounds.back();
        int64_t width = reductionWidth(inner, lanes * 32 / uniformFloatBits(op));
        if (width == 0 || inner == width) return;  // short or ragged rows stay on loops
        std::string h = parallelRows(schedule, tag(), op, bounds);
        SmallVector<int64_t> rows(bounds.size(), 0), split(bounds.size(), 0);
        for (size_t i = 0; i + 1 < bounds.size(); ++i) rows[i] = bounds[i] > 1 ? 1 : 0;
        split.back() = width;
        h = schedule.tile(h, rows);
        schedule.tileReduction(h, split);
        return;
      }
      if ((isa<linalg::FillOp>(op) && byteSizedElements(op)) || isVectorizableElementwise(op)) {
        SmallVector<int64_t> bounds = op.getStaticLoopRanges();
        std::string h = parallelRows(schedule, tag(), op, bounds);
        elementwise(schedule, h, bounds, lanes);
        return;
      }
    });
    if (sid != 0) {
      bool registerFusion = !registerPhase.empty();
      if (failed(apply(module, schedule.text(/*cleanup=*/!registerFusion)))) return signalPassFailure();
      if (registerFusion) {
        // The convs tiled for the threads leave their untiled originals
        // (now unused), which would match their tags too; panel filters
        // become panel reads, so that no transpose is left to fuse.
        eraseDeadTagged(module);
        readPanels(module);
        readMatmulPanels(module);
        if (failed(apply(module, registerPhase.text(/*cleanup=*/true, /*foldSubsets=*/true))))
          return signalPassFailure();
      }
      module.walk([](Operation *op) { op->removeAttr(kStrategyIdAttr); });
    }
    readPanels(module);
    readMatmulPanels(module);
    approximateVectorMath(module);
  }

  /// Erases tagged linalg ops on tensors whose results are unused.
  static void eraseDeadTagged(ModuleOp module) {
    SmallVector<Operation *> dead;
    module.walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kStrategyIdAttr) && op.hasPureTensorSemantics() && op->use_empty()) dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead)) op->erase();
  }

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
    IRRewriter rewriter(&getContext());
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

  /// Whether `v` is a multiple of `n`: a constant, the induction variable
  /// of an scf.for whose bounds and step are (its tiles' offsets), or what
  /// folds to one (the tiling's iv * n).
  static bool multipleOf(IRRewriter &rewriter, OpFoldResult v, int64_t n) {
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
    IRRewriter rewriter(&getContext());
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

  /// Transcendentals on vectors become polynomials (vectorized FMAs) instead
  /// of one libm call per lane. Scalars keep libm.
  void approximateVectorMath(ModuleOp module) {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](llvm::StringRef name) {
      return llvm::is_contained({"math.exp", "math.expm1", "math.log", "math.log1p", "math.log2", "math.tanh",
                                 "math.erf"},
                                name);
    });
    FrozenRewritePatternSet frozen(std::move(patterns));
    SmallVector<Operation *> targets;
    module.walk([&](Operation *op) {
      if (op->getDialect() && isa<math::MathDialect>(op->getDialect()) && op->getNumResults() == 1 &&
          isa<VectorType>(op->getResult(0).getType()))
        targets.push_back(op);
    });
    if (targets.empty()) return;
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    (void)applyOpPatternsGreedily(targets, frozen, config);
  }

  LogicalResult apply(ModuleOp module, const std::string &text) {
    OwningOpRef<ModuleOp> library = parseSourceString<ModuleOp>(text, ParserConfig(&getContext()));
    if (!library) return module.emitError("kiln-cpu-strategy: the generated schedule does not parse:\n") << text;
    transform::TransformOpInterface entry;
    library->walk([&](transform::NamedSequenceOp seq) {
      if (seq.getSymName() == "__transform_main") entry = cast<transform::TransformOpInterface>(seq.getOperation());
    });
    if (!entry) return module.emitError("kiln-cpu-strategy: no entry in the generated schedule");
    if (succeeded(transform::applyTransforms(module, entry, {}, transform::TransformOptions(),
                                             /*enforceToplevelTransformOp=*/false)))
      return success();
    return module.emitError("kiln-cpu-strategy: the schedule failed (lines above refer to it):\n") << text;
  }
};

}  // namespace
}  // namespace kiln::lowering
