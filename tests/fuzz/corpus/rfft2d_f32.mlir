// rfft2d_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x4x8xf32>) -> (tensor<2x4x5xf32>, tensor<2x4x5xf32>) {
  %r0, %r1 = "tosa.rfft2d"(%a0) : (tensor<2x4x8xf32>) -> (tensor<2x4x5xf32>, tensor<2x4x5xf32>)
  return %r0, %r1 : tensor<2x4x5xf32>, tensor<2x4x5xf32>
}
