// matmul_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3x17xf32>, %a1: tensor<2x17x5xf32>) -> (tensor<2x3x5xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.matmul"(%a0, %a1, %zp, %zp) : (tensor<2x3x17xf32>, tensor<2x17x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x5xf32>
  return %r0 : tensor<2x3x5xf32>
}
