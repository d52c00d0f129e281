// RUN: %kiln-opt %s --split-input-file --kiln-place-ops --kiln-outline-clusters="inputs=4" | FileCheck %s
// RUN: %kiln-opt %s --split-input-file --kiln-place-ops --kiln-outline-clusters="inputs=4 attention=false" | FileCheck %s --check-prefix=OFF
// RUN: %kiln-opt %s --split-input-file --kiln-place-ops --kiln-outline-clusters | FileCheck %s --check-prefix=WEIGHTS

// Attention, softmax(Q Kᵀ / 8 + mask) x V with Q, Kᵀ and V inputs: x V
// joins the cluster of Q Kᵀ and the softmax (one anchor counted), and the
// transpose after it too. With attention=false, or where the operands
// count as weights (the pass not told how many arguments are inputs),
// x V starts a cluster of its own.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK: %[[C0:.*]] = call @kiln_cluster0(%arg0, %arg1, %arg3, %arg2)
// CHECK-NEXT: return %[[C0]]
// CHECK: func.func private @kiln_cluster0(
// CHECK-NOT: func.func
// CHECK: tosa.matmul
// CHECK: tosa.reduce_max
// CHECK: tosa.reduce_sum
// CHECK: tosa.matmul
// CHECK: tosa.transpose
// CHECK: return
// OFF-LABEL: func.func @kiln_fn(
// OFF: call @kiln_cluster0(
// OFF: call @kiln_cluster1(
// WEIGHTS-LABEL: func.func @kiln_fn(
// WEIGHTS: call @kiln_cluster0(
// WEIGHTS: call @kiln_cluster1(
func.func @kiln_fn(%q: tensor<2x16x8xf32>, %kt: tensor<2x8x16xf32>, %v: tensor<2x16x8xf32>, %mask: tensor<1x1x16x16xf32>) -> tensor<1x16x2x8xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %scale = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %sh4 = tosa.const_shape {values = dense<[1, 2, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %sh3 = tosa.const_shape {values = dense<[2, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %osh = tosa.const_shape {values = dense<[1, 2, 16, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s = tosa.matmul %q, %kt, %z, %z : (tensor<2x16x8xf32>, tensor<2x8x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x16x16xf32>
  %s4 = tosa.reshape %s, %sh4 : (tensor<2x16x16xf32>, !tosa.shape<4>) -> tensor<1x2x16x16xf32>
  %sc = tosa.mul %s4, %scale, %shift : (tensor<1x2x16x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x16x16xf32>
  %m = tosa.add %sc, %mask : (tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x2x16x16xf32>
  %mx = tosa.reduce_max %m {axis = 3 : i32} : (tensor<1x2x16x16xf32>) -> tensor<1x2x16x1xf32>
  %d = tosa.sub %m, %mx : (tensor<1x2x16x16xf32>, tensor<1x2x16x1xf32>) -> tensor<1x2x16x16xf32>
  %e = tosa.exp %d : (tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
  %sum = tosa.reduce_sum %e {axis = 3 : i32} : (tensor<1x2x16x16xf32>) -> tensor<1x2x16x1xf32>
  %r = tosa.reciprocal %sum : (tensor<1x2x16x1xf32>) -> tensor<1x2x16x1xf32>
  %p4 = tosa.mul %e, %r, %shift : (tensor<1x2x16x16xf32>, tensor<1x2x16x1xf32>, tensor<1xi8>) -> tensor<1x2x16x16xf32>
  %p = tosa.reshape %p4, %sh3 : (tensor<1x2x16x16xf32>, !tosa.shape<3>) -> tensor<2x16x16xf32>
  %o = tosa.matmul %p, %v, %z, %z : (tensor<2x16x16xf32>, tensor<2x16x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x16x8xf32>
  %o4 = tosa.reshape %o, %osh : (tensor<2x16x8xf32>, !tosa.shape<4>) -> tensor<1x2x16x8xf32>
  %t = tosa.transpose %o4 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x2x16x8xf32>) -> tensor<1x16x2x8xf32>
  return %t : tensor<1x16x2x8xf32>
}

// -----

// A matmul on a weight, a layer norm's row reductions, and a matmul on
// another weight (a transformer's FFN) is no attention: each matmul keeps
// a cluster of its own.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK: call @kiln_cluster0(
// CHECK: call @kiln_cluster1(
// OFF-LABEL: func.func @kiln_fn(
// WEIGHTS-LABEL: func.func @kiln_fn(
func.func @kiln_fn(%x: tensor<1x16x8xf32>, %a: tensor<1x1x1xf32>, %b: tensor<1x1x1xf32>, %c: tensor<1x1x1xf32>, %w1: tensor<1x8x32xf32>, %w2: tensor<1x32x8xf32>) -> tensor<1x16x8xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %h = tosa.matmul %x, %w1, %z, %z : (tensor<1x16x8xf32>, tensor<1x8x32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x32xf32>
  %mean = tosa.reduce_sum %h {axis = 2 : i32} : (tensor<1x16x32xf32>) -> tensor<1x16x1xf32>
  %d = tosa.sub %h, %mean : (tensor<1x16x32xf32>, tensor<1x16x1xf32>) -> tensor<1x16x32xf32>
  %n = tosa.mul %d, %d, %shift : (tensor<1x16x32xf32>, tensor<1x16x32xf32>, tensor<1xi8>) -> tensor<1x16x32xf32>
  %o = tosa.matmul %n, %w2, %z, %z : (tensor<1x16x32xf32>, tensor<1x32x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x8xf32>
  return %o : tensor<1x16x8xf32>
}
