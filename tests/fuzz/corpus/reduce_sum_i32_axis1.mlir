// reduce_sum_i32_axis1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5x7xi32>) -> (tensor<3x1x7xi32>) {
  %r0 = "tosa.reduce_sum"(%a0) <{axis = 1 : i32}> : (tensor<3x5x7xi32>) -> tensor<3x1x7xi32>
  return %r0 : tensor<3x1x7xi32>
}
