// conv2d_f32_stride_pad_dilation (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1x7x9x3xf32>, %a1: tensor<4x3x3x3xf32>, %a2: tensor<4xf32>) -> (tensor<1x4x8x4xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.conv2d"(%a0, %a1, %a2, %zp, %zp) <{acc_type = f32, pad = array<i64: 1, 1, 2, 1>, stride = array<i64: 2, 1>, dilation = array<i64: 1, 2>}> : (tensor<1x7x9x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x8x4xf32>
  return %r0 : tensor<1x4x8x4xf32>
}
