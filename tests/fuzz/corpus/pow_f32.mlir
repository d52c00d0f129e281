// pow_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xf32>, %a1: tensor<3x37xf32>) -> (tensor<3x37xf32>) {
  %r0 = "tosa.pow"(%a0, %a1) : (tensor<3x37xf32>, tensor<3x37xf32>) -> tensor<3x37xf32>
  return %r0 : tensor<3x37xf32>
}
