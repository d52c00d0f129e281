// apply_scale_i32_single_round (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x7xi32>) -> (tensor<3x7xi32>) {
  %m = "tosa.const"() <{values = dense<1073741824> : tensor<3x7xi32>}> : () -> tensor<3x7xi32>
  %s = "tosa.const"() <{values = dense<31> : tensor<3x7xi8>}> : () -> tensor<3x7xi8>
  %r0 = "tosa.apply_scale"(%a0, %m, %s) <{rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>}> : (tensor<3x7xi32>, tensor<3x7xi32>, tensor<3x7xi8>) -> tensor<3x7xi32>
  return %r0 : tensor<3x7xi32>
}
