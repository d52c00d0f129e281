// RUN: %kiln-opt %s --kiln-fold-constants | FileCheck %s

// ReLU6 as torch-mlir writes it, min(max(x, 0), 6), and the other order,
// max(min(x, 6), 0), become one tosa.clamp (kernel plans then fuse it into
// the conv before it). Bounds that cross (lo > hi), a non-uniform bound, and
// an inner op with another reader stay as they are.
// CHECK-LABEL: func.func @bounds_as_clamps
// CHECK: %[[A:.*]] = tosa.clamp %arg0 {max_val = 6.000000e+00 : f32, min_val = 0.000000e+00 : f32}
// CHECK: %[[B:.*]] = tosa.clamp %arg0 {max_val = 6.000000e+00 : f32, min_val = 0.000000e+00 : f32}
// CHECK: tosa.maximum
// CHECK: tosa.minimum
// CHECK: tosa.maximum
// CHECK: tosa.minimum
// CHECK: tosa.maximum
// CHECK: tosa.minimum
// CHECK: return %[[A]], %[[B]]
func.func @bounds_as_clamps(%x: tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) {
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %six = "tosa.const"() <{values = dense<6.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %ramp = "tosa.const"() <{values = dense<[[[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]]]> : tensor<1x1x1x8xf32>}> : () -> tensor<1x1x1x8xf32>
  %m0 = tosa.maximum %x, %zero : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %r0 = tosa.minimum %m0, %six : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %n1 = tosa.minimum %six, %x : (tensor<1x1x1x1xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %r1 = tosa.maximum %zero, %n1 : (tensor<1x1x1x1xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %m2 = tosa.maximum %x, %six : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %r2 = tosa.minimum %m2, %zero : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %m3 = tosa.maximum %x, %zero : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %r3 = tosa.minimum %m3, %ramp : (tensor<1x4x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x4x8xf32>
  %m4 = tosa.maximum %x, %zero : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  %r4 = tosa.minimum %m4, %six : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
  return %r0, %r1, %r2, %r3, %r4, %m4 : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
}

// An exported batch norm after a conv: rsqrt(var + eps) and the transposed
// per-channel constants are evaluated, then (y - mean) * r * gamma + beta
// goes into the conv's filter and bias. Only the conv and the ReLU remain.
// filter' = w * r * gamma = 2 * 0.5 * 3 = 3; bias' = (1 - mean) * 1.5 + beta
// = (1 - 2) * 1.5 + 0.25 = -1.25.
// CHECK-LABEL: func.func @batch_norm
// CHECK-DAG: %[[W:.*]] = "tosa.const"() <{values = dense<3.000000e+00> : tensor<4x1x1x4xf32>}>
// CHECK-DAG: %[[B:.*]] = "tosa.const"() <{values = dense<-1.250000e+00> : tensor<4xf32>}>
// CHECK: %[[C:.*]] = tosa.conv2d %arg0, %[[W]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = tosa.clamp %[[C]]
// CHECK-NEXT: return %[[R]]
func.func @batch_norm(%x: tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32> {
  %w = "tosa.const"() <{values = dense<2.0> : tensor<4x1x1x4xf32>}> : () -> tensor<4x1x1x4xf32>
  %b = "tosa.const"() <{values = dense<1.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %var = "tosa.const"() <{values = dense<4.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %eps = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %mean = "tosa.const"() <{values = dense<2.0> : tensor<1x4x1x1xf32>}> : () -> tensor<1x4x1x1xf32>
  %gamma = "tosa.const"() <{values = dense<3.0> : tensor<1x1x1x4xf32>}> : () -> tensor<1x1x1x4xf32>
  %beta = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1x4xf32>}> : () -> tensor<1x1x1x4xf32>
  %shape = tosa.const_shape {values = dense<[1, 1, 1, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x8x8x4xf32>, tensor<4x1x1x4xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %ve = tosa.add %var, %eps : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  %r = tosa.rsqrt %ve : (tensor<4xf32>) -> tensor<4xf32>
  %meanT = tosa.transpose %mean {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x4x1x1xf32>) -> tensor<1x1x1x4xf32>
  %d = tosa.sub %c, %meanT : (tensor<1x8x8x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x8x8x4xf32>
  %r4 = tosa.reshape %r, %shape : (tensor<4xf32>, !tosa.shape<4>) -> tensor<1x1x1x4xf32>
  %m1 = tosa.mul %d, %r4, %s : (tensor<1x8x8x4xf32>, tensor<1x1x1x4xf32>, tensor<1xi8>) -> tensor<1x8x8x4xf32>
  %m2 = tosa.mul %m1, %gamma, %s : (tensor<1x8x8x4xf32>, tensor<1x1x1x4xf32>, tensor<1xi8>) -> tensor<1x8x8x4xf32>
  %a = tosa.add %beta, %m2 : (tensor<1x1x1x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %y = tosa.clamp %a {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  return %y : tensor<1x8x8x4xf32>
}

// Weights stay weights: a chain on a dense_resource filter gives
// dense_resource results (hoisted later, never inlined into code). k - y
// negates the scale: filter' = -w, bias' = 1 - b. The model's resource
// `wts`, which only this constant reads, is scaled where it is (checked
// at the end: four -1.0); `hwcf`, read in several functions, never is.
// CHECK-LABEL: func.func @resource_weights
// CHECK-DAG: "tosa.const"() <{values = dense_resource<wts> : tensor<2x1x1x2xf32>}>
// CHECK-DAG: "tosa.const"() <{values = dense_resource<kiln_folded{{.*}}> : tensor<2xf32>}>
// CHECK: tosa.conv2d
// CHECK-NOT: tosa.sub
// CHECK: return
func.func @resource_weights(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32> {
  %w = "tosa.const"() <{values = dense_resource<wts> : tensor<2x1x1x2xf32>}> : () -> tensor<2x1x1x2xf32>
  %b = "tosa.const"() <{values = dense<[0.5, -0.5]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %d = tosa.sub %one, %c : (tensor<1x1x1x1xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %d : tensor<1x4x4x2xf32>
}

// Depthwise (HWCM, C=2, M=2): output channel c*M+m scales filter [.., c, m].
// CHECK-LABEL: func.func @depthwise
// CHECK: "tosa.const"() <{values = dense<{{\[\[\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]]]> : tensor<1x1x2x2xf32>}>
// CHECK: tosa.depthwise_conv2d
// CHECK-NOT: tosa.mul
func.func @depthwise(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x4xf32> {
  %w = "tosa.const"() <{values = dense<1.0> : tensor<1x1x2x2xf32>}> : () -> tensor<1x1x2x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<4xf32>}> : () -> tensor<4xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k = "tosa.const"() <{values = dense<[[[[1.0, 2.0, 3.0, 4.0]]]]> : tensor<1x1x1x4xf32>}> : () -> tensor<1x1x1x4xf32>
  %c = tosa.depthwise_conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<1x1x2x2xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x4xf32>
  %m = tosa.mul %c, %k, %s : (tensor<1x4x4x4xf32>, tensor<1x1x1x4xf32>, tensor<1xi8>) -> tensor<1x4x4x4xf32>
  return %m : tensor<1x4x4x4xf32>
}

// Nothing folds when the conv result has a second user, when the constant
// varies over a spatial dimension, or when the filter is not a constant.
// CHECK-LABEL: func.func @not_folded
// CHECK: tosa.add
// CHECK: tosa.mul
// CHECK: tosa.add
func.func @not_folded(%x: tensor<1x4x4x2xf32>, %wArg: tensor<2x1x1x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %w = "tosa.const"() <{values = dense<1.0> : tensor<2x1x1x2xf32>}> : () -> tensor<2x1x1x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<2xf32>}> : () -> tensor<2xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k = "tosa.const"() <{values = dense<2.0> : tensor<1x1x1x2xf32>}> : () -> tensor<1x1x1x2xf32>
  %row = "tosa.const"() <{values = dense<[[[[1.0], [2.0], [3.0], [4.0]]]]> : tensor<1x1x4x1xf32>}> : () -> tensor<1x1x4x1xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %a = tosa.add %c, %k : (tensor<1x4x4x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x4x4x2xf32>
  %c2 = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %m = tosa.mul %c2, %row, %s : (tensor<1x4x4x2xf32>, tensor<1x1x4x1xf32>, tensor<1xi8>) -> tensor<1x4x4x2xf32>
  %c3 = tosa.conv2d %x, %wArg, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %a3 = tosa.add %c3, %k : (tensor<1x4x4x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x4x4x2xf32>
  %out = tosa.add %a, %c : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %out, %m, %a3 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// A filter transposed at load (a blob of its own that only the conv reads)
// is scaled where it is: the conv reads the transpose's constant.
// Exporters' HWCF [1,2,3,4] is FHWC [1,3,2,4]; times [2, 10] per output
// channel: [2,6,20,40]. Where the transposed filter feeds a second conv,
// the scaled filter is a copy and the other conv keeps [1,3,2,4]. A
// reshaped weight reads the same blob (no copy).
// CHECK-LABEL: func.func @transposed_filter_in_place
// CHECK: %[[W:.*]] = "tosa.const"() <{values = dense_resource<[[T:kiln_folded[_0-9]*]]> : tensor<2x1x1x2xf32>}>
// CHECK-NOT: tosa.transpose
// CHECK: tosa.conv2d %arg0, %[[W]]
// CHECK-NOT: tosa.mul
// CHECK-LABEL: func.func @transposed_filter_shared
// CHECK-DAG: %[[S:.*]] = "tosa.const"() <{values = dense_resource<[[SHARED:kiln_folded[_0-9]*]]> : tensor<2x1x1x2xf32>}>
// CHECK-DAG: %[[C:.*]] = "tosa.const"() <{values = dense_resource<[[SCALED:kiln_folded[_0-9]*]]> : tensor<2x1x1x2xf32>}>
// CHECK-DAG: tosa.conv2d %arg0, %[[C]]
// CHECK-DAG: tosa.conv2d %arg0, %[[S]]
// CHECK-LABEL: func.func @reshaped_weight
// CHECK: "tosa.const"() <{values = dense_resource<hwcf> : tensor<2x2xf32>}>
// CHECK-NOT: tosa.reshape
// A transpose that moves only size-1 dimensions (a 1x1 conv's filter to
// FHWC) is a reshape too: the same blob.
// CHECK-LABEL: func.func @unit_dims_transpose
// CHECK: "tosa.const"() <{values = dense_resource<hwcf> : tensor<1x2x2x1xf32>}>
// CHECK-NOT: tosa.transpose
func.func @transposed_filter_in_place(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32> {
  %hwcf = "tosa.const"() <{values = dense_resource<hwcf> : tensor<1x1x2x2xf32>}> : () -> tensor<1x1x2x2xf32>
  %w = tosa.transpose %hwcf {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x2x2xf32>) -> tensor<2x1x1x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<2xf32>}> : () -> tensor<2xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k = "tosa.const"() <{values = dense<[[[[2.0, 10.0]]]]> : tensor<1x1x1x2xf32>}> : () -> tensor<1x1x1x2xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %m = tosa.mul %c, %k, %s : (tensor<1x4x4x2xf32>, tensor<1x1x1x2xf32>, tensor<1xi8>) -> tensor<1x4x4x2xf32>
  return %m : tensor<1x4x4x2xf32>
}
func.func @transposed_filter_shared(%x: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %hwcf = "tosa.const"() <{values = dense_resource<hwcf> : tensor<1x1x2x2xf32>}> : () -> tensor<1x1x2x2xf32>
  %w = tosa.transpose %hwcf {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x2x2xf32>) -> tensor<2x1x1x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<2xf32>}> : () -> tensor<2xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %k = "tosa.const"() <{values = dense<[[[[2.0, 10.0]]]]> : tensor<1x1x1x2xf32>}> : () -> tensor<1x1x1x2xf32>
  %c = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  %m = tosa.mul %c, %k, %s : (tensor<1x4x4x2xf32>, tensor<1x1x1x2xf32>, tensor<1xi8>) -> tensor<1x4x4x2xf32>
  %c2 = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x2xf32>
  return %m, %c2 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}
func.func @reshaped_weight() -> tensor<2x2xf32> {
  %hwcf = "tosa.const"() <{values = dense_resource<hwcf> : tensor<1x1x2x2xf32>}> : () -> tensor<1x1x2x2xf32>
  %shape = tosa.const_shape {values = dense<[2, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %r = tosa.reshape %hwcf, %shape : (tensor<1x1x2x2xf32>, !tosa.shape<2>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
func.func @unit_dims_transpose() -> tensor<1x2x2x1xf32> {
  %hwcf = "tosa.const"() <{values = dense_resource<hwcf> : tensor<1x1x2x2xf32>}> : () -> tensor<1x1x2x2xf32>
  %t = tosa.transpose %hwcf {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x1x2x2xf32>) -> tensor<1x2x2x1xf32>
  return %t : tensor<1x2x2x1xf32>
}

{-#
  dialect_resources: {
    builtin: {
      wts: "0x040000000000803F0000803F0000803F0000803F",
      hwcf: "0x040000000000803F000000400000404000008040"
    }
  }
#-}

// A broadcast that would turn small constants into a large one is not
// folded (two 256-element constants would become a 64K-element weight).
// CHECK-LABEL: func.func @no_growth
// CHECK: tosa.add
// CHECK-SAME: (tensor<256x1xf32>, tensor<1x256xf32>) -> tensor<256x256xf32>
func.func @no_growth() -> tensor<256x256xf32> {
  %a = "tosa.const"() <{values = dense<1.0> : tensor<256x1xf32>}> : () -> tensor<256x1xf32>
  %b = "tosa.const"() <{values = dense<2.0> : tensor<1x256xf32>}> : () -> tensor<1x256xf32>
  %c = tosa.add %a, %b : (tensor<256x1xf32>, tensor<1x256xf32>) -> tensor<256x256xf32>
  return %c : tensor<256x256xf32>
}

// tosa.pow by a uniform constant exponent: multiplies (GELU's x^3, RMSNorm's
// x^2), reciprocal, rsqrt. Other exponents, and a pow whose exponent
// broadcasts x to a larger shape, stay.
// CHECK-LABEL: func.func @pow_by_constants
// CHECK-NOT: tosa.pow
// CHECK: %[[SQ:.*]] = tosa.mul %arg0, %arg0
// CHECK: %[[CUBE:.*]] = tosa.mul %[[SQ]], %arg0
// CHECK: %[[SQ2:.*]] = tosa.mul %arg0, %arg0
// CHECK: %[[R:.*]] = tosa.rsqrt %arg0
// CHECK: %[[INV:.*]] = tosa.reciprocal %arg0
// CHECK: %[[P:.*]] = tosa.pow %arg0, %{{.*}} : (tensor<2x4xf32>, tensor<1x1xf32>)
// CHECK: return %[[CUBE]], %[[SQ2]], %[[R]], %[[INV]], %[[P]], %arg0
func.func @pow_by_constants(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %three = "tosa.const"() <{values = dense<3.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %two = "tosa.const"() <{values = dense<2.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %mhalf = "tosa.const"() <{values = dense<-0.5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %mone = "tosa.const"() <{values = dense<-1.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %other = "tosa.const"() <{values = dense<2.5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %0 = tosa.pow %x, %three : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  %1 = tosa.pow %x, %two : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  %2 = tosa.pow %x, %mhalf : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  %3 = tosa.pow %x, %mone : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  %4 = tosa.pow %x, %other : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  %5 = tosa.pow %x, %one : (tensor<2x4xf32>, tensor<1x1xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @pow_broadcasting_x
// CHECK: tosa.pow
func.func @pow_broadcasting_x(%x: tensor<1x4xf32>) -> tensor<3x4xf32> {
  %two = "tosa.const"() <{values = dense<2.0> : tensor<3x1xf32>}> : () -> tensor<3x1xf32>
  %0 = tosa.pow %x, %two : (tensor<1x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// torch's safe softmax asks whether a row is all -inf: reduce_all over the
// f64 compare becomes the softmax's own row maximum compared with -inf (no
// boolean tensor of every score, no second pass over them).
// CHECK-LABEL: func.func @safe_softmax_row_check
// CHECK: %[[MAX:.*]] = tosa.reduce_max %arg0 {axis = 1 : i32}
// CHECK-NOT: tosa.reduce_all
// CHECK-NOT: tosa.cast
// CHECK: %[[NEG:.*]] = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1xf32>}>
// CHECK: %[[ALL:.*]] = tosa.equal %[[MAX]], %[[NEG]] : (tensor<4x1xf32>, tensor<1x1xf32>) -> tensor<4x1xi1>
// CHECK: tosa.select %[[ALL]]
func.func @safe_softmax_row_check(%x: tensor<4x9xf32>) -> tensor<4x9xf32> {
  %ninf = "tosa.const"() <{values = dense<0xFFF0000000000000> : tensor<1x1xf64>}> : () -> tensor<1x1xf64>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<4x9xf32>}> : () -> tensor<4x9xf32>
  %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x9xf32>) -> tensor<4x1xf32>
  %s = tosa.sub %x, %m : (tensor<4x9xf32>, tensor<4x1xf32>) -> tensor<4x9xf32>
  %e = tosa.exp %s : (tensor<4x9xf32>) -> tensor<4x9xf32>
  %c = tosa.cast %x : (tensor<4x9xf32>) -> tensor<4x9xf64>
  %q = tosa.equal %c, %ninf : (tensor<4x9xf64>, tensor<1x1xf64>) -> tensor<4x9xi1>
  %all = tosa.reduce_all %q {axis = 1 : i32} : (tensor<4x9xi1>) -> tensor<4x1xi1>
  %r = tosa.select %all, %zero, %e : (tensor<4x1xi1>, tensor<4x9xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  return %r : tensor<4x9xf32>
}

// Other checks stay: a compare with something else than -inf, an any.
// CHECK-LABEL: func.func @other_row_checks
// CHECK: tosa.reduce_all
// CHECK: tosa.reduce_any
func.func @other_row_checks(%x: tensor<4x9xf32>) -> (tensor<4x1xi1>, tensor<4x1xi1>) {
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %ninf = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %q = tosa.equal %x, %zero : (tensor<4x9xf32>, tensor<1x1xf32>) -> tensor<4x9xi1>
  %all = tosa.reduce_all %q {axis = 1 : i32} : (tensor<4x9xi1>) -> tensor<4x1xi1>
  %p = tosa.equal %x, %ninf : (tensor<4x9xf32>, tensor<1x1xf32>) -> tensor<4x9xi1>
  %any = tosa.reduce_any %p {axis = 1 : i32} : (tensor<4x9xi1>) -> tensor<4x1xi1>
  return %all, %any : tensor<4x1xi1>, tensor<4x1xi1>
}

// The blobs of @transposed_filter_in_place and @transposed_filter_shared
// (printed after every function).
// CHECK-DAG: [[T]]: "0x04000000000000400000C0400000A04100002042"
// CHECK-DAG: [[SHARED]]: "0x040000000000803F000040400000004000008040"
// CHECK-DAG: [[SCALED]]: "0x04000000000000400000C0400000A04100002042"
// CHECK-DAG: wts: "0x04000000000080BF000080BF000080BF000080BF"
// CHECK-DAG: hwcf: "0x040000000000803F000000400000404000008040"
