// The rewrites kiln-cpu-strategy makes before its schedule (see Rewrites.h),
// each into the form an op strategy schedules well: depthwise convs
// (Window.cpp), conv filters and 1x1 convs (Conv.cpp, Matmul.cpp), batch-1
// matmuls with epilogues (Matmul.cpp).
#include "lowering/cpu/strategy/Fusion.h"
#include "lowering/cpu/strategy/Rewrites.h"
#include "lowering/cpu/strategy/Support.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln::lowering::strategy {
namespace {

/// The reshapes a rank change leaves behind folded away: collapse of
/// expand (and back), reshapes of fills and of empty tensors.
void foldReshapes(ModuleOp module) {
  RewritePatternSet patterns(module.getContext());
  linalg::FillOp::getCanonicalizationPatterns(patterns, module.getContext());
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, module.getContext());
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, module.getContext());
  tensor::EmptyOp::getCanonicalizationPatterns(patterns, module.getContext());
  tensor::populateFoldTensorEmptyPatterns(patterns);
  (void)applyPatternsGreedily(module, std::move(patterns));
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
  IRRewriter rewriter(module.getContext());
  for (linalg::GenericOp op : generics) {
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::DropUnitDimsResult> dropped = linalg::dropUnitDims(rewriter, op, options);
    if (failed(dropped)) continue;
    rewriter.replaceOp(op, dropped->replacements);
  }
  foldReshapes(module);
}

}  // namespace

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

int64_t groupedRowBlock(int64_t oh, int64_t ow, int64_t channelBytes) {
  if (channelBytes >= 64) return 0;  // (a group's own lines: each group's conv is parallel by rows itself)
  int64_t bh = oh;
  while (oh / bh < kGroupedRowBlocks && bh > 1) bh = blockOf(oh, 1, bh - 1);
  return oh / bh > 1 && bh * ow >= kGroupedRowBlockPixels ? bh : 0;
}

/// A grouped conv: out[n, oh, ow, g, f] = sum in[n, ., ., g, c] *
/// filter[g, f, kh, kw, c]. Each group is a conv of its own on slices
/// (the input's and output's channels of group g are strided views), run
/// as FHWC convs, which the conv strategy tiles, vectorizes over the
/// group's filters and (when big enough) parallelizes; one compiled loop
/// serves every group, where one TOSA conv per group would compile per
/// group. Groups too small for the conv strategy's parallel blocks (every
/// RegNet's and ResNeXt's: 8 channels in and out) run in parallel with one
/// another (an scf.forall over the groups), where together they are worth
/// the threads: RegNetY-400MF's first grouped conv, 6 groups on a 56x56
/// map, ran on one thread. Bigger groups run one after the other, each
/// conv parallel itself.
///
/// Where a map is big enough, the threads take blocks of output rows
/// instead, each running every group over its rows (groupedRowBlock):
/// the channels of one group are a strided slice of every pixel, so a
/// thread per group read every row of an input that the conv before had
/// just written in row blocks, half of it in the other core's cache, and
/// two groups share each cache line of it.
void groupedConvsAsLoops(ModuleOp module, const CpuTuning &tuning) {
  SmallVector<linalg::Conv2DNhwgcGfhwcOp> convs;
  module.walk([&](linalg::Conv2DNhwgcGfhwcOp op) {
    if (op.hasPureTensorSemantics() && allStatic(op) && allF32(op)) convs.push_back(op);
  });
  for (linalg::Conv2DNhwgcGfhwcOp op : convs) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto in = cast<RankedTensorType>(op.getInputs()[0].getType());      // N H W G C
    auto filter = cast<RankedTensorType>(op.getInputs()[1].getType());  // G F KH KW C
    auto out = cast<RankedTensorType>(op.getOutputs()[0].getType());    // N OH OW G F
    auto drop = [](RankedTensorType t, int64_t dim) {
      SmallVector<int64_t> shape(t.getShape());
      shape.erase(shape.begin() + dim);
      return RankedTensorType::get(shape, t.getElementType());
    };
    auto slice = [&](OpBuilder &nb, RankedTensorType t, int64_t dim, Value g) {
      SmallVector<OpFoldResult> offsets(t.getRank(), nb.getIndexAttr(0)), sizes, strides(t.getRank(), nb.getIndexAttr(1));
      for (int64_t s : t.getShape()) sizes.push_back(nb.getIndexAttr(s));
      offsets[dim] = g;
      sizes[dim] = nb.getIndexAttr(1);
      return std::make_tuple(offsets, sizes, strides);
    };
    RankedTensorType part = drop(out, 3);
    // Group g's conv, accumulating into `outs`' slice of the group;
    // returns the result and where it goes.
    auto groupConv = [&](OpBuilder &nb, Location l, Value g, Value outs) {
      auto [io, is, ist] = slice(nb, in, 3, g);
      Value x = tensor::ExtractSliceOp::create(nb, l, drop(in, 3), op.getInputs()[0], io, is, ist);
      auto [fo, fs, fst] = slice(nb, filter, 0, g);
      Value w = tensor::ExtractSliceOp::create(nb, l, drop(filter, 0), op.getInputs()[1], fo, fs, fst);
      auto [oo, os, ost] = slice(nb, out, 3, g);
      Value acc = tensor::ExtractSliceOp::create(nb, l, part, outs, oo, os, ost);
      Value y = linalg::Conv2DNhwcFhwcOp::create(nb, l, TypeRange{part}, ValueRange{x, w}, ValueRange{acc},
                                                 op.getStrides(), op.getDilations())
                    ->getResult(0);
      return std::make_tuple(y, oo, os, ost);
    };
    const int64_t groups = in.getDimSize(3);
    const double groupFlops = 2.0 * part.getNumElements() * filter.getDimSize(2) * filter.getDimSize(3) *
                              filter.getDimSize(4);
    Operation *loop;
    const double minFlops = parallelMinFlops(tuning);
    if (int64_t bh = groupedRowBlock(out.getDimSize(1), out.getDimSize(2), in.getDimSize(4) * 4);
        groups > 1 && bh && groupFlops * double(groups) >= minFlops) {
      // Row blocks in parallel, the groups one after the other in each:
      // block b's output rows [b*bh, (b+1)*bh) read input rows from
      // b*bh*sh, (bh-1)*sh + (KH-1)*dh + 1 of them (the input is padded).
      const int64_t OH = out.getDimSize(1);
      const int64_t sh = op.getStrides().getValues<int64_t>()[0], dh = op.getDilations().getValues<int64_t>()[0];
      const int64_t inRows = (bh - 1) * sh + (filter.getDimSize(2) - 1) * dh + 1;
      auto forall = scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(OH / bh)},
                                          ValueRange{op.getOutputs()[0]}, std::nullopt);
      OpBuilder nb = OpBuilder::atBlockBegin(forall.getBody());
      auto rowsFrom = [&](int64_t rowsPerBlock) {
        return arith::MulIOp::create(nb, loc, forall.getInductionVar(0),
                                     arith::ConstantIndexOp::create(nb, loc, rowsPerBlock))
            .getResult();
      };
      Value oh0 = rowsFrom(bh), ih0 = rowsFrom(bh * sh);
      // Rows [lo, lo + n) of `t` (dim 1): `slice` of group g (dim 3), or of
      // every group when g is null.
      auto rows = [&](OpBuilder &rb, RankedTensorType t, Value lo, int64_t n, Value g) {
        auto s = g ? slice(rb, t, 3, g) : slice(rb, t, 1, lo);
        std::get<0>(s)[1] = lo;
        std::get<1>(s)[1] = rb.getIndexAttr(n);
        return s;
      };
      auto withRows = [](RankedTensorType t, int64_t n) {
        SmallVector<int64_t> shape(t.getShape());
        shape[1] = n;
        return RankedTensorType::get(shape, t.getElementType());
      };
      RankedTensorType blockType = withRows(out, bh);
      auto [bo, bs, bst] = rows(nb, out, oh0, bh, Value());
      Value block = tensor::ExtractSliceOp::create(nb, loc, blockType, forall.getRegionIterArgs()[0], bo, bs, bst);
      Value lb = arith::ConstantIndexOp::create(nb, loc, 0), ub = arith::ConstantIndexOp::create(nb, loc, groups),
            step = arith::ConstantIndexOp::create(nb, loc, 1);
      auto perGroup = scf::ForOp::create(nb, loc, lb, ub, step, ValueRange{block},
                                         [&](OpBuilder &fb, Location l, Value g, ValueRange iter) {
        auto [xo, xs, xst] = rows(fb, in, ih0, inRows, g);
        Value x = tensor::ExtractSliceOp::create(fb, l, drop(withRows(in, inRows), 3), op.getInputs()[0], xo, xs, xst);
        auto [fo, fs, fst] = slice(fb, filter, 0, g);
        Value w = tensor::ExtractSliceOp::create(fb, l, drop(filter, 0), op.getInputs()[1], fo, fs, fst);
        auto [oo, os, ost] = slice(fb, blockType, 3, g);
        Value acc = tensor::ExtractSliceOp::create(fb, l, drop(blockType, 3), iter[0], oo, os, ost);
        Value y = linalg::Conv2DNhwcFhwcOp::create(fb, l, TypeRange{acc.getType()}, ValueRange{x, w}, ValueRange{acc},
                                                   op.getStrides(), op.getDilations())
                      ->getResult(0);
        scf::YieldOp::create(fb, l, tensor::InsertSliceOp::create(fb, l, y, iter[0], oo, os, ost).getResult());
      });
      nb.setInsertionPointToEnd(forall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(nb, loc, perGroup.getResult(0), forall.getRegionIterArgs()[0], bo, bs,
                                            bst);
      loop = forall;
    } else if (groups > 1 && groupFlops < minFlops && groupFlops * double(groups) >= minFlops) {
      auto forall = scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(groups)},
                                          ValueRange{op.getOutputs()[0]}, std::nullopt);
      OpBuilder nb = OpBuilder::atBlockBegin(forall.getBody());
      auto [y, oo, os, ost] = groupConv(nb, loc, forall.getInductionVar(0), forall.getRegionIterArgs()[0]);
      nb.setInsertionPointToEnd(forall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(nb, loc, y, forall.getRegionIterArgs()[0], oo, os, ost);
      loop = forall;
    } else {
      Value lb = arith::ConstantIndexOp::create(b, loc, 0), ub = arith::ConstantIndexOp::create(b, loc, groups),
            step = arith::ConstantIndexOp::create(b, loc, 1);
      loop = scf::ForOp::create(b, loc, lb, ub, step, ValueRange{op.getOutputs()[0]},
                                [&](OpBuilder &nb, Location l, Value g, ValueRange iter) {
                                  auto [y, oo, os, ost] = groupConv(nb, l, g, iter[0]);
                                  Value next = tensor::InsertSliceOp::create(nb, l, y, iter[0], oo, os, ost);
                                  scf::YieldOp::create(nb, l, next);
                                });
    }
    op->replaceAllUsesWith(loop->getResults());
    op->erase();
  }
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
    auto t = op.getInputs()[1].getDefiningOp<linalg::TransposeOp>();
    auto conv = linalg::Conv2DNhwcHwcfOp::create(b, op.getLoc(), op->getResultTypes(),
                                                 ValueRange{op.getInputs()[0], t.getInput()}, op.getOutputs(),
                                                 op.getStrides(), op.getDilations());
    op->replaceAllUsesWith(conv);
    op->erase();
    // The transpose is dead now: gone before the strategies plan (and
    // describe) it.
    if (t->use_empty()) t->erase();
  }
}

/// A conv's strides (h, w).
static std::pair<int64_t, int64_t> convStrides(linalg::LinalgOp op) {
  auto strides = op->getAttrOfType<DenseIntElementsAttr>("strides");
  if (!strides) return {1, 1};
  auto s = strides.getValues<int64_t>();
  return {s[0], s[1]};
}

/// A 1x1 conv (NHWC) is a matmul of its pixels, [N*H*W, C], by
/// its filter, [C, F]: it becomes a linalg.matmul on collapsed views, and
/// its accumulator init and elementwise epilogue are collapsed with it
/// (the reshapes between them fold), so that the matmul strategy tiles
/// it with its fused ops. As a conv the register tile's rows must divide
/// the output width (4 x 64 on a 28-wide map); as a matmul they may take
/// any number of pixels. Convs that stream their filter keep the conv
/// strategy (and its panels).
/// A strided 1x1 conv reads every s-th pixel: the matmul takes a copy of
/// those ([N, OH, OW, C], a copy in parallel vector tiles). ResNet-50's
/// downsampling projections at batch 8 (392 to 6272 pixels; at batch 1
/// they stream their filters or keep the conv's tile): the 1x1 1024 ->
/// 2048 on 7x7 12.7 -> 7.9 ms, 512 -> 1024 on 14x14 8.1 -> 7.6 ms
/// (minimum of 18 calls in `kiln profile --serial`, alternating; alone,
/// BM_ResNet50ConvBatch8/8, 14, 20: 0.91-0.96x). (At batch 1 the same
/// copy before the conv strategy had measured no faster: docs/codegen-cpu.md.)
void convs1x1AsMatmuls(ModuleOp module, const CpuTuning &tuning) {
  SmallVector<linalg::LinalgOp> convs;
  module.walk([&](linalg::LinalgOp op) {
    if (!isa<linalg::Conv2DNhwcFhwcOp, linalg::Conv2DNhwcHwcfOp>(op) || !op.hasPureTensorSemantics() ||
        !allStatic(op) || !allF32(op))
      return;
    auto in = cast<RankedTensorType>(op.getDpsInputOperand(0)->get().getType());
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();  // n, oh, ow, f, kh, kw, c
    if (bounds[4] != 1 || bounds[5] != 1) return;
    // A strided 1x1 conv (ResNet's downsampling projections) reads every
    // s-th pixel: those are copied together first (convStrides).
    auto [sh, sw] = convStrides(op);
    if ((in.getDimSize(1) - 1) / sh + 1 != out.getDimSize(1) || (in.getDimSize(2) - 1) / sw + 1 != out.getDimSize(2))
      return;
    int64_t pixels = bounds[0] * bounds[1] * bounds[2], ow = bounds[2], f = bounds[3];
    if (streamingFilterBlock(1, 1, bounds[6], f, ow, pixels, tuning) > 0) return;
    // A filter stored in panels (laid out for batch 1, where it streams)
    // is read panel by panel by the conv strategy at every batch; as a
    // matmul it went back to FHWC and then to [C, F], two copies of the
    // whole filter on every call (ResNet-50's 1x1 1024 -> 2048 on 7x7 at
    // batch 8: 34% of peak against 80% at batch 1).
    if (panelWidth(op) > 0) return;
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
  IRRewriter rewriter(module.getContext());
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
    Value input = op.getDpsInputOperand(0)->get();
    if (auto [sh, sw] = convStrides(op); sh != 1 || sw != 1) {
      // The pixels the conv reads, copied into a tensor of their own (a
      // strided view's rows cannot be collapsed into the matmul's).
      auto type = cast<RankedTensorType>(input.getType());
      auto outType = cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<int64_t> sizes = {outType.getDimSize(0), outType.getDimSize(1), outType.getDimSize(2),
                                    type.getDimSize(3)};
      auto sliceType = RankedTensorType::get(sizes, type.getElementType());
      Value strided = tensor::ExtractSliceOp::create(rewriter, loc, sliceType, input, ValueRange{}, ValueRange{},
                                                     ValueRange{}, rewriter.getDenseI64ArrayAttr({0, 0, 0, 0}),
                                                     rewriter.getDenseI64ArrayAttr(sizes),
                                                     rewriter.getDenseI64ArrayAttr({1, sh, sw, 1}));
      Value empty = tensor::EmptyOp::create(rewriter, loc, sizes, type.getElementType());
      input = linalg::CopyOp::create(rewriter, loc, strided, empty)->getResult(0);
    }
    auto mm = linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()}, ValueRange{flat(input), b},
                                       ValueRange{init});
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

/// `generic` without its unit loop 0 (operands collapsed, result expanded,
/// uses replaced); the new op, or null when it cannot be dropped.
static linalg::GenericOp dropLoop0(IRRewriter &rewriter, linalg::GenericOp generic) {
  linalg::ControlDropUnitDims options;
  Operation *target = generic.getOperation();
  options.controlFn = [target](Operation *op) {
    return op == target ? SmallVector<unsigned>{0} : SmallVector<unsigned>{};
  };
  rewriter.setInsertionPoint(generic);
  FailureOr<linalg::DropUnitDimsResult> dropped = linalg::dropUnitDims(rewriter, generic, options);
  if (failed(dropped)) return nullptr;
  rewriter.replaceOp(generic, dropped->replacements);
  return cast<linalg::GenericOp>(dropped->resultOp.getOperation());
}

/// A matmul of batch 1 whose only user is an elementwise op over its 3-D
/// result (what ONNX's MatMul on [1, M, K] + a GELU becomes: no reshape
/// between them): the epilogue loses its unit batch loop (operands
/// collapsed, result expanded), so that it reads the result through a
/// collapse to 2-D, the form flattenMatmulEpilogues takes next. Without it
/// the epilogue was a pass of its own over the whole output (BERT-base's
/// up-projections from ONNX at 66% of peak, from torch-mlir at 84%).
static void flattenEpiloguesOfBatchOne(ModuleOp module) {
  SmallVector<linalg::GenericOp> epilogues;
  module.walk([&](linalg::BatchMatmulOp op) {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!op.hasPureTensorSemantics() || op.hasUserDefinedMaps() || !type || !type.hasStaticShape() ||
        type.getDimSize(0) != 1 || !allF32(op) || !op->getResult(0).hasOneUse())
      return;
    auto epilogue = dyn_cast<linalg::GenericOp>(*op->getResult(0).getUsers().begin());
    if (!epilogue || !isVectorizableElementwise(epilogue) || epilogue.getNumLoops() != 3 ||
        epilogue.getStaticLoopRanges()[0] != 1)
      return;
    for (OpOperand &in : epilogue->getOpOperands())
      if (in.get() == op->getResult(0) && !epilogue.getMatchingIndexingMap(&in).isIdentity()) return;
    epilogues.push_back(epilogue);
  });
  if (epilogues.empty()) return;
  IRRewriter rewriter(module.getContext());
  for (linalg::GenericOp epilogue : epilogues) (void)dropLoop0(rewriter, epilogue);
}

/// A matmul of batch 1 whose result is flattened for an elementwise
/// epilogue (what TOSA's 3-D matmul + reshape + bias add become) as a 2-D
/// linalg.matmul the epilogue reads directly, and an elementwise op that
/// follows the epilogue through a reshape back to 3-D (BERT's GELU after
/// the bias) fused into it: the epilogue can then be fused into the
/// matmul's parallel tiles like a conv's.
void flattenMatmulEpilogues(ModuleOp module) {
  flattenEpiloguesOfBatchOne(module);
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
  IRRewriter rewriter(module.getContext());
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
  // The epilogue's elementwise successor through expand_shape to 1 x M x N,
  // or to any shape whose leading dims make M and whose last is N
  // (ConvNeXt's 1 x H x W x C GELU after its pointwise linear): its loops
  // before the last collapsed into one, the reshapes cancel, and the two
  // fuse.
  for (Value r : results) {
    if (!r.hasOneUse()) continue;
    auto epilogue = dyn_cast<linalg::GenericOp>(*r.getUsers().begin());
    if (!epilogue || !isVectorizableElementwise(epilogue) || !epilogue->getResult(0).hasOneUse()) continue;
    auto expand = dyn_cast<tensor::ExpandShapeOp>(*epilogue->getResult(0).getUsers().begin());
    if (!expand || !expand->hasOneUse()) continue;
    SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
    int64_t rank = expand.getResultType().getRank();
    if (rank < 3 || groups.size() != 2 || groups[1].size() != 1) continue;
    auto next = dyn_cast<linalg::GenericOp>(*expand->getUsers().begin());
    if (!next || !isVectorizableElementwise(next) || next.getNumLoops() != rank) continue;
    linalg::GenericOp flatNext;
    rewriter.setInsertionPoint(next);
    // Only where every operand is read through a projected permutation:
    // upstream's collapse of an operand broadcast with constant indices
    // (ConvNeXt's layer scale, [1, 1, 1, C] read at (0, 0, 0, c)) gives
    // it the collapsed rank but keeps its map's 4 results (an invalid op).
    bool collapsible = llvm::all_of(next.getIndexingMapsArray(),
                                    [](AffineMap m) { return m.isProjectedPermutation(/*allowZeroInResults=*/false); });
    FailureOr<linalg::CollapseResult> collapsed = failure();
    if (collapsible) collapsed = linalg::collapseOpIterationDims(next, {groups[0]}, rewriter);
    if (succeeded(collapsed)) {
      rewriter.replaceOp(next, collapsed->results);
      flatNext = dyn_cast<linalg::GenericOp>(collapsed->collapsedOp.getOperation());
    } else if (rank == 3 && expand.getResultType().getDimSize(0) == 1) {
      flatNext = dropLoop0(rewriter, next);
    }
    if (!flatNext) continue;
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

}  // namespace kiln::lowering::strategy
