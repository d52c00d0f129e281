// reduce_all_i1_axis1 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<3x5xi1>) -> (tensor<3x1xi1>) {
  %r0 = "tosa.reduce_all"(%a0) <{axis = 1 : i32}> : (tensor<3x5xi1>) -> tensor<3x1xi1>
  return %r0 : tensor<3x1xi1>
}
