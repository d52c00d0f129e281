//===- CpuStrategy.cpp - per-op code-generation strategy for the host CPU -===//
//
// kiln-cpu-strategy: on linalg-on-tensors, chooses for each op a strategy
// from its class, its static shapes and the host (vector width, vector
// registers, L2 size), writes the strategies of the whole module as one
// transform-dialect schedule and applies it with the transform interpreter.
//
// This file is the pass: the order of its steps. What it does to each op
// class is in lowering/cpu/strategy/, one file per class behind one
// interface (OpStrategy.h: recognize, choose, write):
//
//   Matmul.cpp       matmul, batch_matmul: parallel blocks, a k block,
//                    register tiles lowered to outer products
//   Conv.cpp         NHWC convs: HWCF filters, blocks of rows and filters
//                    sized for L2 (streamed filters: one panel per block),
//                    register tiles over (output width, output channels)
//   Window.cpp       depthwise convs, pooling: rows of pixels x channel
//                    vectors, the accumulator kept across the window
//   Reduction.cpp    outer and row reductions
//   Elementwise.cpp  elementwise ops and fills: whole vectors, one static
//                    tail
//   Pad.cpp          pads: the interior copied, fills of the border only
//   Transpose.cpp    transposes of activations that keep the innermost
//                    dimension: rows in vectors
//
// An anchor's (matmul, conv, depthwise conv, pooling) accumulator init and
// elementwise epilogue run inside its parallel tiles, or in its register
// tiles where those read little enough (Fusion.h, Writer.h: a second
// schedule, the register phase, applied after the first and after the
// panel reads). Register tiles: chooseRegisterTile (Tuning.cpp).
//
// Attention (RowFusion.cpp): softmax(Q Kᵀ) x V in one cluster becomes one
// scf.forall over (head, block of query rows) with the softmax and Q Kᵀ
// fused into its tiles, before the per-op strategies, which then schedule
// the ops inside it on one thread each.
//
// Steps: the rewrites before the schedule (Rewrites.h: Prepare.cpp,
// Pad.cpp, RowFusion.cpp); fused ops claimed by their anchors; each remaining static op
// on tensors scheduled by the first strategy that recognizes it; the
// schedule applied; panel reads (Panels.cpp); the register phase;
// polynomial approximations of vector transcendentals.
//
//===----------------------------------------------------------------------===//
#include "lowering/cpu/Passes.h"
#include "lowering/cpu/CpuStrategy.h"
#include "lowering/cpu/strategy/OpStrategy.h"
#include "lowering/cpu/strategy/Rewrites.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/IR/TransformOps.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

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

  void runOnOperation() override {
    if (vectorBits <= 0) return;
    CpuTuning tuning{vectorBits, vectorRegisters, l2Bytes, l1Bytes, fmaPipes};
    ModuleOp module = getOperation();
    dropUnitMultiplier(module);
    groupedConvsAsLoops(module, tuning);
    hwcfFilters(module);
    decomposePads(module);
    convs1x1AsMatmuls(module, tuning);
    fuseAttention(module, tuning);
    flattenMatmulEpilogues(module);
    fuseRowChains(module, tuning);
    ScheduleWriter w(&getContext(), tuning);
    // The fused loops first: what the ops inside them run in.
    module.walk([&](Operation *op) {
      if (auto what = op->getAttrOfType<StringAttr>(kFusedRowsAttr)) {
        w.describe(what.str());
        op->removeAttr(kFusedRowsAttr);
      }
    });
    w.fuseIntoAnchors(module);
    module.walk([&](linalg::LinalgOp op) {
      if (!op.hasPureTensorSemantics() || w.claimed(op)) return;
      if (allStatic(op))
        if (const OpStrategy *strategy = strategyFor(op)) return strategy->schedule(op, w);
      op->setAttr(kOnLoopsAttr, UnitAttr::get(&getContext()));
    });
    if (w.tagged()) {
      bool registerFusion = !w.registerPhase().empty();
      if (failed(apply(module, w.schedule().text(/*cleanup=*/!registerFusion)))) return signalPassFailure();
      if (registerFusion) {
        // The convs tiled for the threads leave their untiled originals
        // (now unused), which would match their tags too; panel filters
        // become panel reads, so that no transpose is left to fuse.
        eraseDeadTagged(module);
        readPanels(module);
        readMatmulPanels(module);
        if (failed(apply(module, w.registerPhase().text(/*cleanup=*/true, /*foldSubsets=*/true))))
          return signalPassFailure();
      }
      module.walk([](Operation *op) { op->removeAttr(kStrategyIdAttr); });
    }
    readPanels(module);
    readMatmulPanels(module);
    approximateVectorMath(module);
    describe(module, w);
  }

  /// The module's strategy text (kStrategyAttr): the strategies' lines,
  /// and the ops no strategy took that are still there (a transpose that
  /// became panel reads is not).
  void describe(ModuleOp module, ScheduleWriter &w) {
    module.walk([&](linalg::LinalgOp op) {
      if (!op->hasAttr(kOnLoopsAttr)) return;
      op->removeAttr(kOnLoopsAttr);
      w.describe("loops: " + opName(op) + (allStatic(op) ? "" : " (dynamic shapes)"));
    });
    if (std::string text = w.description(); !text.empty())
      module->setAttr(kStrategyAttr, StringAttr::get(&getContext(), text));
  }

  /// Marks the ops no strategy took until the pass describes them.
  static constexpr llvm::StringLiteral kOnLoopsAttr = "kiln.on_loops";

  /// "transpose 1x128x12x64" for a linalg.transpose (its loop ranges;
  /// "?" where dynamic).
  static std::string opName(linalg::LinalgOp op) {
    return op->getName().stripDialect().str() + " " + loopRangesText(op);
  }

  /// Erases tagged linalg ops on tensors whose results are unused.
  static void eraseDeadTagged(ModuleOp module) {
    SmallVector<Operation *> dead;
    module.walk([&](linalg::LinalgOp op) {
      if (op->hasAttr(kStrategyIdAttr) && op.hasPureTensorSemantics() && op->use_empty()) dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead)) op->erase();
  }

  /// Whether `v` is a constant (or a broadcast of one) whose every element
  /// is finite and at least `atLeast`.
  static bool finiteConstantAtLeast(Value v, double atLeast) {
    if (auto bc = v.getDefiningOp<vector::BroadcastOp>()) v = bc.getSource();
    Attribute attr;
    if (!matchPattern(v, m_Constant(&attr))) return false;
    auto ok = [&](const APFloat &f) { return f.isFinite() && f.convertToDouble() >= atLeast; };
    if (auto f = dyn_cast<FloatAttr>(attr)) return ok(f.getValue());
    if (auto d = dyn_cast<DenseFPElementsAttr>(attr)) return llvm::all_of(d.getValues<APFloat>(), ok);
    return false;
  }

  /// A sigmoid's exp on f32 vectors — c / (exp(y) + k), c finite, k >= 1:
  /// what TOSA's sigmoid (and so SiLU) lowers to — as Cephes' expf on y
  /// clamped to [-87, 88]: the quotient changes by under 1e-38 there (1 +
  /// exp(-87) is 1 in f32; c / (1 + exp(88)) < 6.1e-39 c), so the
  /// general expansion's handling of overflow, underflow and infinities is
  /// not needed. k = round(y log2 e) comes from adding 1.5 x 2^23 + 127 in
  /// the FMA (its low bits are then k + 127, shifted into 2^k's exponent:
  /// no round or convert); exp(r) on |r| <= ln 2 / 2 by Cephes' degree-7
  /// polynomial (about 1e-7 relative). 16 vector ops where MLIR's exp takes
  /// 22: EfficientNet-B0's SiLU epilogues.
  static void expandSigmoidExps(ModuleOp module) {
    SmallVector<math::ExpOp> exps;
    module.walk([&](math::ExpOp exp) {
      auto vt = dyn_cast<VectorType>(exp.getType());
      if (!vt || !vt.getElementType().isF32() || !exp->hasOneUse()) return;
      auto add = dyn_cast<arith::AddFOp>(*exp->user_begin());
      if (!add || !add->hasOneUse()) return;
      if (!finiteConstantAtLeast(add.getLhs() == exp.getResult() ? add.getRhs() : add.getLhs(), 1.0)) return;
      auto div = dyn_cast<arith::DivFOp>(*add->user_begin());
      if (!div || div.getRhs() != add.getResult() || !finiteConstantAtLeast(div.getLhs(), -HUGE_VAL)) return;
      exps.push_back(exp);
    });
    for (math::ExpOp exp : exps) {
      OpBuilder b(exp);
      Location loc = exp.getLoc();
      auto vt = cast<VectorType>(exp.getType());
      auto f = [&](float v) -> Value {
        return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(v)));
      };
      Value y = arith::MinimumFOp::create(b, loc, arith::MaximumFOp::create(b, loc, exp.getOperand(), f(-87.0f)),
                                          f(88.0f));
      const float magic = 12582912.0f + 127.0f;
      Value n = math::FmaOp::create(b, loc, y, f(1.44269504088896341f), f(magic));
      Value k = arith::SubFOp::create(b, loc, n, f(magic));
      Value r = math::FmaOp::create(b, loc, k, f(-0.693359375f), y);
      r = math::FmaOp::create(b, loc, k, f(2.12194440e-4f), r);
      Value p = f(1.9875691500e-4f);
      for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
        p = math::FmaOp::create(b, loc, p, r, f(c));
      Value e = math::FmaOp::create(b, loc, p, arith::MulFOp::create(b, loc, r, r), r);
      e = arith::AddFOp::create(b, loc, e, f(1.0f));
      auto it = VectorType::get(vt.getShape(), b.getI32Type());
      Value bits = arith::ShLIOp::create(b, loc, arith::BitcastOp::create(b, loc, it, n),
                                         arith::ConstantOp::create(b, loc, DenseElementsAttr::get(it, b.getI32IntegerAttr(23))));
      Value scaled = arith::MulFOp::create(b, loc, e, arith::BitcastOp::create(b, loc, vt, bits));
      exp.replaceAllUsesWith(scaled);
      exp.erase();
    }
  }

  /// Transcendentals on vectors become polynomials (vectorized FMAs) instead
  /// of one libm call per lane. Scalars keep libm.
  void approximateVectorMath(ModuleOp module) {
    expandSigmoidExps(module);
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
