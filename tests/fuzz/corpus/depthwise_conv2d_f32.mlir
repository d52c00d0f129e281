// depthwise_conv2d_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1x6x6x2xf32>, %a1: tensor<3x3x2x2xf32>, %a2: tensor<4xf32>) -> (tensor<1x3x3x4xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.depthwise_conv2d"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>}> : (tensor<1x6x6x2xf32>, tensor<3x3x2x2xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x3x4xf32>
  return %r0 : tensor<1x3x3x4xf32>
}
