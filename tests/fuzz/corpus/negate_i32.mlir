// negate_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi32>) -> (tensor<3x37xi32>) {
  %zp = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
  %r0 = "tosa.negate"(%a0, %zp, %zp) : (tensor<3x37xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3x37xi32>
  return %r0 : tensor<3x37xi32>
}
