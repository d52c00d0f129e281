func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = tosa.bogus %a : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
