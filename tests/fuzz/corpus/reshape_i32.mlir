// reshape_i32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<2x3x4xi32>) -> (tensor<6x4xi32>) {
  %s = "tosa.const_shape"() <{values = dense<[6, 4]> : tensor<2xindex>}> : () -> !tosa.shape<2>
  %r0 = "tosa.reshape"(%a0, %s) : (tensor<2x3x4xi32>, !tosa.shape<2>) -> tensor<6x4xi32>
  return %r0 : tensor<6x4xi32>
}
