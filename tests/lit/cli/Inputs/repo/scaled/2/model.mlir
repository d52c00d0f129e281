// A model repository for kiln serve's tests (serve-prewarm.test).
func.func @main(%x: tensor<?x4xf32> {kiln.name = "x"}) -> tensor<?x4xf32> {
  %w = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>}> : () -> tensor<1x4xf32>
  %a = tosa.add %x, %w : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x4xf32>
  return %a : tensor<?x4xf32>
}
