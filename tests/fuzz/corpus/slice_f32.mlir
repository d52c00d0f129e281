// slice_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<4x6xf32>) -> (tensor<2x3xf32>) {
  %st = "tosa.const_shape"() <{values = dense<[1, 2]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %sz = "tosa.const_shape"() <{values = dense<[2, 3]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %r0 = "tosa.slice"(%a0, %st, %sz) : (tensor<4x6xf32>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<2x3xf32>
  return %r0 : tensor<2x3xf32>
}
