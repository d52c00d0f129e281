// add_i8 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi8>, %a1: tensor<3x37xi8>) -> (tensor<3x37xi8>) {
  %r0 = "tosa.add"(%a0, %a1) : (tensor<3x37xi8>, tensor<3x37xi8>) -> tensor<3x37xi8>
  return %r0 : tensor<3x37xi8>
}
