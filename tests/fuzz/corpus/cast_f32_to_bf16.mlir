// cast_f32_to_bf16 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x9xf32>) -> (tensor<4x9xbf16>) {
  %r0 = "tosa.cast"(%a0) : (tensor<4x9xf32>) -> tensor<4x9xbf16>
  return %r0 : tensor<4x9xbf16>
}
