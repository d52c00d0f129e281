// tile_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3xf32>) -> (tensor<4x6xf32>) {
  %m = "tosa.const_shape"() <{values = dense<[2, 2]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %r0 = "tosa.tile"(%a0, %m) : (tensor<2x3xf32>, !tosa.shape<2>) -> tensor<4x6xf32>
  return %r0 : tensor<4x6xf32>
}
