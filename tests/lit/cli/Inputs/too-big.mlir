func.func @main(%x: tensor<1x999999999x999999999xf32>) -> tensor<1x999999999x999999999xf32> {
  %y = tosa.exp %x : (tensor<1x999999999x999999999xf32>) -> tensor<1x999999999x999999999xf32>
  return %y : tensor<1x999999999x999999999xf32>
}
