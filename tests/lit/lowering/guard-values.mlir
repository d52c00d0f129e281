// kiln-guard-traps gives defined results where LLVM would make poison:
// shifts by an amount outside [0, bits) and NaN converted to an integer.
// RUN: %kiln-opt %s --kiln-guard-traps | FileCheck %s

// CHECK-LABEL: func.func @shifts(
// CHECK: %[[W:.*]] = arith.constant 32 : i32
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[S:.*]], %[[W]] : i32
// CHECK: %[[L:.*]] = arith.shli %{{.*}}, %[[S]] : i32
// CHECK: %[[LSAFE:.*]] = arith.select %[[OK]], %[[L]], %{{.*}} : i32
// CHECK: %[[LAST:.*]] = arith.constant 31 : i32
// CHECK: %[[AMT:.*]] = arith.select %{{.*}}, %[[S]], %[[LAST]] : i32
// CHECK: %[[R:.*]] = arith.shrsi %{{.*}}, %[[AMT]] : i32
// A constant amount in range needs nothing.
// CHECK: %[[K:.*]] = arith.shrui %{{.*}}, %c3_i32 : i32
// CHECK-NEXT: return %[[LSAFE]], %[[R]], %[[K]]
func.func @shifts(%a: i32, %s: i32) -> (i32, i32, i32) {
  %l = arith.shli %a, %s : i32
  %r = arith.shrsi %a, %s : i32
  %c3 = arith.constant 3 : i32
  %k = arith.shrui %a, %c3 : i32
  return %l, %r, %k : i32, i32, i32
}

// CHECK-LABEL: func.func @nan_to_int(
// CHECK: %[[I:.*]] = arith.fptosi %[[X:.*]] : f32 to i8
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]] : f32
// CHECK: %[[MAX:.*]] = arith.constant 127 : i8
// CHECK: %[[SAFE:.*]] = arith.select %[[NAN]], %[[MAX]], %[[I]] : i8
// CHECK: return %[[SAFE]]
func.func @nan_to_int(%x: f32) -> i8 {
  %i = arith.fptosi %x : f32 to i8
  return %i : i8
}
