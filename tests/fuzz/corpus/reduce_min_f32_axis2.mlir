// reduce_min_f32_axis2 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5x7xf32>) -> (tensor<3x5x1xf32>) {
  %r0 = "tosa.reduce_min"(%a0) <{axis = 2 : i32}> : (tensor<3x5x7xf32>) -> tensor<3x5x1xf32>
  return %r0 : tensor<3x5x1xf32>
}
