// RUN: %kiln-opt %s --kiln-split-conv-padding | FileCheck %s

// Window ops (convs, depthwise convs, max pooling) lose their padding to a
// tosa.pad of their input.

// A padded depthwise conv becomes tosa.pad of its input (top, bottom, left,
// right -> NHWC pairs) and the conv without padding.
// CHECK-LABEL: func.func @padded
// CHECK: %[[S:.*]] = tosa.const_shape {values = dense<[0, 0, 1, 0, 1, 2, 0, 0]> : tensor<8xindex>}
// CHECK: %[[P:.*]] = tosa.pad %arg0, %[[S]], %{{.*}} : (tensor<1x8x8x4xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x9x11x4xf32>
// CHECK: tosa.depthwise_conv2d %[[P]], {{.*}}pad = array<i64: 0, 0, 0, 0>{{.*}} : (tensor<1x9x11x4xf32>
func.func @padded(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x1xf32>, %b: tensor<4xf32>) -> tensor<1x4x5x4xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.depthwise_conv2d %x, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 0, 1, 2>, stride = array<i64: 2, 2>} : (tensor<1x8x8x4xf32>, tensor<3x3x4x1xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x5x4xf32>
  return %y : tensor<1x4x5x4xf32>
}

// A conv pads with its zero point (0); max pooling with -inf, which never
// wins a maximum.
// CHECK-LABEL: func.func @conv_and_pool
// CHECK-DAG: %[[NEG:.*]] = "tosa.const"() <{values = dense<0xFF800000> : tensor<1xf32>}>
// CHECK: %[[C:.*]] = tosa.pad %arg0, %{{.*}}, %{{.*}} : (tensor<1x8x8x4xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x10x10x4xf32>
// CHECK: tosa.conv2d %[[C]], {{.*}}pad = array<i64: 0, 0, 0, 0>
// CHECK: %[[M:.*]] = tosa.pad %{{.*}}, %{{.*}}, %[[NEG]] : (tensor<1x8x8x8xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x9x9x8xf32>
// CHECK: tosa.max_pool2d %[[M]] {kernel = array<i64: 3, 3>, kiln.unsplit_pad = array<i64: 1, 0, 1, 0>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}
func.func @conv_and_pool(%x: tensor<1x8x8x4xf32>, %w: tensor<8x3x3x4xf32>, %b: tensor<8xf32>) -> tensor<1x4x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<8x3x3x4xf32>, tensor<8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x8xf32>
  %m = tosa.max_pool2d %c {kernel = array<i64: 3, 3>, pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>} : (tensor<1x8x8x8xf32>) -> tensor<1x4x4x8xf32>
  return %m : tensor<1x4x4x8xf32>
}

// Unpadded convs, and integer ones (the pad value would be the zero point),
// stay as they are.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT: tosa.pad
// CHECK: tosa.depthwise_conv2d
// CHECK-NOT: tosa.pad
// CHECK: tosa.depthwise_conv2d
func.func @unchanged(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x1xf32>, %b: tensor<4xf32>,
                     %xi: tensor<1x8x8x4xi8>, %wi: tensor<3x3x4x1xi8>, %bi: tensor<4xi32>) -> (tensor<1x6x6x4xf32>, tensor<1x8x8x4xi32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.depthwise_conv2d %x, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<3x3x4x1xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x6x6x4xf32>
  %izp = "tosa.const"() <{values = dense<3> : tensor<1xi8>}> : () -> tensor<1xi8>
  %z = tosa.depthwise_conv2d %xi, %wi, %bi, %izp, %izp {acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x4xi8>, tensor<3x3x4x1xi8>, tensor<4xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x8x8x4xi32>
  return %y, %z : tensor<1x6x6x4xf32>, tensor<1x8x8x4xi32>
}
