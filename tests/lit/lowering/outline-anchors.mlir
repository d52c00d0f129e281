// RUN: %kiln-opt %s --kiln-place-ops --kiln-outline-clusters | FileCheck %s
// RUN: %kiln-opt %s --kiln-place-ops --kiln-outline-clusters=anchors-per-cluster=0 | FileCheck %s --check-prefix=ONE

// One anchor (conv, matmul, pooling) per cluster: the elementwise ops after
// an anchor join its cluster, the residual add joins its first producer's
// (the second conv's), and the first cluster's output feeds both the second
// cluster and the add.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK: %[[C0:.*]] = call @kiln_cluster0(%arg0, %arg1)
// CHECK-NEXT: %[[C1:.*]] = call @kiln_cluster1(%[[C0]], %arg1)
// CHECK-NEXT: return %[[C1]]
// CHECK: func.func private @kiln_cluster0(
// CHECK-NOT: func.func
// CHECK: tosa.conv2d
// CHECK-NEXT: tosa.clamp
// CHECK-NEXT: return
// CHECK: func.func private @kiln_cluster1(
// CHECK-NOT: func.func
// CHECK: tosa.conv2d
// CHECK-NEXT: tosa.add
// CHECK-NEXT: tosa.clamp
// CHECK-NEXT: return

// ONE: call @kiln_cluster0(%arg0, %arg1)
// ONE-NOT: call @kiln_cluster1
func.func @kiln_fn(%x: tensor<1x8x8x4xf32>, %w: tensor<4x3x3x4xf32>) -> tensor<1x8x8x4xf32> {
  %b = "tosa.const"() <{values = dense<0.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c1 = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<4x3x3x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %r1 = tosa.clamp %c1 {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %c2 = tosa.conv2d %r1, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<4x3x3x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %s = tosa.add %c2, %r1 : (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %r2 = tosa.clamp %s {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  return %r2 : tensor<1x8x8x4xf32>
}
