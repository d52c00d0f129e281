// A hand-written TOSA model (not produced by kiln): conv2d + clamp + max_pool2d
// + reshape + matmul + bias + reduce_max/exp/reduce_sum/reciprocal softmax.
// tests/e2e/ExternalModelTest.cpp recomputes its output with plain C++ from the
// same constants: conv weight[i] = ((7i+3) mod 11 - 5) * 0.1,
// dense weight[i] = ((5i+1) mod 13 - 6) * 0.05.
module attributes {tf.versions = {producer = 1 : i32}} {
  func.func @predict(%image: tensor<1x6x6x2xf32>) -> tensor<1x4xf32> attributes {tf.entry_function = {inputs = "image", outputs = "probs"}} {
    %w = "tosa.const"() <{values = dense<[-0.200, 0.500, 0.100, -0.300, 0.400, 0.000, -0.400, 0.300, -0.100, -0.500, 0.200, -0.200, 0.500, 0.100, -0.300, 0.400, 0.000, -0.400, 0.300, -0.100, -0.500, 0.200, -0.200, 0.500, 0.100, -0.300, 0.400, 0.000, -0.400, 0.300, -0.100, -0.500, 0.200, -0.200, 0.500, 0.100, -0.300, 0.400, 0.000, -0.400, 0.300, -0.100, -0.500, 0.200, -0.200, 0.500, 0.100, -0.300, 0.400, 0.000, -0.400, 0.300, -0.100, -0.500]> : tensor<54xf32>}> : () -> tensor<54xf32>
    %wshape = tosa.const_shape {values = dense<[3, 3, 3, 2]> : tensor<4xindex>} : () -> !tosa.shape<4>
    %w4 = tosa.reshape %w, %wshape : (tensor<54xf32>, !tosa.shape<4>) -> tensor<3x3x3x2xf32>
    %b = "tosa.const"() <{values = dense<[0.100, -0.200, 0.050]> : tensor<3xf32>}> : () -> tensor<3xf32>
    %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
    %conv = tosa.conv2d %image, %w4, %b, %zp, %zp {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x6x6x2xf32>, tensor<3x3x3x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x6x6x3xf32>
    %relu = tosa.clamp %conv {min_val = 0.0 : f32, max_val = 6.0 : f32} : (tensor<1x6x6x3xf32>) -> tensor<1x6x6x3xf32>
    %pool = tosa.max_pool2d %relu {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>} : (tensor<1x6x6x3xf32>) -> tensor<1x3x3x3xf32>
    %fshape = tosa.const_shape {values = dense<[1, 1, 27]> : tensor<3xindex>} : () -> !tosa.shape<3>
    %flat = tosa.reshape %pool, %fshape : (tensor<1x3x3x3xf32>, !tosa.shape<3>) -> tensor<1x1x27xf32>
    %fw = "tosa.const"() <{values = dense<[-0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150, 0.100, -0.300, -0.050, 0.200, -0.200, 0.050, 0.300, -0.100, 0.150, -0.250, 0.000, 0.250, -0.150]> : tensor<108xf32>}> : () -> tensor<108xf32>
    %fwshape = tosa.const_shape {values = dense<[1, 27, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
    %fw3 = tosa.reshape %fw, %fwshape : (tensor<108xf32>, !tosa.shape<3>) -> tensor<1x27x4xf32>
    %mm = tosa.matmul %flat, %fw3, %zp, %zp : (tensor<1x1x27xf32>, tensor<1x27x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x4xf32>
    %oshape = tosa.const_shape {values = dense<[1, 4]> : tensor<2xindex>} : () -> !tosa.shape<2>
    %logits0 = tosa.reshape %mm, %oshape : (tensor<1x1x4xf32>, !tosa.shape<2>) -> tensor<1x4xf32>
    %fb = "tosa.const"() <{values = dense<[[0.010, -0.020, 0.030, 0.000]]> : tensor<1x4xf32>}> : () -> tensor<1x4xf32>
    %logits = tosa.add %logits0, %fb : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    %max = tosa.reduce_max %logits {axis = 1 : i32} : (tensor<1x4xf32>) -> tensor<1x1xf32>
    %centered = tosa.sub %logits, %max : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xf32>
    %e = tosa.exp %centered : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %sum = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<1x4xf32>) -> tensor<1x1xf32>
    %inv = tosa.reciprocal %sum : (tensor<1x1xf32>) -> tensor<1x1xf32>
    %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %probs = tosa.mul %e, %inv, %shift : (tensor<1x4xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<1x4xf32>
    return %probs : tensor<1x4xf32>
  }
}
