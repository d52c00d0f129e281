// matmul_i8 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3x17xi8>, %a1: tensor<2x17x5xi8>) -> (tensor<2x3x5xi32>) {
  %zp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r0 = "tosa.matmul"(%a0, %a1, %zp, %zp) : (tensor<2x3x17xi8>, tensor<2x17x5xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x3x5xi32>
  return %r0 : tensor<2x3x5xi32>
}
