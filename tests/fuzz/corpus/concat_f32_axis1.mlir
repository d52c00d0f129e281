// concat_f32_axis1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3xf32>, %a1: tensor<2x2xf32>) -> (tensor<2x5xf32>) {
  %r0 = "tosa.concat"(%a0, %a1) <{axis = 1 : i32}> : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
  return %r0 : tensor<2x5xf32>
}
