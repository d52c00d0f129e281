// RUN: %kiln-opt %s --kiln-tosa-to-linalg | FileCheck %s

// Stage 1: TOSA -> linalg on tensors. Convolutions become named linalg ops,
// and chains of elementwise ops fuse into one linalg.generic.
// CHECK-LABEL: func.func @kiln_fn
// CHECK-NOT: tosa.
// CHECK: tensor.pad
// CHECK: linalg.conv_2d_nhwc_fhwc
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: math.exp
// CHECK: arith.minimumf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @kiln_fn(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x8x8x4xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %e = tosa.exp %c : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %r = tosa.clamp %e {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  return %r : tensor<1x8x8x4xf32>
}
