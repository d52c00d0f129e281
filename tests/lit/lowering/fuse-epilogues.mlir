// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32},kiln-bufferize)" | FileCheck %s
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16},kiln-bufferize)" | FileCheck %s

// A conv's accumulator init (the bias broadcast) and its elementwise
// epilogue (here ReLU6) are fused into the conv's parallel tiles: each
// tile is initialized, accumulated and finished in the output's own buffer
// while it is in cache, with no temporary and no copy of the whole output.
// CHECK-LABEL: func.func @conv_relu6
// CHECK: scf.forall
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: vector.transfer_write
// CHECK: vector.fma
// CHECK: arith.minimumf
// CHECK: vector.transfer_write
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: return
func.func @conv_relu6(%x: tensor<1x56x56x16xf32>, %w: tensor<64x1x1x16xf32>, %bias: tensor<64xf32>) -> tensor<1x56x56x64xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x56x56x16xf32>, tensor<64x1x1x16xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x64xf32>
  %r = tosa.clamp %y {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  return %r : tensor<1x56x56x64xf32>
}

// A conv whose filter columns for one register tile fit the cache (and is
// HWCF: packed filters reach it as a transpose of an HWCF tensor) computes
// its init and epilogue in the register tiles: the accumulator starts from
// the bias in registers, runs the whole reduction, gets the residual and
// the ReLU and is stored once; nothing is written to the output before.
// CHECK-LABEL: func.func @conv_add_relu_in_registers
// CHECK: scf.forall
// CHECK-NOT: vector.transfer_write
// CHECK: %[[BIAS:.*]] = vector.transfer_read %arg2
// CHECK: %[[ACC:.*]] = scf.for {{.*}} -> (vector<4x{{16|64}}xf32>)
// CHECK: vector.fma
// CHECK: %[[RES:.*]] = vector.transfer_read %arg3
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[RES]]
// CHECK: arith.maximumf
// CHECK: vector.transfer_write
// CHECK-NOT: vector.transfer_write
// CHECK: return
func.func @conv_add_relu_in_registers(%x: tensor<1x28x28x64xf32>, %w: tensor<1x1x64x128xf32>, %bias: tensor<128xf32>, %res: tensor<1x28x28x128xf32>) -> tensor<1x28x28x128xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %wt = tosa.transpose %w {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x64x128xf32>) -> tensor<128x1x1x64xf32>
  %y = tosa.conv2d %x, %wt, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x28x28x64xf32>, tensor<128x1x1x64xf32>, tensor<128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x28x28x128xf32>
  %s = tosa.add %y, %res : (tensor<1x28x28x128xf32>, tensor<1x28x28x128xf32>) -> tensor<1x28x28x128xf32>
  %r = tosa.clamp %s {max_val = 3.40282347E+38 : f32, min_val = 0.0 : f32} : (tensor<1x28x28x128xf32>) -> tensor<1x28x28x128xf32>
  return %r : tensor<1x28x28x128xf32>
}

// Depthwise: TOSA's one-filter-per-channel result (5-D, a unit last
// dimension) loses that dimension, so the bias and activation are
// vectorized over channels (not one element at a time) and fused like a
// conv's. The padded input is the source copied into the interior and
// vector fills of the border only (the top row, the left column). The
// bias and activation run in the register tiles (nothing is written to the
// output before the accumulation).
// CHECK-LABEL: func.func @depthwise_relu6
// CHECK-NOT: vector<1xf32>
// CHECK: %[[PADDED:.*]] = memref.alloc() {{.*}} : memref<1x113x113x32xf32>
// CHECK: memref.copy
// CHECK: memref.subview %[[PADDED]][0, 0, 0, 0] [1, 1, 113, 32]
// CHECK: vector.transfer_write {{.*}} : vector<{{16|32}}xf32>
// CHECK: memref.subview %[[PADDED]][0, 1, 0, 0] [1, 112, 1, 32]
// CHECK: vector.transfer_write {{.*}} : vector<{{16|32}}xf32>
// CHECK: scf.forall
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-NOT: vector.transfer_write
// CHECK: vector.fma
// CHECK: arith.minimumf
// CHECK-NOT: memref.copy
// CHECK-NOT: vector<1xf32>
// CHECK: return
func.func @depthwise_relu6(%x: tensor<1x112x112x32xf32>, %w: tensor<3x3x32x1xf32>, %bias: tensor<32xf32>) -> tensor<1x56x56x32xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.depthwise_conv2d %x, %w, %bias, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 0, 1, 0>, stride = array<i64: 2, 2>} : (tensor<1x112x112x32xf32>, tensor<3x3x32x1xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x32xf32>
  %r = tosa.clamp %y {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  return %r : tensor<1x56x56x32xf32>
}

// A linear layer as torch-mlir exports it (3-D matmul, reshape, bias,
// reshape back, GELU): the matmul becomes 2-D and the bias and GELU one
// epilogue fused into its parallel tiles, computed in the output.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NOT: memref.alloc
// CHECK: memref.collapse_shape %arg3
// CHECK: scf.forall
// CHECK: vector.fma
// CHECK: math.fma
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: return
func.func @linear_gelu(%a: tensor<1x64x128xf32>, %b: tensor<1x128x256xf32>, %bias: tensor<1x256xf32>) -> tensor<1x64x256xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %half = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %s2 = tosa.const_shape {values = dense<[64, 256]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s3 = tosa.const_shape {values = dense<[1, 64, 256]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x64x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x256xf32>
  %f = tosa.reshape %y, %s2 : (tensor<1x64x256xf32>, !tosa.shape<2>) -> tensor<64x256xf32>
  %fb = tosa.add %f, %bias : (tensor<64x256xf32>, tensor<1x256xf32>) -> tensor<64x256xf32>
  %z = tosa.reshape %fb, %s3 : (tensor<64x256xf32>, !tosa.shape<3>) -> tensor<1x64x256xf32>
  %e = tosa.erf %z : (tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  %e1 = tosa.add %e, %one : (tensor<1x64x256xf32>, tensor<1x1x1xf32>) -> tensor<1x64x256xf32>
  %eh = tosa.mul %e1, %half, %sh : (tensor<1x64x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x64x256xf32>
  %r = tosa.mul %z, %eh, %sh : (tensor<1x64x256xf32>, tensor<1x64x256xf32>, tensor<1xi8>) -> tensor<1x64x256xf32>
  return %r : tensor<1x64x256xf32>
}

// The same layer as the ONNX route writes it (MatMul on [1, M, K], then the
// bias and GELU on the 3-D result, no reshape between): the epilogue loses
// its unit batch loop and is fused the same way, not a pass of its own.
// CHECK-LABEL: func.func @linear_gelu_3d
// CHECK-NOT: memref.alloc
// CHECK: scf.forall
// CHECK: vector.fma
// CHECK: math.fma
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-NOT: scf.forall
// CHECK: return
func.func @linear_gelu_3d(%a: tensor<1x64x128xf32>, %b: tensor<1x128x256xf32>, %bias: tensor<1x1x256xf32>) -> tensor<1x64x256xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %half = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x64x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x256xf32>
  %z = tosa.add %y, %bias : (tensor<1x64x256xf32>, tensor<1x1x256xf32>) -> tensor<1x64x256xf32>
  %e = tosa.erf %z : (tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  %e1 = tosa.add %e, %one : (tensor<1x64x256xf32>, tensor<1x1x1xf32>) -> tensor<1x64x256xf32>
  %eh = tosa.mul %e1, %half, %sh : (tensor<1x64x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x64x256xf32>
  %r = tosa.mul %z, %eh, %sh : (tensor<1x64x256xf32>, tensor<1x64x256xf32>, tensor<1xi8>) -> tensor<1x64x256xf32>
  return %r : tensor<1x64x256xf32>
}

// A pointwise linear over an image (ConvNeXt: a 3-D matmul, the bias on its
// 2-D form, then a reshape to 1 x H x W x C and the GELU there): the GELU's
// H and W loops collapse into the matmul's rows and the whole epilogue is
// fused, not a 4-D pass of its own.
// CHECK-LABEL: func.func @pointwise_linear_gelu_4d
// CHECK-NOT: memref.alloc
// CHECK: scf.forall
// CHECK: vector.fma
// CHECK: math.fma
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-NOT: scf.forall
// CHECK: return
func.func @pointwise_linear_gelu_4d(%a: tensor<1x64x128xf32>, %b: tensor<1x128x256xf32>, %bias: tensor<1x256xf32>) -> tensor<1x8x8x256xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %half = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %s2 = tosa.const_shape {values = dense<[64, 256]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s4 = tosa.const_shape {values = dense<[1, 8, 8, 256]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x64x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x256xf32>
  %f = tosa.reshape %y, %s2 : (tensor<1x64x256xf32>, !tosa.shape<2>) -> tensor<64x256xf32>
  %fb = tosa.add %f, %bias : (tensor<64x256xf32>, tensor<1x256xf32>) -> tensor<64x256xf32>
  %z = tosa.reshape %fb, %s4 : (tensor<64x256xf32>, !tosa.shape<4>) -> tensor<1x8x8x256xf32>
  %e = tosa.erf %z : (tensor<1x8x8x256xf32>) -> tensor<1x8x8x256xf32>
  %e1 = tosa.add %e, %one : (tensor<1x8x8x256xf32>, tensor<1x1x1x1xf32>) -> tensor<1x8x8x256xf32>
  %eh = tosa.mul %e1, %half, %sh : (tensor<1x8x8x256xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x8x8x256xf32>
  %r = tosa.mul %z, %eh, %sh : (tensor<1x8x8x256xf32>, tensor<1x8x8x256xf32>, tensor<1xi8>) -> tensor<1x8x8x256xf32>
  return %r : tensor<1x8x8x256xf32>
}

// ConvNeXt's layer scale after its pointwise linear: the 4-D successor
// reads the scale [1, 1, 1, C] at (0, 0, 0, c), a map that is not a
// projected permutation; collapsing its loops gave an invalid generic
// (operand rank 2, map results 4). It stays a pass of its own.
// CHECK-LABEL: func.func @pointwise_linear_layer_scale
// CHECK: scf.forall
// CHECK: return
func.func @pointwise_linear_layer_scale(%a: tensor<1x64x128xf32>, %b: tensor<1x128x256xf32>, %bias: tensor<1x256xf32>, %gamma: tensor<1x1x1x256xf32>, %res: tensor<1x8x8x256xf32>) -> tensor<1x8x8x256xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %s2 = tosa.const_shape {values = dense<[64, 256]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s4 = tosa.const_shape {values = dense<[1, 8, 8, 256]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x64x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x256xf32>
  %f = tosa.reshape %y, %s2 : (tensor<1x64x256xf32>, !tosa.shape<2>) -> tensor<64x256xf32>
  %fb = tosa.add %f, %bias : (tensor<64x256xf32>, tensor<1x256xf32>) -> tensor<64x256xf32>
  %z = tosa.reshape %fb, %s4 : (tensor<64x256xf32>, !tosa.shape<4>) -> tensor<1x8x8x256xf32>
  %g = tosa.mul %gamma, %z, %sh : (tensor<1x1x1x256xf32>, tensor<1x8x8x256xf32>, tensor<1xi8>) -> tensor<1x8x8x256xf32>
  %r = tosa.add %g, %res : (tensor<1x8x8x256xf32>, tensor<1x8x8x256xf32>) -> tensor<1x8x8x256xf32>
  return %r : tensor<1x8x8x256xf32>
}
