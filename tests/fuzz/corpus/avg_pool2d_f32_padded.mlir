// avg_pool2d_f32_padded (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1x6x7x3xf32>) -> (tensor<1x3x4x3xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.avg_pool2d"(%a0, %zp, %zp) <{acc_type = f32, kernel = array<i64: 3, 2>, stride = array<i64: 2, 2>, pad = array<i64: 1, 0, 0, 1>}> : (tensor<1x6x7x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x4x3xf32>
  return %r0 : tensor<1x3x4x3xf32>
}
