// A tiny classifier for kiln's samples and API tests: scores = max(x * W + b, 0)
// with W[k][n] = ((3k + n) mod 7 - 3) / 4 and b = (0.5, -0.25, 0.125); the
// logits (x * W + b) are a second result. Names come from kiln.name.
func.func @main(%x: tensor<1x4x8xf32> {kiln.name = "features"})
    -> (tensor<1x4x3xf32> {kiln.name = "scores"}, tensor<1x4x3xf32> {kiln.name = "logits"}) {
  %w = "tosa.const"() <{values = dense<[[[-0.75,-0.5,-0.25],[0.0,0.25,0.5],[0.75,-0.75,-0.5],[-0.25,0.0,0.25],[0.5,0.75,-0.75],[-0.5,-0.25,0.0],[0.25,0.5,0.75],[-0.75,-0.5,-0.25]]]> : tensor<1x8x3xf32>}> : () -> tensor<1x8x3xf32>
  %b = "tosa.const"() <{values = dense<[[[0.5,-0.25,0.125]]]> : tensor<1x1x3xf32>}> : () -> tensor<1x1x3xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %m = "tosa.matmul"(%x, %w, %zp, %zp) : (tensor<1x4x8xf32>, tensor<1x8x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x3xf32>
  %l = "tosa.add"(%m, %b) : (tensor<1x4x3xf32>, tensor<1x1x3xf32>) -> tensor<1x4x3xf32>
  %s = "tosa.maximum"(%l, %zero) : (tensor<1x4x3xf32>, tensor<1x1x1xf32>) -> tensor<1x4x3xf32>
  return %s, %l : tensor<1x4x3xf32>, tensor<1x4x3xf32>
}
