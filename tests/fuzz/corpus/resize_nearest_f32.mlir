// resize_nearest_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<1x2x3x2xf32>) -> (tensor<1x3x5x2xf32>) {
  %sc = "tosa.const_shape"() <{values = dense<[2, 1, 2, 1]> : tensor<4xindex>}> : () -> !tosa.shape<4>
  %off = "tosa.const_shape"() <{values = dense<[0, 0]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %r0 = "tosa.resize"(%a0, %sc, %off, %off) <{mode = #tosa.resize_mode<NEAREST_NEIGHBOR>}> : (tensor<1x2x3x2xf32>, !tosa.shape<4>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<1x3x5x2xf32>
  return %r0 : tensor<1x3x5x2xf32>
}
