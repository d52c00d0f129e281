// RUN: %kiln-opt %s --kiln-guard-traps | FileCheck %s

// A slice at an offset read from data (scatter's rows, ResNet-50's strided
// windows): the offset is checked against [0, dim - size], a fault is
// reported and the slice reads from 0 instead. Static offsets are left.
// CHECK: module attributes {kiln.fault_sites = ["{{.*}}guard-slices.mlir:[[@LINE+9]]:8: index out of range"]}
// CHECK-LABEL: func.func @rows
// CHECK: %[[HI:.*]] = arith.cmpi sgt, %[[O:.*]], %c42
// CHECK: %[[LO:.*]] = arith.cmpi slt, %[[O]], %c0
// CHECK: %[[BAD:.*]] = arith.ori %[[LO]], %[[HI]]
// CHECK: %[[SAFE:.*]] = arith.select %[[BAD]], %c0, %[[O]]
// CHECK: scf.if %[[BAD]]
// CHECK: tensor.extract_slice %{{.*}}[0, %[[SAFE]], 0] [36, 7, 128] [1, 1, 1]
func.func @rows(%t: tensor<36x49x128xf32>, %o: index) -> tensor<36x7x128xf32> {
  %s = tensor.extract_slice %t[0, %o, 0] [36, 7, 128] [1, 1, 1] : tensor<36x49x128xf32> to tensor<36x7x128xf32>
  return %s : tensor<36x7x128xf32>
}
// CHECK-LABEL: func.func @fixed
// CHECK-NOT: kiln_report_fault
// CHECK: tensor.extract_slice %{{.*}}[0, 7, 0] [36, 7, 128] [1, 1, 1]
func.func @fixed(%t: tensor<36x49x128xf32>) -> tensor<36x7x128xf32> {
  %s = tensor.extract_slice %t[0, 7, 0] [36, 7, 128] [1, 1, 1] : tensor<36x49x128xf32> to tensor<36x7x128xf32>
  return %s : tensor<36x7x128xf32>
}
