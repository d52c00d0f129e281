// kiln-cancel-points: a while loop also leaves when its call is cancelled
// (kiln_cancel_requested() != 0); loops of known length are left alone.
// RUN: %kiln-opt %s --kiln-cancel-points | FileCheck %s

// CHECK: func.func private @kiln_cancel_requested() -> i64
// CHECK-LABEL: func.func @loop(
// CHECK: scf.while
// CHECK: %[[C:.*]] = arith.cmpi slt
// CHECK: %[[R:.*]] = func.call @kiln_cancel_requested() : () -> i64
// CHECK: %[[GO:.*]] = arith.cmpi eq, %[[R]], %{{.*}} : i64
// CHECK: %[[BOTH:.*]] = arith.andi %[[C]], %[[GO]] : i1
// CHECK: scf.condition(%[[BOTH]])
func.func @loop(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.while (%i = %c0) : (i32) -> i32 {
    %c = arith.cmpi slt, %i, %n : i32
    scf.condition(%c) %i : i32
  } do {
  ^bb0(%i: i32):
    %next = arith.addi %i, %c1 : i32
    scf.yield %next : i32
  }
  return %r : i32
}

// CHECK-LABEL: func.func @counted(
// CHECK-NOT: kiln_cancel_requested
// CHECK: return
func.func @counted(%m: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %f, %m[%i] : memref<8xf32>
  }
  return
}
