// RUN: %kiln-opt %s --kiln-hoist-constants="conv-filters-hwcf=true" | FileCheck %s
// RUN: %kiln-opt %s --kiln-hoist-constants | FileCheck %s --check-prefix=PLAIN
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-hoist-constants{conv-filters-hwcf=true},kiln-specialize-shapes{function=main shapes=1x4x4x2xf32,2x2x2x3xf32},kiln-tosa-to-linalg,kiln-cpu-tile-vectorize)" | FileCheck %s --check-prefix=STRATEGY

// A constant read only as a conv filter is stored HWCF, transposed once at
// hoisting into a blob named after the source constant, and read back through a
// transpose to FHWC; after the conv strategy's own transpose to HWCF the
// two cancel: no transpose runs per call. Filter element (f, h, w, c) =
// 1000f + 100h + 10w + c, so HWCF element 1 is (f=1, 0, 0, 0) = 1000.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x4x4x2xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<2x2x2x3xf32> {kiln.weight = dense_resource<kiln_w_[[HASH:[0-9a-f]+]]_p1230_2_2_2_3> : tensor<2x2x2x3xf32>}
// CHECK: %[[T:.*]] = tosa.transpose %[[W]] {perms = array<i32: 3, 0, 1, 2>} : (tensor<2x2x2x3xf32>) -> tensor<3x2x2x2xf32>
// CHECK: tosa.conv2d %[[X]], %[[T]]
// The second filter also feeds an add: it stays FHWC.
// CHECK-LABEL: func.func @shared(
// CHECK-SAME: tensor<3x2x2x2xf32> {kiln.weight = dense<
// A weight behind transposes (exporters write OIHW filters and transpose
// them) is transposed once, here, in one composed permutation; with the
// conv's HWCF: OIHW -> HWIO = permutation 2,3,1,0 of the source.
// CHECK-LABEL: func.func @oihw(
// CHECK-SAME: tensor<2x2x2x3xf32> {kiln.weight = dense_resource<kiln_w_{{[0-9a-f]+}}_p2310_2_2_2_3>
// CHECK-NOT: tosa.const
// CHECK: tosa.transpose %{{.*}} {perms = array<i32: 3, 0, 1, 2>}
// CHECK-NOT: tosa.transpose
// CHECK: tosa.conv2d
// A transposed weight read by other ops is stored transposed, as it is read.
// CHECK-LABEL: func.func @transposed_weight(
// CHECK-SAME: %[[Y:[^:]*]]: tensor<8x2xf32>, %[[T:[^:]*]]: tensor<8x2xf32> {kiln.weight = dense_resource<kiln_w_{{[0-9a-f]+}}_p10_8_2>
// CHECK-NEXT: tosa.add %[[T]], %[[Y]]
// CHECK: {-#
// CHECK: kiln_w_[[HASH]]_p1230_2_2_2_3: "0x080000000000000000007A440000FA44
// PLAIN: %{{.*}}: tensor<3x2x2x2xf32> {kiln.weight = dense<
// PLAIN-NOT: tosa.transpose
// Three channels are too few for the register tile: the conv stays on loops,
// but reads the packed HWCF filter directly all the same.
// STRATEGY-LABEL: func.func @kiln_fn
// STRATEGY-NOT: linalg.transpose
// STRATEGY: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %arg1 :
func.func @main(%x: tensor<1x4x4x2xf32>) -> tensor<1x3x3x3xf32> {
  %w = "tosa.const"() <{values = dense<[[[[0.0, 1.0], [10.0, 11.0]], [[100.0, 101.0], [110.0, 111.0]]],
                                        [[[1000.0, 1001.0], [1010.0, 1011.0]], [[1100.0, 1101.0], [1110.0, 1111.0]]],
                                        [[[2000.0, 2001.0], [2010.0, 2011.0]], [[2100.0, 2101.0], [2110.0, 2111.0]]]]> : tensor<3x2x2x2xf32>}> : () -> tensor<3x2x2x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<3xf32>}> : () -> tensor<3xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x2x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x3x3xf32>
  return %r : tensor<1x3x3x3xf32>
}

func.func @shared(%x: tensor<1x4x4x2xf32>, %y: tensor<3x2x2x2xf32>) -> (tensor<1x3x3x3xf32>, tensor<3x2x2x2xf32>) {
  %w = "tosa.const"() <{values = dense<[[[[5.0, 1.0], [10.0, 11.0]], [[100.0, 101.0], [110.0, 111.0]]],
                                        [[[1000.0, 1001.0], [1010.0, 1011.0]], [[1100.0, 1101.0], [1110.0, 1111.0]]],
                                        [[[2000.0, 2001.0], [2010.0, 2011.0]], [[2100.0, 2101.0], [2110.0, 2111.0]]]]> : tensor<3x2x2x2xf32>}> : () -> tensor<3x2x2x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<3xf32>}> : () -> tensor<3xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x2x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x3x3xf32>
  %s = tosa.add %w, %y : (tensor<3x2x2x2xf32>, tensor<3x2x2x2xf32>) -> tensor<3x2x2x2xf32>
  return %r, %s : tensor<1x3x3x3xf32>, tensor<3x2x2x2xf32>
}

func.func @oihw(%x: tensor<1x4x4x2xf32>) -> tensor<1x3x3x3xf32> {
  %w = "tosa.const"() <{values = dense<[[[[0.0, 1.0], [10.0, 11.0]], [[100.0, 101.0], [110.0, 111.0]]],
                                        [[[1000.0, 1001.0], [1010.0, 1011.0]], [[1100.0, 1101.0], [1110.0, 1111.0]]],
                                        [[[2000.0, 2001.0], [2010.0, 2011.0]], [[2100.0, 2101.0], [2110.0, 2111.0]]]]> : tensor<3x2x2x2xf32>}> : () -> tensor<3x2x2x2xf32>
  %t = tosa.transpose %w {perms = array<i32: 0, 2, 3, 1>} : (tensor<3x2x2x2xf32>) -> tensor<3x2x2x2xf32>
  %b = "tosa.const"() <{values = dense<0.0> : tensor<3xf32>}> : () -> tensor<3xf32>
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %t, %b, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x2x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x3x3xf32>
  return %r : tensor<1x3x3x3xf32>
}

func.func @transposed_weight(%y: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]]> : tensor<2x8xf32>}> : () -> tensor<2x8xf32>
  %t = tosa.transpose %w {perms = array<i32: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %s = tosa.add %t, %y : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  return %s : tensor<8x2xf32>
}
