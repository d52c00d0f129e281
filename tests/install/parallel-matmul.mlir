// A matmul big enough for parallel tiles, with a clamp whose bounds are
// constants the tiles capture: what libkiln.so compiled without its parallel
// loops while MLIR's op traits were unknown inside it (run_samples.sh
// compares its code from the library and from the CLI byte for byte).
func.func @main(%a: tensor<1x256x256xf32>, %b: tensor<1x256x256xf32>) -> tensor<1x256x256xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x256x256xf32>, tensor<1x256x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x256x256xf32>
  %r = tosa.clamp %y {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x256x256xf32>) -> tensor<1x256x256xf32>
  return %r : tensor<1x256x256xf32>
}
