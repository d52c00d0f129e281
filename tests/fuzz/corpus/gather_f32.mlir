// gather_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x5x3xf32>, %a1: tensor<2x4xi32>) -> (tensor<2x4x3xf32>) {
  %r0 = "tosa.gather"(%a0, %a1) : (tensor<2x5x3xf32>, tensor<2x4xi32>) -> tensor<2x4x3xf32>
  return %r0 : tensor<2x4x3xf32>
}
