module {
  func.func private @helper() -> tensor<f32> {
    %c = "tosa.const"() <{values = dense_resource<blob0> : tensor<f32>}> : () -> tensor<f32>
    return %c : tensor<f32>
  }
  func.func @main(%x: tensor<f32>) -> tensor<f32> {
    %c = func.call @helper() : () -> tensor<f32>
    %y = tosa.add %x, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %y : tensor<f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      blob0: "0x040000000000803F"
    }
  }
#-}
