// cast_f16_to_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x9xf16>) -> (tensor<4x9xf32>) {
  %r0 = "tosa.cast"(%a0) : (tensor<4x9xf16>) -> tensor<4x9xf32>
  return %r0 : tensor<4x9xf32>
}
