// mul_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xf32>, %a1: tensor<3x37xf32>) -> (tensor<3x37xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r0 = "tosa.mul"(%a0, %a1, %shift) : (tensor<3x37xf32>, tensor<3x37xf32>, tensor<1xi8>) -> tensor<3x37xf32>
  return %r0 : tensor<3x37xf32>
}
