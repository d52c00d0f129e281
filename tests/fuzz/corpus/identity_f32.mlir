// identity_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>) {
  %r0 = "tosa.identity"(%a0) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %r0 : tensor<2x3x4xf32>
}
