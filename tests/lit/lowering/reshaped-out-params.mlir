// RUN: %kiln-opt %s --pass-pipeline="builtin.module(func.func(kiln-reshaped-out-params))" | FileCheck %s

// A 2-D result returned as 1 x M x N: computed in the out-param through its
// collapse, not in a temporary copied there.
// CHECK-LABEL: func.func @expanded
// CHECK-SAME: (%[[IN:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<1x4x8xf32>)
// CHECK-NEXT: %[[VIEW:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1], [2]]
// CHECK-NEXT: memref.copy %[[IN]], %[[VIEW]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: return
func.func @expanded(%in: memref<4x8xf32>, %out: memref<1x4x8xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  memref.copy %in, %a : memref<4x8xf32> to memref<4x8xf32>
  %e = memref.expand_shape %a [[0, 1], [2]] output_shape [1, 4, 8] : memref<4x8xf32> into memref<1x4x8xf32>
  memref.copy %e, %out : memref<1x4x8xf32> to memref<1x4x8xf32>
  return
}

// The out-param is also read: the copy stays.
// CHECK-LABEL: func.func @out_also_read
// CHECK: memref.alloc
// CHECK: memref.copy %{{.*}}, %arg1
func.func @out_also_read(%in: memref<4x8xf32>, %out: memref<1x4x8xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %c = memref.collapse_shape %out [[0, 1], [2]] : memref<1x4x8xf32> into memref<4x8xf32>
  memref.copy %c, %a : memref<4x8xf32> to memref<4x8xf32>
  %e = memref.expand_shape %a [[0, 1], [2]] output_shape [1, 4, 8] : memref<4x8xf32> into memref<1x4x8xf32>
  memref.copy %e, %out : memref<1x4x8xf32> to memref<1x4x8xf32>
  return
}
