// conv2d_i8_acc_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1x5x5x2xi8>, %a1: tensor<3x3x3x2xi8>, %a2: tensor<3xi32>) -> (tensor<1x5x5x3xi32>) {
  %zp = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %r0 = "tosa.conv2d"(%a0, %a1, %a2, %zp, %zp) <{acc_type = i32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>}> : (tensor<1x5x5x2xi8>, tensor<3x3x3x2xi8>, tensor<3xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x5x5x3xi32>
  return %r0 : tensor<1x5x5x3xi32>
}
