// RUN: %kiln-opt %s --kiln-guard-traps | FileCheck %s

// cf.assert (exporters' checks): a false condition reports a fault with the
// assert's message and location; the assert is gone.
// CHECK: module attributes {kiln.fault_sites = ["{{.*}}guard-asserts.mlir:[[@LINE+7]]:3: assertion failed: limit must be positive"]}
// CHECK-LABEL: func.func @checked
// CHECK: %[[BAD:.*]] = arith.xori %{{.*}}, %true
// CHECK: scf.if %[[BAD]]
// CHECK: call @kiln_report_fault
// CHECK-NOT: cf.assert
func.func @checked(%ok: i1) {
  cf.assert %ok, "limit must be positive"
  return
}
