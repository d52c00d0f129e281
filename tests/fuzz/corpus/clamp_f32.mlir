// clamp_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xf32>) -> (tensor<3x37xf32>) {
  %r0 = "tosa.clamp"(%a0) <{min_val = -0.5 : f32, max_val = 0.75 : f32}> : (tensor<3x37xf32>) -> tensor<3x37xf32>
  return %r0 : tensor<3x37xf32>
}
