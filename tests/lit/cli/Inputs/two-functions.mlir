// Two public functions, neither @main: kiln run needs --function.
func.func @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tosa.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tosa.sub %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
