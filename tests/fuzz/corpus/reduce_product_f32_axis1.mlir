// reduce_product_f32_axis1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5x7xf32>) -> (tensor<3x1x7xf32>) {
  %r0 = "tosa.reduce_product"(%a0) <{axis = 1 : i32}> : (tensor<3x5x7xf32>) -> tensor<3x1x7xf32>
  return %r0 : tensor<3x1x7xf32>
}
