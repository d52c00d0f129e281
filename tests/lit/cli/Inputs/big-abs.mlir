func.func @main(%x: tensor<300000000xf32>) -> tensor<300000000xf32> {
  %y = tosa.abs %x : (tensor<300000000xf32>) -> tensor<300000000xf32>
  return %y : tensor<300000000xf32>
}
