// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32},kiln-bufferize)" | FileCheck %s
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16},kiln-bufferize)" | FileCheck %s

// A conv's accumulator init (the bias broadcast) and its elementwise
// epilogue (here ReLU6) are fused into the conv's parallel tiles: each
// tile is initialized, accumulated and finished in the output's own buffer
// while it is in cache, with no temporary and no copy of the whole output.
// CHECK-LABEL: func.func @conv_relu6
// CHECK: scf.forall
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: vector.transfer_write
// CHECK: vector.fma
// CHECK: arith.minimumf
// CHECK: vector.transfer_write
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: return
func.func @conv_relu6(%x: tensor<1x56x56x16xf32>, %w: tensor<64x1x1x16xf32>, %bias: tensor<64xf32>) -> tensor<1x56x56x64xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x56x56x16xf32>, tensor<64x1x1x16xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x64xf32>
  %r = tosa.clamp %y {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  return %r : tensor<1x56x56x64xf32>
}

// Depthwise: TOSA's one-filter-per-channel result (5-D, a unit last
// dimension) loses that dimension, so the bias and activation are
// vectorized over channels (not one element at a time) and fused like a
// conv's. The padded input is the source copied into the interior and
// vector fills of the border only (the top row, the left column).
// CHECK-LABEL: func.func @depthwise_relu6
// CHECK-NOT: vector<1xf32>
// CHECK: %[[PADDED:.*]] = memref.alloc() {{.*}} : memref<1x113x113x32xf32>
// CHECK: memref.copy
// CHECK: memref.subview %[[PADDED]][0, 0, 0, 0] [1, 1, 113, 32]
// CHECK: vector.transfer_write {{.*}} : vector<{{16|32}}xf32>
// CHECK: memref.subview %[[PADDED]][0, 1, 0, 0] [1, 112, 1, 32]
// CHECK: vector.transfer_write {{.*}} : vector<{{16|32}}xf32>
// CHECK: scf.forall
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: vector.fma
// CHECK: arith.minimumf
// CHECK-NOT: memref.copy
// CHECK-NOT: vector<1xf32>
// CHECK: return
func.func @depthwise_relu6(%x: tensor<1x112x112x32xf32>, %w: tensor<3x3x32x1xf32>, %bias: tensor<32xf32>) -> tensor<1x56x56x32xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.depthwise_conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>} : (tensor<1x112x112x32xf32>, tensor<3x3x32x1xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x32xf32>
  %r = tosa.clamp %y {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  return %r : tensor<1x56x56x32xf32>
}
