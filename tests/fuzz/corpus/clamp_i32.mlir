// clamp_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x37xi32>) -> (tensor<3x37xi32>) {
  %r0 = "tosa.clamp"(%a0) <{min_val = -3 : i32, max_val = 5 : i32}> : (tensor<3x37xi32>) -> tensor<3x37xi32>
  return %r0 : tensor<3x37xi32>
}
