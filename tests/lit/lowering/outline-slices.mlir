// RUN: %kiln-opt %s --kiln-place-ops --kiln-outline-clusters | FileCheck %s

// A slice is a view: it joins the cluster of its one user, where generated
// code folds it into the user's loads, instead of its producer's, which
// would write the slice out as a copy. Here the block's output feeds a
// stride-2 1x1 conv through two slices (as exporters write a downsample
// branch): the first cluster returns the block's output alone, and the
// slices sit in the downsample conv's cluster. A slice that is a result of
// the function stays with its producer.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK: %[[C0:.*]]:2 = call @kiln_cluster0(%arg0, %arg1)
// CHECK-NEXT: %[[D:.*]] = call @kiln_cluster1(%[[C0]]#0, %arg2)
// CHECK-NEXT: %[[C2:.*]] = call @kiln_cluster2(%[[C0]]#0, %arg1)
// CHECK-NEXT: return %[[C2]], %[[D]], %[[C0]]#1
// CHECK: func.func private @kiln_cluster0({{.*}}) -> (tensor<1x8x8x4xf32>, tensor<1x2x8x4xf32>)
// CHECK-NOT: func.func
// CHECK: tosa.conv2d
// CHECK-NEXT: tosa.clamp
// CHECK-NEXT: tosa.slice
// CHECK-NEXT: return
// CHECK: func.func private @kiln_cluster1(%{{.*}}: tensor<1x8x8x4xf32>, %{{.*}}: tensor<4x1x1x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NOT: func.func
// CHECK: tosa.slice {{.*}} -> tensor<1x7x8x4xf32>
// CHECK-NEXT: tosa.slice {{.*}} -> tensor<1x7x7x4xf32>
// CHECK-NEXT: tosa.conv2d
// CHECK-NEXT: return
// CHECK: func.func private @kiln_cluster2(
// CHECK-NOT: tosa.slice
// CHECK: tosa.conv2d
// CHECK-NEXT: return
func.func @kiln_fn(%x: tensor<1x8x8x4xf32>, %w: tensor<4x3x3x4xf32>, %w1: tensor<4x1x1x4xf32>) -> (tensor<1x8x8x4xf32>, tensor<1x4x4x4xf32>, tensor<1x2x8x4xf32>) {
  %b = "tosa.const"() <{values = dense<0.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %start = tosa.const_shape {values = dense<0> : tensor<4xindex>} : () -> !tosa.shape<4>
  %rows = tosa.const_shape {values = dense<[1, 7, 8, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %cols = tosa.const_shape {values = dense<[1, 7, 7, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %two = tosa.const_shape {values = dense<[1, 2, 8, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %c1 = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<4x3x3x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %r1 = tosa.clamp %c1 {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %s1 = tosa.slice %r1, %start, %rows : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x7x8x4xf32>
  %s2 = tosa.slice %s1, %start, %cols : (tensor<1x7x8x4xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x7x7x4xf32>
  %out = tosa.slice %r1, %start, %two : (tensor<1x8x8x4xf32>, !tosa.shape<4>, !tosa.shape<4>) -> tensor<1x2x8x4xf32>
  %c2 = tosa.conv2d %r1, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<4x3x3x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %d = tosa.conv2d %s2, %w1, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : (tensor<1x7x7x4xf32>, tensor<4x1x1x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x4xf32>
  return %c2, %d, %out : tensor<1x8x8x4xf32>, tensor<1x4x4x4xf32>, tensor<1x2x8x4xf32>
}
