// cast_f32_to_i1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x9xf32>) -> (tensor<4x9xi1>) {
  %r0 = "tosa.cast"(%a0) : (tensor<4x9xf32>) -> tensor<4x9xi1>
  return %r0 : tensor<4x9xi1>
}
