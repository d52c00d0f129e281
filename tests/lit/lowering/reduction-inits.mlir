// RUN: %kiln-opt %s --pass-pipeline="builtin.module(func.func(tosa-to-linalg,kiln-reduction-inits))" | FileCheck %s

// Float max and min reductions start from -inf and +inf, as TOSA's do
// (tosa-to-linalg takes -FLT_MAX and FLT_MAX): a row of -inf reduces to
// -inf. A sum keeps its 0.
// CHECK-LABEL: func.func @inits
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NINF]] : f32)
// CHECK: arith.maximumf
// CHECK: %[[PINF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: linalg.fill ins(%[[PINF]] : f32)
// CHECK: arith.minimumf
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZERO]] : f32)
// CHECK: arith.addf
func.func @inits(%x: tensor<4x9xf32>) -> (tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x9xf32>) -> tensor<4x1xf32>
  %n = tosa.reduce_min %x {axis = 1 : i32} : (tensor<4x9xf32>) -> tensor<4x1xf32>
  %s = tosa.reduce_sum %x {axis = 1 : i32} : (tensor<4x9xf32>) -> tensor<4x1xf32>
  return %m, %n, %s : tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}
