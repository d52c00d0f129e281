// negate_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xf32>) -> (tensor<3x37xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.negate"(%a0, %zp, %zp) : (tensor<3x37xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x37xf32>
  return %r0 : tensor<3x37xf32>
}
