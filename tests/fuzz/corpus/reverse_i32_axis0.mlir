// reverse_i32_axis0 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x4xi32>) -> (tensor<3x4xi32>) {
  %r0 = "tosa.reverse"(%a0) <{axis = 0 : i32}> : (tensor<3x4xi32>) -> tensor<3x4xi32>
  return %r0 : tensor<3x4xi32>
}
