// RUN: %kiln-opt %s --kiln-place-ops="modes=tosa.matmul=kernel kernels=tosa.matmul" --kiln-outline-clusters | FileCheck %s
// RUN: not %kiln-opt %s --kiln-outline-clusters 2>&1 | FileCheck %s --check-prefix=UNPLACED

// JIT ops on either side of a kernel op become two clusters; kiln_fn is left
// as calls and kernel ops in a topological order; each cluster gets copies of
// the constants it uses.
func.func @kiln_fn(%a: tensor<1x2x3xf32>, %b: tensor<1x3x4xf32>) -> tensor<1x2x4xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %a1 = tosa.add %a, %one : (tensor<1x2x3xf32>, tensor<1x1x1xf32>) -> tensor<1x2x3xf32>
  %a2 = tosa.exp %a1 : (tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
  %m = tosa.matmul %a2, %b, %zp, %zp : (tensor<1x2x3xf32>, tensor<1x3x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x4xf32>
  %t = tosa.tanh %m : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %s = tosa.sub %t, %one : (tensor<1x2x4xf32>, tensor<1x1x1xf32>) -> tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}

// CHECK-LABEL: func.func @kiln_fn(
// CHECK-SAME: %[[A:.*]]: tensor<1x2x3xf32>, %[[B:.*]]: tensor<1x3x4xf32>)
// CHECK: %[[ZP:.*]] = "tosa.const"(){{.*}}tensor<1xf32>
// CHECK: %[[C0:.*]] = call @kiln_cluster0(%[[A]]) : (tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
// CHECK: %[[M:.*]] = tosa.matmul %[[C0]], %[[B]], %[[ZP]], %[[ZP]] {{.*}}kiln.placement = "kernel"
// CHECK: %[[C1:.*]] = call @kiln_cluster1(%[[M]]) : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
// CHECK: return %[[C1]]
// CHECK: func.func private @kiln_cluster0(%[[X:.*]]: tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
// CHECK-NEXT: %[[ONE:.*]] = "tosa.const"(){{.*}}tensor<1x1x1xf32>
// CHECK-NEXT: %[[S:.*]] = tosa.add %[[X]], %[[ONE]]
// CHECK-NEXT: %[[E:.*]] = tosa.exp %[[S]]
// CHECK-NEXT: return %[[E]]
// CHECK: func.func private @kiln_cluster1(
// CHECK-NEXT: "tosa.const"(){{.*}}tensor<1x1x1xf32>
// CHECK-NEXT: tosa.tanh
// CHECK-NEXT: tosa.sub
// CHECK-NEXT: return

// UNPLACED: error: kiln-outline-clusters: op is not placed (run kiln-place-ops first)
