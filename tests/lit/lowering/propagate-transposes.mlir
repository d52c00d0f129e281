// RUN: %kiln-opt %s --kiln-propagate-transposes | FileCheck %s

// An exporter's NCHW island between two NHWC convolutions: batch norm and
// ReLU on the transposed activation. The transpose sinks below every
// elementwise op, meets the transpose back and both vanish; the per-channel
// constants follow the layout (1x8x1x1 -> 1x1x1x8).
// CHECK-LABEL: func.func @island
// CHECK: %[[C1:.*]] = tosa.conv2d
// CHECK-NOT: tosa.transpose %[[C1]]
// CHECK: tosa.transpose %{{.*}} {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x8x1x1xf32>) -> tensor<1x1x1x8xf32>
// CHECK: tosa.sub %[[C1]], %{{.*}} : (tensor<1x32x32x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x32x32x8xf32>
// CHECK: tosa.mul {{.*}} -> tensor<1x32x32x8xf32>
// CHECK: %[[R:.*]] = tosa.clamp {{.*}} -> tensor<1x32x32x8xf32>
// CHECK-NEXT: tosa.conv2d %[[R]]
func.func @island(%x: tensor<1x32x32x8xf32>, %w: tensor<8x1x1x8xf32>, %b: tensor<8xf32>) -> tensor<1x32x32x8xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %mean = "tosa.const"() <{values = dense<[[[[0.5]], [[1.5]], [[2.5]], [[3.5]], [[4.5]], [[5.5]], [[6.5]], [[7.5]]]]> : tensor<1x8x1x1xf32>}> : () -> tensor<1x8x1x1xf32>
  %c1 = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x32x32x8xf32>, tensor<8x1x1x8xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x32x32x8xf32>
  %t1 = tosa.transpose %c1 {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x32x32x8xf32>) -> tensor<1x8x32x32xf32>
  %d = tosa.sub %t1, %mean : (tensor<1x8x32x32xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x32x32xf32>
  %m = tosa.mul %d, %mean, %s : (tensor<1x8x32x32xf32>, tensor<1x8x1x1xf32>, tensor<1xi8>) -> tensor<1x8x32x32xf32>
  %r = tosa.clamp %m {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
  %t2 = tosa.transpose %r {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x8x32x32xf32>) -> tensor<1x32x32x8xf32>
  %c2 = tosa.conv2d %t2, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x32x32x8xf32>, tensor<8x1x1x8xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x32x32x8xf32>
  return %c2 : tensor<1x32x32x8xf32>
}

// A residual add of two transposed activations: one transpose after it.
// CHECK-LABEL: func.func @residual
// CHECK: %[[A:.*]] = tosa.add %arg0, %arg1 : (tensor<1x16x16x32xf32>, tensor<1x16x16x32xf32>)
// CHECK-NEXT: tosa.transpose %[[A]] {perms = array<i32: 0, 3, 1, 2>}
func.func @residual(%a: tensor<1x16x16x32xf32>, %b: tensor<1x16x16x32xf32>) -> tensor<1x32x16x16xf32> {
  %ta = tosa.transpose %a {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x16x16x32xf32>) -> tensor<1x32x16x16xf32>
  %tb = tosa.transpose %b {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x16x16x32xf32>) -> tensor<1x32x16x16xf32>
  %s = tosa.add %ta, %tb : (tensor<1x32x16x16xf32>, tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32>
  return %s : tensor<1x32x16x16xf32>
}

// Transposes of small values never move (they are what sinking creates):
// two small operands cannot ping-pong a transpose between them.
// CHECK-LABEL: func.func @small
// CHECK: tosa.transpose %arg0
// CHECK-NEXT: tosa.add
func.func @small(%e: tensor<24x16xf32>, %y: tensor<16x24xf32>) -> tensor<16x24xf32> {
  %t = tosa.transpose %e {perms = array<i32: 1, 0>} : (tensor<24x16xf32>) -> tensor<16x24xf32>
  %s = tosa.add %t, %y : (tensor<16x24xf32>, tensor<16x24xf32>) -> tensor<16x24xf32>
  return %s : tensor<16x24xf32>
}

// A global average pool in NCHW after an NHWC conv: the transpose sinks
// below both reductions (their axes follow it: W 3 -> 2, H 2 -> 1) and is
// left on the 1x1x1x64 result.
// CHECK-LABEL: func.func @global_pool
// CHECK: %[[C:.*]] = tosa.conv2d
// CHECK-NOT: tosa.transpose %[[C]]
// CHECK: %[[W:.*]] = tosa.reduce_sum %[[C]] {axis = 2 : i32} : (tensor<1x16x16x64xf32>) -> tensor<1x16x1x64xf32>
// CHECK: %[[H:.*]] = tosa.reduce_sum %[[W]] {axis = 1 : i32} : (tensor<1x16x1x64xf32>) -> tensor<1x1x1x64xf32>
// CHECK: tosa.transpose %[[H]] {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x1x1x64xf32>) -> tensor<1x64x1x1xf32>
func.func @global_pool(%x: tensor<1x16x16x64xf32>, %w: tensor<64x1x1x64xf32>, %b: tensor<64xf32>) -> tensor<1x64x1x1xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x16x16x64xf32>, tensor<64x1x1x64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x16x64xf32>
  %t = tosa.transpose %c {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x16x16x64xf32>) -> tensor<1x64x16x16xf32>
  %r1 = tosa.reduce_sum %t {axis = 3 : i32} : (tensor<1x64x16x16xf32>) -> tensor<1x64x16x1xf32>
  %r2 = tosa.reduce_sum %r1 {axis = 2 : i32} : (tensor<1x64x16x1xf32>) -> tensor<1x64x1x1xf32>
  return %r2 : tensor<1x64x1x1xf32>
}

// DenseNet's channel concat of NCHW exports: the concat of two transposed
// activations runs NHWC (axis 1 -> 3), one transpose after it, which the
// next conv's transpose cancels.
// CHECK-LABEL: func.func @dense_concat
// CHECK: %[[C:.*]] = tosa.concat %arg0, %arg1 {axis = 3 : i32} : (tensor<1x8x8x4xf32>, tensor<1x8x8x6xf32>) -> tensor<1x8x8x10xf32>
// CHECK-NOT: tosa.transpose
// CHECK: return %[[C]]
func.func @dense_concat(%a: tensor<1x8x8x4xf32>, %b: tensor<1x8x8x6xf32>) -> tensor<1x8x8x10xf32> {
  %ta = tosa.transpose %a {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x8x8x4xf32>) -> tensor<1x4x8x8xf32>
  %tb = tosa.transpose %b {perms = array<i32: 0, 3, 1, 2>} : (tensor<1x8x8x6xf32>) -> tensor<1x6x8x8xf32>
  %c = tosa.concat %ta, %tb {axis = 1 : i32} : (tensor<1x4x8x8xf32>, tensor<1x6x8x8xf32>) -> tensor<1x10x8x8xf32>
  %t = tosa.transpose %c {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x10x8x8xf32>) -> tensor<1x8x8x10xf32>
  return %t : tensor<1x8x8x10xf32>
}
