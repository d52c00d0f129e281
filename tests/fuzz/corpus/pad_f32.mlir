// pad_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3xf32>) -> (tensor<3x6xf32>) {
  %p = "tosa.const_shape"() <{values = dense<[1, 0, 2, 1]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %pc = "tosa.const"() <{values = dense<-1.5> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r0 = "tosa.pad"(%a0, %p, %pc) : (tensor<2x3xf32>, !tosa.shape<4>, tensor<1xf32>) -> tensor<3x6xf32>
  return %r0 : tensor<3x6xf32>
}
