// select_f32_broadcast (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x1x5xi1>, %a1: tensor<3x4x5xf32>, %a2: tensor<1x4x5xf32>) -> (tensor<3x4x5xf32>) {
  %r0 = "tosa.select"(%a0, %a1, %a2) : (tensor<3x1x5xi1>, tensor<3x4x5xf32>, tensor<1x4x5xf32>) -> tensor<3x4x5xf32>
  return %r0 : tensor<3x4x5xf32>
}
