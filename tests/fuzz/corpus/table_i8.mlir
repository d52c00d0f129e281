// table_i8 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x11xi8>, %a1: tensor<256xi8>) -> (tensor<3x11xi8>) {
  %r0 = "tosa.table"(%a0, %a1) : (tensor<3x11xi8>, tensor<256xi8>) -> tensor<3x11xi8>
  return %r0 : tensor<3x11xi8>
}
