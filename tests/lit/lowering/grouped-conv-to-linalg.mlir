// RUN: %kiln-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(func.func(kiln-grouped-conv-to-linalg))" | FileCheck %s

// kiln's grouped conv op (what kiln-raise-linalg makes of a grouped conv)
// becomes its zero padding and a linalg.conv_2d_nhwgc_gfhwc accumulating
// into a zero fill, strides and dilations kept.
// CHECK-LABEL: func.func @padded_strided
// CHECK: %[[P:.*]] = tosa.pad %arg0, %{{.*}}, %{{.*}} : (tensor<1x9x9x3x4xf32>, !tosa.shape<10>, tensor<1xf32>) -> tensor<1x11x11x3x4xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x5x5x3x2xf32>)
// CHECK: linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[P]], %arg1 : tensor<1x11x11x3x4xf32>, tensor<3x2x3x3x4xf32>) outs(%[[F]] : tensor<1x5x5x3x2xf32>)
// CHECK-NOT: tosa.custom
func.func @padded_strided(%x: tensor<1x9x9x3x4xf32>, %w: tensor<3x2x3x3x4xf32>) -> tensor<1x5x5x3x2xf32> {
  %y = tosa.custom %x, %w {domain_name = "kiln", implementation_attrs = "", operator_name = "grouped_conv2d",
                           pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>}
       : (tensor<1x9x9x3x4xf32>, tensor<3x2x3x3x4xf32>) -> tensor<1x5x5x3x2xf32>
  return %y : tensor<1x5x5x3x2xf32>
}

// -----

// Integer tensors (a user's op; kiln-raise-linalg makes only f32 ones) pad
// with an integer zero: the pass must not build a float attribute of i32.
// CHECK-LABEL: func.func @padded_i32
// CHECK: "tosa.const"() <{values = dense<0> : tensor<1xi32>}>
// CHECK: tosa.pad %arg0, %{{.*}}, %{{.*}} : (tensor<1x5x5x2x4xi32>, !tosa.shape<10>, tensor<1xi32>) -> tensor<1x7x7x2x4xi32>
// CHECK: linalg.conv_2d_nhwgc_gfhwc
func.func @padded_i32(%x: tensor<1x5x5x2x4xi32>, %w: tensor<2x4x3x3x4xi32>) -> tensor<1x5x5x2x4xi32> {
  %y = tosa.custom %x, %w {domain_name = "kiln", implementation_attrs = "", operator_name = "grouped_conv2d",
                           pad = array<i64: 1, 1, 1, 1>}
       : (tensor<1x5x5x2x4xi32>, tensor<2x4x3x3x4xi32>) -> tensor<1x5x5x2x4xi32>
  return %y : tensor<1x5x5x2x4xi32>
}

// -----

// No pad attribute: no tosa.pad; a dilation kept; other custom ops untouched.
// CHECK-LABEL: func.func @unpadded_dilated
// CHECK-NOT: tosa.pad
// CHECK: linalg.conv_2d_nhwgc_gfhwc {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%arg0, %arg1
// CHECK: tosa.custom {{.*}} operator_name = "gelu"
func.func @unpadded_dilated(%x: tensor<1x9x9x2x8xf32>, %w: tensor<2x8x3x3x8xf32>) -> (tensor<1x5x5x2x8xf32>, tensor<4xf32>) {
  %y = tosa.custom %x, %w {domain_name = "kiln", implementation_attrs = "", operator_name = "grouped_conv2d",
                           dilation = array<i64: 2, 2>}
       : (tensor<1x9x9x2x8xf32>, tensor<2x8x3x3x8xf32>) -> tensor<1x5x5x2x8xf32>
  %c = "tosa.const"() <{values = dense<1.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %g = tosa.custom %c {domain_name = "kiln", implementation_attrs = "", operator_name = "gelu"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y, %g : tensor<1x5x5x2x8xf32>, tensor<4xf32>
}

// -----

// A malformed op is an error naming what is wrong.
func.func @bad_stride(%x: tensor<1x9x9x2x8xf32>, %w: tensor<2x8x3x3x8xf32>) -> tensor<1x7x7x2x8xf32> {
  // expected-error @+1 {{kiln.grouped_conv2d: 'stride' must be an array of 2 i64 values}}
  %y = tosa.custom %x, %w {domain_name = "kiln", implementation_attrs = "", operator_name = "grouped_conv2d",
                           stride = array<i64: 1, 1, 1>}
       : (tensor<1x9x9x2x8xf32>, tensor<2x8x3x3x8xf32>) -> tensor<1x7x7x2x8xf32>
  return %y : tensor<1x7x7x2x8xf32>
}
