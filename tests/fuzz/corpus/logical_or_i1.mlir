// logical_or_i1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi1>, %a1: tensor<3x37xi1>) -> (tensor<3x37xi1>) {
  %r0 = "tosa.logical_or"(%a0, %a1) : (tensor<3x37xi1>, tensor<3x37xi1>) -> tensor<3x37xi1>
  return %r0 : tensor<3x37xi1>
}
