// cond_if_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<i1>, %a1: tensor<5xf32>) -> (tensor<5xf32>) {
  %r0 = "tosa.cond_if"(%a0, %a1) ({
  ^bb0(%t: tensor<5xf32>):
    %e = "tosa.exp"(%t) : (tensor<5xf32>) -> tensor<5xf32>
    "tosa.yield"(%e) : (tensor<5xf32>) -> ()
  }, {
  ^bb0(%t: tensor<5xf32>):
    %e = "tosa.abs"(%t) : (tensor<5xf32>) -> tensor<5xf32>
    "tosa.yield"(%e) : (tensor<5xf32>) -> ()
  }) : (tensor<i1>, tensor<5xf32>) -> tensor<5xf32>
  return %r0 : tensor<5xf32>
}
