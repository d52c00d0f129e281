// fft2d_inverse_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x4x8xf32>, %a1: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %r0, %r1 = "tosa.fft2d"(%a0, %a1) <{inverse = true}> : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return %r0, %r1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
