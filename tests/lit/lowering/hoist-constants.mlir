// RUN: %kiln-opt %s --kiln-hoist-constants | FileCheck %s
// RUN: %kiln-opt %s --kiln-hoist-constants="min-elements=2" | FileCheck %s --check-prefix=SMALL

// Large constants become trailing arguments carrying kiln.weight; identical
// values share one argument; splats and small constants stay.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<16xf32>,
// CHECK-SAME: %[[W:.*]]: tensor<16xf32> {kiln.weight = dense<[0.000000e+00, 1.000000e+00
// CHECK-SAME: %[[R:.*]]: tensor<2x2xf32> {kiln.weight = dense_resource<blob1> : tensor<2x2xf32>})
// CHECK-NOT: {kiln.weight
// CHECK-DAG: tosa.const{{.*}}dense<1.000000e+00>
// CHECK-DAG: tosa.const{{.*}}dense<[1.000000e+00, 2.000000e+00]>
// CHECK: tosa.add %[[X]], %[[W]]
// CHECK: tosa.add %{{.*}}, %[[W]]
// SMALL: {kiln.weight = dense<[1.000000e+00, 2.000000e+00]>
func.func @main(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<2x2xf32>, tensor<16xf32>, tensor<2xf32>) {
  %w = "tosa.const"() <{values = dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : tensor<16xf32>}> : () -> tensor<16xf32>
  %w2 = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : tensor<16xf32>
  %r = "tosa.const"() <{values = dense_resource<blob1> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
  %s = "tosa.const"() <{values = dense<1.0> : tensor<16xf32>}> : () -> tensor<16xf32>
  %small = "tosa.const"() <{values = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %a = tosa.add %x, %w : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %b = tosa.add %a, %w2 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %b, %r, %s, %small : tensor<16xf32>, tensor<2x2xf32>, tensor<16xf32>, tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
