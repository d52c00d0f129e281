// RUN: %kiln-opt %s --kiln-bufferize | FileCheck %s

// Stage 2: tensors -> memrefs with identity layouts at the boundary; results
// become out-parameters (the runtime allocates outputs), temporaries are freed.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK-SAME: %[[A:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>) {
// CHECK-NOT: tensor<
// CHECK: linalg.generic {{.*}} ins(%[[A]] : memref<4x8xf32>) outs(%[[OUT]] : memref<4x8xf32>)
// CHECK: return
// CHECK-NOT: memref.alloc
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @kiln_fn(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %x = math.exp %in : f32
      linalg.yield %x : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
