// exp_f32_rank0 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<f32>) -> (tensor<f32>) {
  %r0 = "tosa.exp"(%a0) : (tensor<f32>) -> tensor<f32>
  return %r0 : tensor<f32>
}
