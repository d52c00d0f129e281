// add_i64 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi64>, %a1: tensor<3x37xi64>) -> (tensor<3x37xi64>) {
  %r0 = "tosa.add"(%a0, %a1) : (tensor<3x37xi64>, tensor<3x37xi64>) -> tensor<3x37xi64>
  return %r0 : tensor<3x37xi64>
}
