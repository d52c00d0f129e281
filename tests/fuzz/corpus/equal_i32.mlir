// equal_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi32>, %a1: tensor<3x37xi32>) -> (tensor<3x37xi1>) {
  %r0 = "tosa.equal"(%a0, %a1) : (tensor<3x37xi32>, tensor<3x37xi32>) -> tensor<3x37xi1>
  return %r0 : tensor<3x37xi1>
}
