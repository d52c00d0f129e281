// greater_equal_f32_broadcast (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x1x5xf32>, %a1: tensor<1x4x5xf32>) -> (tensor<3x4x5xi1>) {
  %r0 = "tosa.greater_equal"(%a0, %a1) : (tensor<3x1x5xf32>, tensor<1x4x5xf32>) -> tensor<3x4x5xi1>
  return %r0 : tensor<3x4x5xi1>
}
