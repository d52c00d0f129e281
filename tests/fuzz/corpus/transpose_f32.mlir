// transpose_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>) {
  %r0 = "tosa.transpose"(%a0) <{perms = array<i32: 2, 0, 1>}> : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %r0 : tensor<4x2x3xf32>
}
