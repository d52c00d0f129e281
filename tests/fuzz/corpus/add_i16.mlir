// add_i16 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi16>, %a1: tensor<3x37xi16>) -> (tensor<3x37xi16>) {
  %r0 = "tosa.add"(%a0, %a1) : (tensor<3x37xi16>, tensor<3x37xi16>) -> tensor<3x37xi16>
  return %r0 : tensor<3x37xi16>
}
