// cast_i1_to_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x9xi1>) -> (tensor<4x9xi32>) {
  %r0 = "tosa.cast"(%a0) : (tensor<4x9xi1>) -> tensor<4x9xi32>
  return %r0 : tensor<4x9xi32>
}
