// bitwise_not_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi32>) -> (tensor<3x37xi32>) {
  %r0 = "tosa.bitwise_not"(%a0) : (tensor<3x37xi32>) -> tensor<3x37xi32>
  return %r0 : tensor<3x37xi32>
}
