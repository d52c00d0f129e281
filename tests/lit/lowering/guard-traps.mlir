// RUN: %kiln-opt %s --kiln-guard-traps | FileCheck %s

// A divisor that may be zero reports a fault and divides by 1 instead;
// INT_MIN / -1 divides by 1 too. A constant divisor that cannot trap is left.
// CHECK: module attributes {kiln.fault_sites = ["{{.*}}guard-traps.mlir:[[@LINE+11]]:8: integer division by zero", "{{.*}}guard-traps.mlir:[[@LINE+23]]:8: index out of range"]}
// CHECK: func.func private @kiln_report_fault(i64)
// CHECK-LABEL: func.func @div
// CHECK: %[[Z:.*]] = arith.cmpi eq, %[[B:.*]], %c0_i32
// CHECK: scf.if %[[Z]] {
// CHECK-NEXT: %[[SITE:.*]] = arith.constant 0 : i64
// CHECK-NEXT: func.call @kiln_report_fault(%[[SITE]])
// CHECK: %[[SAFE:.*]] = arith.select %{{.*}}, %c1_i32, %[[B]]
// CHECK: arith.divsi %{{.*}}, %[[SAFE]]
// CHECK: arith.divsi %{{.*}}, %c4_i32
func.func @div(%a: i32, %b: i32) -> (i32, i32) {
  %q = arith.divsi %a, %b : i32
  %c4 = arith.constant 4 : i32
  %r = arith.divsi %a, %c4 : i32
  return %q, %r : i32, i32
}

// An index read from data is checked against the dimension and clamped to 0.
// CHECK-LABEL: func.func @gather
// CHECK: arith.cmpi sge, %{{.*}}, %c8
// CHECK: func.call @kiln_report_fault(%c1_i64)
// CHECK: tensor.extract %{{.*}}[%{{.*}}] : tensor<8xf32>
func.func @gather(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  return %x : f32
}
