// reduce_max_i32_axis0 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5x7xi32>) -> (tensor<1x5x7xi32>) {
  %r0 = "tosa.reduce_max"(%a0) <{axis = 0 : i32}> : (tensor<3x5x7xi32>) -> tensor<1x5x7xi32>
  return %r0 : tensor<1x5x7xi32>
}
