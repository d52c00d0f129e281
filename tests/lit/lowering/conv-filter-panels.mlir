// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefixes=CHECK,AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefixes=CHECK,AVX2

// A 1x1 conv of 4x4 pixels with a 2 MiB filter streams it
// (streamingFilterBlock: blocks of one register tile of its 512 filters,
// 64 on AVX-512 (4x64 tiles), 16 on AVX2 (4x16), each block every output
// row). Its filter, stored in panels of that many filters, reaches the conv
// through the graph's transpose + reshape back to FHWC and the strategy's
// transpose to HWCF: each parallel block reads its own panel instead, a
// contiguous view (a slice, or vector reads of it where the conv computes
// in its register tiles), and no transpose (a copy of the filter per call)
// is left.
// CHECK-LABEL: func.func @panels(
// AVX512-SAME: %[[W:[^:]*]]: tensor<8x1x1x1024x64xf32>
// AVX512-NOT: linalg.transpose
// AVX512: scf.forall (%[[P:.*]]) in (8)
// AVX512: %[[W]][%[[P]], 
// AVX512-NOT: linalg.transpose
// CHECK: return
func.func @panels(%x: tensor<1x4x4x1024xf32>, %w: tensor<8x1x1x1024x64xf32>, %b: tensor<512xf32>) -> tensor<1x4x4x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<8x1x1x1024x64xf32>) -> tensor<8x64x1x1x1024xf32>
  %s = tosa.const_shape {values = dense<[512, 1, 1, 1024]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<8x64x1x1x1024xf32>, !tosa.shape<4>) -> tensor<512x1x1x1024xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x4x4x1024xf32>, tensor<512x1x1x1024xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x512xf32>
  return %y : tensor<1x4x4x512xf32>
}

// Panels read at batch 32 (512 output pixels: by itself the conv would
// not stream, and its blocks, sized by L2, would span four panels): a filter
// stored in panels for batch 1 (a dynamic batch's weights are laid out for
// the batch-1 code of its range calls) is still read one panel per block,
// never back through the transposes.
// CHECK-LABEL: func.func @panels_at_batch32(
// AVX512-SAME: %[[W:[^:]*]]: tensor<8x1x1x256x64xf32>
// AVX512-NOT: linalg.transpose
// AVX512: scf.forall (%[[N:.*]], %[[P:.*]]) in (32, 8)
// AVX512: %[[W]][%[[P]], 
// AVX512-NOT: linalg.transpose
// CHECK: return
func.func @panels_at_batch32(%x: tensor<32x4x4x256xf32>, %w: tensor<8x1x1x256x64xf32>, %b: tensor<512xf32>) -> tensor<32x4x4x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<8x1x1x256x64xf32>) -> tensor<8x64x1x1x256xf32>
  %s = tosa.const_shape {values = dense<[512, 1, 1, 256]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<8x64x1x1x256xf32>, !tosa.shape<4>) -> tensor<512x1x1x256xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<32x4x4x256xf32>, tensor<512x1x1x256xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<32x4x4x512xf32>
  return %y : tensor<32x4x4x512xf32>
}

// CHECK-LABEL: func.func @panels16(
// AVX2-SAME: %[[W:[^:]*]]: tensor<32x1x1x1024x16xf32>
// AVX2-NOT: linalg.transpose
// AVX2: scf.forall (%[[P:.*]]) in (32)
// AVX2: %[[W]][%[[P]], 
// AVX2-NOT: linalg.transpose
// CHECK: return
func.func @panels16(%x: tensor<1x4x4x1024xf32>, %w: tensor<32x1x1x1024x16xf32>, %b: tensor<512xf32>) -> tensor<1x4x4x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<32x1x1x1024x16xf32>) -> tensor<32x16x1x1x1024xf32>
  %s = tosa.const_shape {values = dense<[512, 1, 1, 1024]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<32x16x1x1x1024xf32>, !tosa.shape<4>) -> tensor<512x1x1x1024xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x4x4x1024xf32>, tensor<512x1x1x1024xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x512xf32>
  return %y : tensor<1x4x4x512xf32>
}

// Panels wider than the strategy's blocks (128 filters where it streams
// in blocks of 64) are read as blocks of their own width, in place.
// CHECK-LABEL: func.func @other_panels(
// CHECK-NOT: linalg.transpose
// CHECK: scf.forall
// CHECK-NOT: linalg.transpose
// CHECK: return
func.func @other_panels(%x: tensor<1x4x4x1024xf32>, %w: tensor<4x1x1x1024x128xf32>, %b: tensor<512xf32>) -> tensor<1x4x4x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<4x1x1x1024x128xf32>) -> tensor<4x128x1x1x1024xf32>
  %s = tosa.const_shape {values = dense<[512, 1, 1, 1024]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<4x128x1x1x1024xf32>, !tosa.shape<4>) -> tensor<512x1x1x1024xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x4x4x1024xf32>, tensor<512x1x1x1024xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x512xf32>
  return %y : tensor<1x4x4x512xf32>
}

// A streamed 3x3 filter in panels of 32 filters (AVX-512's 7x32 tiles;
// AVX2, which would stream in blocks of 16, reads the panels too, in two
// 4x16 tiles each): each block reads its panel in blocks of input channels
// (16 at 512 bits, 64 at 256: nine short runs, one per tap), every output
// row computing on a channel block while the next comes from memory — with
// the whole reduction (9 x 512 x 32 floats) at once, memory idled while
// the rows after the first computed from L2 (layer 4's 3x3 convs
// 1.41-1.51 against 1.64-1.72 ms).
// CHECK-LABEL: func.func @panel_channel_blocks(
// CHECK-NOT: linalg.transpose
// CHECK: scf.forall (%{{.*}}) in (16)
// AVX512: scf.for %{{.*}} = %c0 to %c512 step %c16 iter_args
// AVX2: scf.for %{{.*}} = %c0 to %c512 step %c64 iter_args
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c7 step %c1 iter_args
// AVX2-NEXT: scf.for %{{.*}} = %c0 to %c32 step %c16 iter_args
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args({{.*}}) -> (vector<
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args({{.*}}) -> (vector<
// AVX512-NEXT: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<
// AVX2-NEXT: scf.for %{{.*}} = %c0 to %c64 step %c1 iter_args({{.*}}) -> (vector<
func.func @panel_channel_blocks(%x: tensor<1x9x9x512xf32>, %w: tensor<16x3x3x512x32xf32>, %b: tensor<512xf32>) -> tensor<1x7x7x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<16x3x3x512x32xf32>) -> tensor<16x32x3x3x512xf32>
  %s = tosa.const_shape {values = dense<[512, 3, 3, 512]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<16x32x3x3x512xf32>, !tosa.shape<4>) -> tensor<512x3x3x512xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x9x9x512xf32>, tensor<512x3x3x512xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x7x7x512xf32>
  return %y : tensor<1x7x7x512xf32>
}

// A dynamic batch's filters are laid out for batch 1 (ResNet-50's 1x1
// 512 -> 2048 on 7x7 streams its filter there, in panels of 32 on
// AVX-512); the code for batch 8 (392 pixels, where a 1x1 conv would
// become a matmul) still reads them panel by panel as a conv. As a matmul
// it took the filter back to FHWC and on to [C, F] on every call (two
// copies of 4 MB; 34-42% of peak against 80% at batch 1).
// CHECK-LABEL: func.func @panels_at_batch8_not_a_matmul(
// AVX512-SAME: %[[W:[^:]*]]: tensor<64x1x1x512x32xf32>
// CHECK-NOT: linalg.matmul
// AVX512-NOT: linalg.transpose
// AVX512: %[[W]][
// CHECK-NOT: linalg.matmul
// AVX512-NOT: linalg.transpose
// CHECK: return
func.func @panels_at_batch8_not_a_matmul(%x: tensor<8x7x7x512xf32>, %w: tensor<64x1x1x512x32xf32>, %b: tensor<2048xf32>) -> tensor<8x7x7x2048xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<64x1x1x512x32xf32>) -> tensor<64x32x1x1x512xf32>
  %s = tosa.const_shape {values = dense<[2048, 1, 1, 512]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<64x32x1x1x512xf32>, !tosa.shape<4>) -> tensor<2048x1x1x512xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<8x7x7x512xf32>, tensor<2048x1x1x512xf32>, tensor<2048xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x7x7x2048xf32>
  return %y : tensor<8x7x7x2048xf32>
}

// The same for a strided 1x1 conv (the downsampling projection, 1024 ->
// 2048 from 13x13 to 7x7 at batch 8): no copy of its pixels into a matmul,
// the panels read in place.
// CHECK-LABEL: func.func @strided_panels_at_batch8_not_a_matmul(
// AVX512-SAME: %[[W:[^:]*]]: tensor<64x1x1x1024x32xf32>
// CHECK-NOT: linalg.matmul
// AVX512-NOT: linalg.transpose
// AVX512: %[[W]][
// CHECK-NOT: linalg.matmul
// AVX512-NOT: linalg.transpose
// CHECK: return
func.func @strided_panels_at_batch8_not_a_matmul(%x: tensor<8x13x13x1024xf32>, %w: tensor<64x1x1x1024x32xf32>, %b: tensor<2048xf32>) -> tensor<8x7x7x2048xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<64x1x1x1024x32xf32>) -> tensor<64x32x1x1x1024xf32>
  %s = tosa.const_shape {values = dense<[2048, 1, 1, 1024]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<64x32x1x1x1024xf32>, !tosa.shape<4>) -> tensor<2048x1x1x1024xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<8x13x13x1024xf32>, tensor<2048x1x1x1024xf32>, tensor<2048xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x7x7x2048xf32>
  return %y : tensor<8x7x7x2048xf32>
}

// A conv that streams at both batches, in blocks of other widths: at
// batch 1 MobileNetV2's 576 -> 160 on 7x7 (odd rows) streams in half-width
// blocks of 16 (AVX-512), its filter stored in panels of 16; at batch 2
// (even rows) it would stream in blocks of 32, which read the panels back
// through a transpose of the whole filter on every call. The panels'
// width wins (0.21 -> 0.09 ms at batch 2, a dynamic-batch one-conv model,
// KILN_BATCH_RANGES=0).
// CHECK-LABEL: func.func @half_width_panels_at_batch2(
// CHECK-SAME: %[[W:[^:]*]]: tensor<10x1x1x576x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK: %[[W]][
// CHECK-NOT: linalg.transpose
// CHECK: return
func.func @half_width_panels_at_batch2(%x: tensor<2x7x7x576xf32>, %w: tensor<10x1x1x576x16xf32>, %b: tensor<160xf32>) -> tensor<2x7x7x160xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<10x1x1x576x16xf32>) -> tensor<10x16x1x1x576xf32>
  %s = tosa.const_shape {values = dense<[160, 1, 1, 576]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<10x16x1x1x576xf32>, !tosa.shape<4>) -> tensor<160x1x1x576xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x7x7x576xf32>, tensor<160x1x1x576xf32>, tensor<160xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x7x7x160xf32>
  return %y : tensor<2x7x7x160xf32>
}

// Panels narrower than a vector (8 filters at 512 bits) are read through
// the transposes: correct, and slow. At 256 bits they are whole vectors
// and read in place.
// CHECK-LABEL: func.func @half_vector_panels(
// AVX512: linalg.transpose
// AVX512: linalg.transpose
// AVX2-NOT: linalg.transpose
// CHECK: return
func.func @half_vector_panels(%x: tensor<1x4x4x1024xf32>, %w: tensor<64x1x1x1024x8xf32>, %b: tensor<512xf32>) -> tensor<1x4x4x512xf32> {
  %t = tosa.transpose %w {perms = array<i32: 0, 4, 1, 2, 3>} : (tensor<64x1x1x1024x8xf32>) -> tensor<64x8x1x1x1024xf32>
  %s = tosa.const_shape {values = dense<[512, 1, 1, 1024]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %f = tosa.reshape %t, %s : (tensor<64x8x1x1x1024xf32>, !tosa.shape<4>) -> tensor<512x1x1x1024xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %f, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x4x4x1024xf32>, tensor<512x1x1x1024xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x512xf32>
  return %y : tensor<1x4x4x512xf32>
}
