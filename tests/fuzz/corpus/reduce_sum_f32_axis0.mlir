// reduce_sum_f32_axis0 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5x7xf32>) -> (tensor<1x5x7xf32>) {
  %r0 = "tosa.reduce_sum"(%a0) <{axis = 0 : i32}> : (tensor<3x5x7xf32>) -> tensor<1x5x7xf32>
  return %r0 : tensor<1x5x7xf32>
}
