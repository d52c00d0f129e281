// RUN: %kiln-opt %s --kiln-place-ops --kiln-outline-clusters="max-ops=2" | FileCheck %s
// RUN: %kiln-opt %s --kiln-place-ops --kiln-outline-clusters | FileCheck %s --check-prefix=NOLIMIT

// A chain of five JIT ops with at most two ops per cluster: three clusters
// called in order (without the limit: one).
// CHECK-LABEL: func.func @kiln_fn
// CHECK: %[[C0:.*]] = call @kiln_cluster0(%arg0)
// CHECK: %[[C1:.*]] = call @kiln_cluster1(%[[C0]], %arg0)
// CHECK: %[[C2:.*]] = call @kiln_cluster2(%[[C1]], %arg0)
// CHECK: return %[[C2]]
// CHECK-LABEL: func.func private @kiln_cluster0
// CHECK-COUNT-2: tosa.add
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @kiln_cluster2
// CHECK-NEXT: tosa.add
// CHECK-NEXT: return
// NOLIMIT-LABEL: func.func @kiln_fn
// NOLIMIT: call @kiln_cluster0
// NOLIMIT-NOT: call @kiln_cluster1
func.func @kiln_fn(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = tosa.add %x, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %b = tosa.add %a, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %c = tosa.add %b, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %d = tosa.add %c, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %e = tosa.add %d, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %e : tensor<16xf32>
}
