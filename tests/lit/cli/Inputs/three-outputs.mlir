func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %a = tosa.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %b = tosa.abs %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = tosa.sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a, %b, %c : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
