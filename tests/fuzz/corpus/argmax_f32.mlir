// argmax_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x9xf32>) -> (tensor<4xi32>) {
  %r0 = "tosa.argmax"(%a0) <{axis = 1 : i32}> : (tensor<4x9xf32>) -> tensor<4xi32>
  return %r0 : tensor<4xi32>
}
