// while_loop_f32 (tests/e2e/OpCoverageTest.cpp)
func.func @main(%a0: tensor<i32>, %a1: tensor<4xf32>) -> (tensor<4xf32>) {
  %zero = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
  %one = "tosa.const"() <{values = dense<1> : tensor<i32>}> : () -> tensor<i32>
  %w:2 = "tosa.while_loop"(%a0, %a1) ({
  ^bb0(%i: tensor<i32>, %v: tensor<4xf32>):
    %c = "tosa.greater"(%i, %zero) : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "tosa.yield"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %v: tensor<4xf32>):
    %i2 = "tosa.sub"(%i, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %v2 = "tosa.add"(%v, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "tosa.yield"(%i2, %v2) : (tensor<i32>, tensor<4xf32>) -> ()
  }) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>)
  %r0 = "tosa.identity"(%w#1) : (tensor<4xf32>) -> tensor<4xf32>
  return %r0 : tensor<4xf32>
}
