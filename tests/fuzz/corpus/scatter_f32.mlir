// scatter_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x5x3xf32>, %a1: tensor<2x2x3xf32>) -> (tensor<2x5x3xf32>) {
  %idx = "tosa.const"() <{values = dense<[[1, 3], [4, 0]]> : tensor<2x2xi32>}> : () -> tensor<2x2xi32>
  %r0 = "tosa.scatter"(%a0, %idx, %a1) : (tensor<2x5x3xf32>, tensor<2x2xi32>, tensor<2x2x3xf32>) -> tensor<2x5x3xf32>
  return %r0 : tensor<2x5x3xf32>
}
