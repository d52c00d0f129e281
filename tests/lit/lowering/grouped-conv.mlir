// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefix=AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefix=AVX2
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-cpu-tile-vectorize,kiln-bufferize,kiln-lower-to-llvm)" | FileCheck %s --check-prefix=LLVM

// A grouped conv (what kiln-grouped-conv-to-linalg makes of kiln's grouped
// conv op, RegNet's 8-channel groups) runs as a loop over its groups,
// each an FHWC conv on strided slices that the conv strategy vectorizes
// over the group's filters: one compiled loop for every group. Groups of
// less than a cache line's channels on a map with enough rows: the threads
// take blocks of output rows (4 of 7 here), every group over its rows
// (input rows 7 * block, 9 of them), each group's conv on one thread.
// AVX512-LABEL: func.func @kiln_fn
// AVX512: scf.forall (%[[B:[a-z0-9]+]]) in (4)
// AVX512: %[[R:.*]] = arith.muli %[[B]], %c7
// AVX512: scf.for %[[G:[a-z0-9]+]] = %c0 to %c6
// AVX512: tensor.extract_slice %arg0[0, %[[R]], 0, %[[G]], 0] [1, 9, 30, 1, 8] [1, 1, 1, 1, 1] : tensor<1x30x30x6x8xf32> to tensor<1x9x30x8xf32>
// AVX512-NEXT: tensor.extract_slice %arg1[%[[G]], 0, 0, 0, 0] [1, 8, 3, 3, 8]
// AVX512-NOT: scf.forall
// AVX512: vector.fma {{.*}} : vector<8xf32>
// AVX512-NOT: linalg.conv_2d_nhwgc_gfhwc
// AVX2-LABEL: func.func @kiln_fn
// AVX2: scf.forall (%{{.*}}) in (4)
// AVX2: tensor.extract_slice %arg0[0, %{{.*}}, 0, %{{.*}}, 0] [1, 9, 30, 1, 8]
// AVX2: vector.fma {{.*}} : vector<8xf32>
// LLVM: llvm.intr.fmuladd{{.*}}vector<8xf32>
// LLVM: llvm.call @kiln_parallel_for
func.func @kiln_fn(%x: tensor<1x30x30x6x8xf32>, %w: tensor<6x8x3x3x8xf32>) -> tensor<1x28x28x6x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x6x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x6x8xf32>) -> tensor<1x28x28x6x8xf32>
  %y = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<1x30x30x6x8xf32>, tensor<6x8x3x3x8xf32>) outs(%f : tensor<1x28x28x6x8xf32>) -> tensor<1x28x28x6x8xf32>
  return %y : tensor<1x28x28x6x8xf32>
}

// Groups big enough for parallel blocks of their own (2 of 64 channels)
// run one after the other, each conv parallel itself.
// AVX512-LABEL: func.func @big_groups
// AVX512-NOT: scf.forall (%{{.*}}) in (2)
// AVX512: tensor.extract_slice %arg0[0, 0, 0, %{{.*}}, 0] [1, 30, 30, 1, 64]
// AVX512: scf.forall (%{{.*}}) in (14)
func.func @big_groups(%x: tensor<1x30x30x2x64xf32>, %w: tensor<2x64x3x3x64xf32>) -> tensor<1x28x28x2x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x2x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x2x64xf32>) -> tensor<1x28x28x2x64xf32>
  %y = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<1x30x30x2x64xf32>, tensor<2x64x3x3x64xf32>) outs(%f : tensor<1x28x28x2x64xf32>) -> tensor<1x28x28x2x64xf32>
  return %y : tensor<1x28x28x2x64xf32>
}

// At stride 2 a block of 7 output rows reads 15 input rows from 14 x block.
// AVX2-LABEL: func.func @strided
// AVX2: scf.forall (%[[B:[a-z0-9]+]]) in (4)
// AVX2: %[[R:.*]] = arith.muli %[[B]], %c14
// AVX2: tensor.extract_slice %arg0[0, %[[R]], 0, %{{.*}}, 0] [1, 15, 58, 1, 8] [1, 1, 1, 1, 1] : tensor<1x58x58x13x8xf32> to tensor<1x15x58x8xf32>
func.func @strided(%x: tensor<1x58x58x13x8xf32>, %w: tensor<13x8x3x3x8xf32>) -> tensor<1x28x28x13x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x13x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x13x8xf32>) -> tensor<1x28x28x13x8xf32>
  %y = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
         ins(%x, %w : tensor<1x58x58x13x8xf32>, tensor<13x8x3x3x8xf32>) outs(%f : tensor<1x28x28x13x8xf32>) -> tensor<1x28x28x13x8xf32>
  return %y : tensor<1x28x28x13x8xf32>
}

// A small map (14 x 14: row blocks of 2 rows, 28 pixels a group): the
// groups run in parallel with each other, each on one thread.
// AVX2-LABEL: func.func @small_map
// AVX2: scf.forall (%[[G:[a-z0-9]+]]) in (26)
// AVX2: tensor.extract_slice %arg0[0, 0, 0, %[[G]], 0] [1, 16, 16, 1, 8]
func.func @small_map(%x: tensor<1x16x16x26x8xf32>, %w: tensor<26x8x3x3x8xf32>) -> tensor<1x14x14x26x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x26x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14x14x26x8xf32>) -> tensor<1x14x14x26x8xf32>
  %y = linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<1x16x16x26x8xf32>, tensor<26x8x3x3x8xf32>) outs(%f : tensor<1x14x14x26x8xf32>) -> tensor<1x14x14x26x8xf32>
  return %y : tensor<1x14x14x26x8xf32>
}
