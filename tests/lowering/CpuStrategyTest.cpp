// The host tuning and the register-tile choice of kiln-cpu-strategy.
#include "lowering/cpu/CpuStrategy.h"
#include "lowering/cpu/strategy/OpStrategy.h"
#include "lowering/cpu/strategy/Support.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln::lowering;

TEST(CpuStrategy, TuningFromFeatures) {
  CpuTuning avx512 = CpuTuning::fromFeatures("+avx,+avx2,+avx512f,+fma,-sse4a");
  EXPECT_EQ(avx512.vectorBits, 512);
  EXPECT_EQ(avx512.vectorRegisters, 32);
  CpuTuning avx2 = CpuTuning::fromFeatures("+avx,+avx2,-avx512f,+fma");
  EXPECT_EQ(avx2.vectorBits, 256);
  EXPECT_EQ(avx2.vectorRegisters, 16);
  EXPECT_EQ(CpuTuning::fromFeatures("+sse2,-avx").vectorBits, 128);
  // A cap narrows an AVX-512 host to the AVX2 strategy, registers included.
  CpuTuning capped = CpuTuning::fromFeatures("+avx2,+avx512f", 256);
  EXPECT_EQ(capped.vectorBits, 256);
  EXPECT_EQ(capped.vectorRegisters, 16);
  EXPECT_EQ(capped.passOptions(),
            "vector-bits=256 vector-registers=16 l2-bytes=524288 l1-bytes=32768 fma-pipes=1");
  // Two 512-bit FMA pipes where AMX says the core is a Xeon from Sapphire
  // Rapids on; not when the strategy is capped to 256 bits, not on Zen 4.
  EXPECT_EQ(avx512.fmaPipes, 1);
  EXPECT_EQ(CpuTuning::fromFeatures("+avx2,+avx512f,+amx-tile,+amx-bf16").fmaPipes, 2);
  EXPECT_EQ(CpuTuning::fromFeatures("+avx2,+avx512f,+amx-tile", 256).fmaPipes, 1);
  EXPECT_EQ(CpuTuning::fromFeatures("+avx2,+avx512f,+avx512bf16,-amx-tile").fmaPipes, 1);
}

// With two FMA pipes a matmul's register tile takes more rows of the same
// columns (BERT-base's 128 rows: 6x64 and a 2-row tail, not 4x64); a
// tile that fits the rows and scores no better stays.
TEST(CpuStrategy, TwoFmaPipesTakeTallerMatmulTiles) {
  using kiln::lowering::strategy::matmulBlocks;
  CpuTuning one = CpuTuning::fromFeatures("+avx2,+avx512f");
  CpuTuning two = CpuTuning::fromFeatures("+avx2,+avx512f,+amx-tile");
  for (int64_t k : {768, 3072}) {
    auto a = matmulBlocks(1, 128, 768, k, one), b = matmulBlocks(1, 128, 768, k, two);
    EXPECT_EQ(a.rb.m, 4);
    EXPECT_EQ(a.rb.n, 64);
    EXPECT_EQ(a.rb.tail, 0);
    EXPECT_EQ(b.rb.m, 6) << "K " << k;
    EXPECT_EQ(b.rb.n, 64);
    EXPECT_EQ(b.rb.tail, 2);
    // The blocks (and so the weights' panels) are the same.
    EXPECT_EQ(a.nc, b.nc);
    EXPECT_EQ(a.kc, b.kc);
    EXPECT_EQ(a.mc, b.mc);
  }
  // 120 rows: 6x64 divides them, the same on both.
  EXPECT_EQ(matmulBlocks(1, 120, 768, 768, two).rb.m, matmulBlocks(1, 120, 768, 768, one).rb.m);
}

TEST(CpuStrategy, RegisterTilesFitTheRegistersAndDivideTheShape) {
  for (CpuTuning t : {CpuTuning::fromFeatures("+avx512f"), CpuTuning::fromFeatures("+avx2")})
    for (bool allowTail : {false, true}) {
      int64_t lanes = t.vectorBits / 32;
      for (int64_t m : {1, 3, 7, 8, 14, 56, 128, 3136})
        for (int64_t n : {1, 3, 12, 16, 64, 100, 768, 1000}) {
          RegisterTile rt = chooseRegisterTile(m, n, t, allowTail);
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + " at " + std::to_string(t.vectorBits) +
                       (allowTail ? " with tails" : ""));
          // Without tails the rows divide m; with them the tail is what is
          // left of m after whole tiles.
          EXPECT_EQ(m % rt.m, rt.tail);
          if (!allowTail) {
            EXPECT_EQ(rt.tail, 0);
          }
          EXPECT_LT(rt.tail, rt.m);
          EXPECT_EQ(n % rt.n, 0);
          EXPECT_EQ(rt.n & (rt.n - 1), 0) << "vector lengths are powers of two";
          int64_t vecs = (rt.n + lanes - 1) / lanes;
          EXPECT_LE(rt.m * vecs + vecs + 1, t.vectorRegisters);
        }
    }
  // Big shapes fill the registers: whole vectors, several rows.
  RegisterTile big512 = chooseRegisterTile(3136, 64, CpuTuning::fromFeatures("+avx512f"));
  EXPECT_EQ(big512.n % 16, 0);
  EXPECT_GE(big512.m * big512.n, 256);
  // 96 channels: 2 zmm (32), never a 3-zmm vector<48xf32>.
  EXPECT_EQ(chooseRegisterTile(112, 96, CpuTuning::fromFeatures("+avx512f")).n, 32);
  RegisterTile big256 = chooseRegisterTile(128, 768, CpuTuning::fromFeatures("+avx2"));
  EXPECT_EQ(big256.n % 8, 0);
  EXPECT_GE(big256.m * big256.n, 64);
}

// A tile that does not divide the rows is taken only when it is clearly
// better: AVX2's 16 ymm registers cannot hold 7 rows of 2 vectors, so a
// 7-wide map (ResNet-50's and MobileNetV2's last stage) got 7 rows of one
// vector (7 FMAs per 8 loads); 4 rows of 2 and a 3-row tail do 8 per 6 —
// not 6 rows and a 1-row tail, whose two accumulators wait on the FMA's
// latency (oneRankOfTails). On 49 rows (a 1x1 conv on 7x7 as a matmul) no
// 1-row tail either.
TEST(CpuStrategy, RegisterTilesWithTails) {
  CpuTuning avx2 = CpuTuning::fromFeatures("+avx2");
  RegisterTile divides = chooseRegisterTile(7, 512, avx2);
  EXPECT_EQ(divides.m, 7);
  EXPECT_EQ(divides.n, 8);
  RegisterTile tail = chooseRegisterTile(7, 512, avx2, /*allowTail=*/true);
  EXPECT_EQ(tail.m, 4);
  EXPECT_EQ(tail.n, 16);
  EXPECT_EQ(tail.tail, 3);
  RegisterTile pixels = chooseRegisterTile(49, 512, avx2, /*allowTail=*/true);
  EXPECT_EQ(pixels.n, 16);
  EXPECT_GE(pixels.tail * 2, kMinAccumulatorChains);
  // Two FMA pipes rank tiles with tails by FMAs per load alone (BERT's
  // 6 x 64 and a 2 x 64 tail): unchanged.
  CpuTuning two = CpuTuning::fromFeatures("+avx512f,+amx-tile");
  ASSERT_EQ(two.fmaPipes, 2);
  RegisterTile tall = chooseRegisterTile(128, 768, two, /*allowTail=*/true, /*tailBelowScore=*/1e9);
  EXPECT_EQ(tall.m, 6);
  EXPECT_EQ(tall.tail, 2);
  // 56 rows divide into 4 x 16 tiles, and a tail gains too little.
  RegisterTile wide = chooseRegisterTile(56, 64, avx2, /*allowTail=*/true);
  EXPECT_EQ(wide.tail, 0);
  EXPECT_EQ(56 % wide.m, 0);
}

// Which convs stream their filter (few output pixels, a filter bigger than
// L2) and in how wide blocks of filters: a quarter of them, whole register
// tiles, at both vector widths.
TEST(CpuStrategy, MatmulPanelWidths) {
  for (CpuTuning t : {CpuTuning::fromFeatures("+avx512f"), CpuTuning::fromFeatures("+avx2")}) {
    SCOPED_TRACE(std::to_string(t.vectorBits) + "-bit vectors");
    int64_t lanes = t.vectorBits / 32;
    // BERT-base's weights (seq 128): QKV/output 768 x 768, FFN 768 x 3072
    // and 3072 x 768, all bigger than L2: panels of the register tile's
    // columns, whole vectors, that divide N.
    for (auto [k, n] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {3072, 768}}) {
      int64_t w = matmulPanelWidth(128, n, k, t);
      EXPECT_GE(w, lanes) << k << "x" << n;
      EXPECT_EQ(w % lanes, 0);
      EXPECT_EQ(n % w, 0);
      EXPECT_EQ(w, chooseRegisterTile(128, n, t, /*allowTail=*/true).n) << k << "x" << n;
    }
    // A weight that fits L2 stays as it is, and so does one that a vector
    // (A of one row) reads once.
    EXPECT_EQ(matmulPanelWidth(128, 256, 256, t), 0);
    EXPECT_EQ(matmulPanelWidth(1, 3072, 768, t), 0);
    EXPECT_EQ(matmulPanelWidth(128, 768, 768, CpuTuning{}), 0);  // no vectors
  }
}

TEST(CpuStrategy, ParallelBoundIsATimeOnTheHostsCore) {
  using kiln::lowering::strategy::kParallelMinFlops;
  using kiln::lowering::strategy::parallelMinFlops;
  // Two 512-bit FMA pipes: the reference; one: half; AVX2 one pipe (Zen 1,
  // and Zen 2/3 as kiln models them): a quarter. Never above the reference.
  EXPECT_EQ(parallelMinFlops(CpuTuning::fromFeatures("+avx2,+avx512f,+amx-tile,+amx-bf16")), kParallelMinFlops);
  EXPECT_EQ(parallelMinFlops(CpuTuning::fromFeatures("+avx2,+avx512f")), kParallelMinFlops / 2);
  EXPECT_EQ(parallelMinFlops(CpuTuning::fromFeatures("+avx2,+fma")), kParallelMinFlops / 4);
  CpuTuning wide = CpuTuning::fromFeatures("+avx2,+avx512f,+amx-tile,+amx-bf16");
  wide.fmaPipes = 4;
  EXPECT_EQ(parallelMinFlops(wide), kParallelMinFlops);
}

TEST(CpuStrategy, StreamingFilterBlocks) {
  for (CpuTuning t : {CpuTuning::fromFeatures("+avx512f"), CpuTuning::fromFeatures("+avx2")}) {
    SCOPED_TRACE(std::to_string(t.vectorBits) + "-bit vectors");
    // ResNet-50's last stage (7x7 maps): 3x3 512 -> 512, 1x1 512 -> 2048,
    // 1x1 2048 -> 512, in blocks of one register tile of filters each.
    // (AVX2: 6x16 tiles and a 1x16 tail, which score better than 7x8.)
    int64_t nr = t.vectorBits == 512 ? 32 : 16;
    EXPECT_EQ(chooseRegisterTile(7, 512, t, /*allowTail=*/true).n, nr);
    EXPECT_EQ(streamingFilterBlock(3, 3, 512, 512, 7, 49, t), nr);
    EXPECT_EQ(streamingFilterBlock(1, 1, 512, 2048, 7, 49, t), nr);
    EXPECT_EQ(streamingFilterBlock(1, 1, 2048, 512, 7, 49, t), nr);
    for (int64_t fc : {streamingFilterBlock(3, 3, 256, 256, 4, 16, t), streamingFilterBlock(1, 1, 1024, 512, 4, 16, t)}) {
      EXPECT_GT(fc, 0);
      EXPECT_EQ(fc % chooseRegisterTile(4, 64, t).n, 0);
    }
    // An even number of blocks where the register tiles allow (MobileNetV2's
    // last stage: 1x1 160 -> 960 and 960 -> 320 on 7x7 maps).
    for (auto [c, f] : {std::pair<int64_t, int64_t>{160, 960}, {960, 320}}) {
      int64_t fc = streamingFilterBlock(1, 1, c, f, 7, 49, t);
      ASSERT_GT(fc, 0);
      EXPECT_EQ(fc % chooseRegisterTile(7, f, t).n, 0);
      EXPECT_EQ(f % fc, 0);
      EXPECT_EQ((f / fc) % 2, 0) << c << " -> " << f << ": blocks of " << fc;
      EXPECT_GE(f / fc, 8);
    }
    // ResNet-50's 14x14 maps (196 pixels) with filters over L2 stream too:
    // 1x1 1024 -> 256 and the stride-2 3x3 256 -> 256.
    EXPECT_GT(streamingFilterBlock(1, 1, 1024, 256, 14, 196, t), 0);
    EXPECT_GT(streamingFilterBlock(3, 3, 256, 256, 14, 196, t), 0);
    // Many pixels (28x28) reuse the filter from cache: the usual blocks.
    EXPECT_EQ(streamingFilterBlock(3, 3, 256, 256, 28, 784, t), 0);
    EXPECT_EQ(streamingFilterBlock(3, 3, 128, 128, 28, 784, t), 0);
    // A filter within a quarter of L2 (3x3 32 -> 64 is 72 KiB; 3x3 64 -> 64,
    // 147 KiB, streams).
    EXPECT_EQ(streamingFilterBlock(3, 3, 32, 64, 7, 49, t), 0);
    EXPECT_GT(streamingFilterBlock(3, 3, 64, 64, 7, 49, t), 0);
    // Too little work to run in parallel (one pixel, 0.5 MFLOP), or too few
    // filters to split into register tiles (F = 8).
    EXPECT_EQ(streamingFilterBlock(1, 1, 256, 1000, 1, 1, t), 0);
    EXPECT_EQ(streamingFilterBlock(3, 3, 8192, 8, 7, 49, t), 0);
  }
  CpuTuning none;  // no vectors: plain loops, no blocks
  EXPECT_EQ(streamingFilterBlock(3, 3, 512, 512, 7, 49, none), 0);
}

// Each op class is owned by its own strategy (the first that recognizes
// it), and ops no strategy schedules are recognized by none.
TEST(CpuStrategy, EachOpClassHasItsStrategy) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect,
                      mlir::arith::ArithDialect, mlir::math::MathDialect>();
  const char *ir = R"mlir(
    func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<8x32xf32>,
                 %bb: tensor<2x8x16xf32>, %bw: tensor<2x16x32xf32>, %bc: tensor<2x8x32xf32>,
                 %img: tensor<1x10x10x16xf32>, %fhwc: tensor<32x3x3x16xf32>, %conv: tensor<1x8x8x32xf32>,
                 %dwf: tensor<3x3x16xf32>, %dw: tensor<1x8x8x16xf32>, %win: tensor<3x3xf32>,
                 %row: tensor<8xf32>, %col: tensor<32xf32>, %ints: tensor<8x32xi32>, %ib: tensor<32x32xi32>,
                 %heads: tensor<1x8x4x16xf32>, %split: tensor<1x4x8x16xf32>, %kt: tensor<1x4x16x8xf32>,
                 %wt: tensor<32x16xf32>) {
      %0 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
      %1 = linalg.batch_matmul ins(%bb, %bw : tensor<2x8x16xf32>, tensor<2x16x32xf32>) outs(%bc : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
      %2 = linalg.conv_2d_nhwc_fhwc ins(%img, %fhwc : tensor<1x10x10x16xf32>, tensor<32x3x3x16xf32>) outs(%conv : tensor<1x8x8x32xf32>) -> tensor<1x8x8x32xf32>
      %3 = linalg.depthwise_conv_2d_nhwc_hwc ins(%img, %dwf : tensor<1x10x10x16xf32>, tensor<3x3x16xf32>) outs(%dw : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
      %4 = linalg.pooling_nhwc_max ins(%img, %win : tensor<1x10x10x16xf32>, tensor<3x3xf32>) outs(%dw : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
      %5 = linalg.reduce { arith.addf } ins(%c : tensor<8x32xf32>) outs(%row : tensor<8xf32>) dimensions = [1]
      %6 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                           iterator_types = ["parallel", "parallel"]}
          ins(%c : tensor<8x32xf32>) outs(%c : tensor<8x32xf32>) {
        ^bb0(%x: f32, %o: f32):
          %e = math.exp %x : f32
          linalg.yield %e : f32
      } -> tensor<8x32xf32>
      %z = arith.constant 0.0 : f32
      %7 = linalg.fill ins(%z : f32) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
      %8 = linalg.matmul ins(%ints, %ib : tensor<8x32xi32>, tensor<32x32xi32>) outs(%ints : tensor<8x32xi32>) -> tensor<8x32xi32>
      %9 = linalg.reduce { arith.addf } ins(%c : tensor<8x32xf32>) outs(%col : tensor<32xf32>) dimensions = [0]
      %10 = linalg.transpose ins(%heads : tensor<1x8x4x16xf32>) outs(%split : tensor<1x4x8x16xf32>) permutation = [0, 2, 1, 3]
      %11 = linalg.transpose ins(%heads : tensor<1x8x4x16xf32>) outs(%kt : tensor<1x4x16x8xf32>) permutation = [0, 2, 3, 1]
      %12 = linalg.transpose ins(%wt : tensor<32x16xf32>) outs(%b : tensor<16x32xf32>) permutation = [1, 0]
      %13 = linalg.matmul ins(%a, %12 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
      return
    }
  )mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  std::vector<std::string> owners;
  module->walk([&](mlir::linalg::LinalgOp op) {
    std::string owner = "none";
    for (const kiln::lowering::strategy::OpStrategy *s : kiln::lowering::strategy::strategies())
      if (s->recognize(op)) {
        owner = s->name().str();
        break;
      }
    owners.push_back(owner);
  });
  // (%8 is an i32 matmul: no strategy; %9 sums columns, the innermost
  // loop parallel; %10 splits heads, %11 moves the innermost dimension;
  // %12 is a weight's, which panel reads remove.)
  EXPECT_EQ(owners, (std::vector<std::string>{"matmul", "matmul", "conv", "window", "window", "row-reduction",
                                              "elementwise", "elementwise", "none",
                                              "outer-reduction", "transpose", "transpose", "none", "matmul"}));
}
