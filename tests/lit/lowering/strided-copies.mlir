// RUN: %kiln-opt %s --kiln-strided-copies | FileCheck %s

// A copy into a padded buffer's interior (strided target) becomes linalg.copy
// (loops LLVM vectorizes); a copy between contiguous buffers stays one
// memref.copy (memcpy).
// CHECK-LABEL: func.func @pad_interior
// CHECK: linalg.copy ins(%arg0 : memref<1x4x4x8xf32>) outs(%{{.*}} : memref<1x4x4x8xf32, strided<[288, 48, 8, 1], offset: 56>>)
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
