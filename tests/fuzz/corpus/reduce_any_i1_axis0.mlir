// reduce_any_i1_axis0 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5xi1>) -> (tensor<1x5xi1>) {
  %r0 = "tosa.reduce_any"(%a0) <{axis = 0 : i32}> : (tensor<3x5xi1>) -> tensor<1x5xi1>
  return %r0 : tensor<1x5xi1>
}
