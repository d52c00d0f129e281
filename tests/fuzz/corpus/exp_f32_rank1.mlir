// exp_f32_rank1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1xf32>) -> (tensor<1xf32>) {
  %r0 = "tosa.exp"(%a0) : (tensor<1xf32>) -> tensor<1xf32>
  return %r0 : tensor<1xf32>
}
