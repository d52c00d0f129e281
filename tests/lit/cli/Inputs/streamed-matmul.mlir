func.func @main(%a: tensor<1x7x2048xf32>, %b: tensor<1x2048x512xf32>) -> tensor<1x7x512xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x7x2048xf32>, tensor<1x2048x512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x7x512xf32>
  return %y : tensor<1x7x512xf32>
}
