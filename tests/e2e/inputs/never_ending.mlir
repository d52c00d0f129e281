// A tosa.while_loop whose condition never turns false (the counter never
// moves): only a deadline or a cancellation stops @main. @twice ends.
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %i0 = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
  %r:2 = tosa.while_loop (%i = %i0, %acc = %x) : (tensor<i32>, tensor<f32>) -> (tensor<i32>, tensor<f32>) {
    %ten = "tosa.const"() <{values = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %c = tosa.greater %ten, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
    tosa.yield %c : tensor<i1>
  } do {
  ^bb0(%i: tensor<i32>, %acc: tensor<f32>):
    %zero = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %n = tosa.add %i, %zero : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %a = tosa.add %acc, %acc : (tensor<f32>, tensor<f32>) -> tensor<f32>
    tosa.yield %n, %a : tensor<i32>, tensor<f32>
  }
  return %r#1 : tensor<f32>
}

func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tosa.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
