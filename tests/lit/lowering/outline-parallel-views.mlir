// RUN: %kiln-opt %s --kiln-outline-parallel | FileCheck %s

// A forall writing into a view (a padded buffer's interior: strided, so not
// passable as a bare pointer) still runs in parallel: the body gets the
// buffer and rebuilds the view.
// CHECK-LABEL: func.func @into_view(
// CHECK: call @kiln_par_launch_into_view_0(%{{.*}}, %arg0, %arg1)
// CHECK-NOT: scf.forall
// CHECK: func.func private @into_view_par0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<8x16xf32>, %[[P:.*]]: memref<10x18xf32>)
// CHECK: %[[V:.*]] = memref.subview %[[P]][1, 1] [8, 16] [1, 1]
// CHECK: scf.for
// CHECK: memref.subview %[[V]]
func.func @into_view(%in: memref<8x16xf32>, %padded: memref<10x18xf32>) {
  %interior = memref.subview %padded[1, 1] [8, 16] [1, 1] : memref<10x18xf32> to memref<8x16xf32, strided<[18, 1], offset: 19>>
  scf.forall (%i) = (0) to (8) step (4) {
    %a = memref.subview %in[%i, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
    %b = memref.subview %interior[%i, 0] [4, 16] [1, 1] : memref<8x16xf32, strided<[18, 1], offset: 19>> to memref<4x16xf32, strided<[18, 1], offset: ?>>
    memref.copy %a, %b : memref<4x16xf32, strided<[16, 1], offset: ?>> to memref<4x16xf32, strided<[18, 1], offset: ?>>
  }
  return
}
