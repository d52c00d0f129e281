// RUN: %kiln-opt %s --kiln-strided-copies | FileCheck %s

// A copy into a padded buffer's interior (strided target) becomes loops over
// the outer dimensions moving the innermost in whole vectors; a copy between
// contiguous buffers stays one memref.copy (memcpy); an innermost size with
// no vector divisor (odd) falls back to linalg.copy loops.
// CHECK-LABEL: func.func @pad_interior
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8 step %c8
// CHECK: %[[V:.*]] = vector.transfer_read %arg0{{.*}} : memref<1x4x4x8xf32>, vector<8xf32>
// CHECK: vector.transfer_write %[[V]], %{{.*}} : vector<8xf32>, memref<1x4x4x8xf32, strided<[288, 48, 8, 1], offset: 56>>
// CHECK-NOT: memref.copy
func.func @pad_interior(%x: memref<1x4x4x8xf32>, %padded: memref<1x6x6x8xf32>) {
  %interior = memref.subview %padded[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : memref<1x6x6x8xf32> to memref<1x4x4x8xf32, strided<[288, 48, 8, 1], offset: 56>>
  memref.copy %x, %interior : memref<1x4x4x8xf32> to memref<1x4x4x8xf32, strided<[288, 48, 8, 1], offset: 56>>
  return
}
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %arg0, %arg1
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<64xf32>, %b: memref<64xf32>) {
  memref.copy %a, %b : memref<64xf32> to memref<64xf32>
  return
}
// CHECK-LABEL: func.func @odd
// CHECK: linalg.copy
func.func @odd(%x: memref<3x5xf32>, %y: memref<4x6xf32>) {
  %s = memref.subview %y[1, 1] [3, 5] [1, 1] : memref<4x6xf32> to memref<3x5xf32, strided<[6, 1], offset: 7>>
  memref.copy %x, %s : memref<3x5xf32> to memref<3x5xf32, strided<[6, 1], offset: 7>>
  return
}
