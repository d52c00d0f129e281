// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 l1-bytes=49152 fma-pipes=2})" | FileCheck %s
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16 l1-bytes=32768})" | FileCheck %s --check-prefix=AVX2

// Attention as torch-mlir writes it (the softmax on [1, heads, q, k]):
// one scf.forall over (head, block of 64 query rows) — 4 heads x 2 blocks
// — computes each block's scores against all 128 keys (32 KiB), their
// softmax and x V while they stay in L1: both matmuls on one thread inside
// it, no batch matmul over all heads and no reshape of the scores left.
// (AVX2's 32 KiB L1: blocks of 32 rows.)
// CHECK: kiln.strategy = "attention in blocks of 64 query rows; matmul 64x128x32: registers {{.*}}, one thread; row reduction of 128: vectors of 32 x2; matmul 64x32x128: registers {{.*}}, one thread; transpose 1x128x4x32:
// CHECK-LABEL: func.func @attention
// CHECK-NOT: tensor.expand_shape
// CHECK: scf.forall (%{{.*}}, %{{.*}}) = (0, 0) to (4, 128) step (1, 64)
// CHECK-NOT: scf.forall (
// CHECK: scf.forall.in_parallel
// AVX2: kiln.strategy = "attention in blocks of 32 query rows; matmul 32x128x32: registers {{.*}}, one thread; {{.*}}matmul 32x32x128: registers {{.*}}, one thread;
// AVX2-LABEL: func.func @attention
// AVX2: scf.forall (%{{.*}}, %{{.*}}) = (0, 0) to (4, 128) step (1, 32)
func.func @attention(%q: tensor<4x128x32xf32>, %kt: tensor<4x32x128xf32>, %v: tensor<4x128x32xf32>, %mask: tensor<1x1x128x128xf32>) -> tensor<1x128x4x32xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %scale = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %sh4 = tosa.const_shape {values = dense<[1, 4, 128, 128]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %sh3 = tosa.const_shape {values = dense<[4, 128, 128]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %osh = tosa.const_shape {values = dense<[1, 4, 128, 32]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s = tosa.matmul %q, %kt, %z, %z : (tensor<4x128x32xf32>, tensor<4x32x128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x128x128xf32>
  %s4 = tosa.reshape %s, %sh4 : (tensor<4x128x128xf32>, !tosa.shape<4>) -> tensor<1x4x128x128xf32>
  %sc = tosa.mul %s4, %scale, %shift : (tensor<1x4x128x128xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x4x128x128xf32>
  %m = tosa.add %sc, %mask : (tensor<1x4x128x128xf32>, tensor<1x1x128x128xf32>) -> tensor<1x4x128x128xf32>
  %mx = tosa.reduce_max %m {axis = 3 : i32} : (tensor<1x4x128x128xf32>) -> tensor<1x4x128x1xf32>
  %d = tosa.sub %m, %mx : (tensor<1x4x128x128xf32>, tensor<1x4x128x1xf32>) -> tensor<1x4x128x128xf32>
  %e = tosa.exp %d : (tensor<1x4x128x128xf32>) -> tensor<1x4x128x128xf32>
  %sum = tosa.reduce_sum %e {axis = 3 : i32} : (tensor<1x4x128x128xf32>) -> tensor<1x4x128x1xf32>
  %r = tosa.reciprocal %sum : (tensor<1x4x128x1xf32>) -> tensor<1x4x128x1xf32>
  %p4 = tosa.mul %e, %r, %shift : (tensor<1x4x128x128xf32>, tensor<1x4x128x1xf32>, tensor<1xi8>) -> tensor<1x4x128x128xf32>
  %p = tosa.reshape %p4, %sh3 : (tensor<1x4x128x128xf32>, !tosa.shape<3>) -> tensor<4x128x128xf32>
  %o = tosa.matmul %p, %v, %z, %z : (tensor<4x128x128xf32>, tensor<4x128x32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x128x32xf32>
  %o4 = tosa.reshape %o, %osh : (tensor<4x128x32xf32>, !tosa.shape<4>) -> tensor<1x4x128x32xf32>
  %t = tosa.transpose %o4 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x4x128x32xf32>) -> tensor<1x128x4x32xf32>
  return %t : tensor<1x128x4x32xf32>
}

// -----

// 37 queries over 200 keys, the ONNX route's 3-D form. With 48 KiB of L1
// a head's scores fit in two thirds of it: one block of all 37 rows per
// head. With 32 KiB no block of at least 8 rows both fits and divides 37:
// blocks of 24 rows (a multiple of the 8-row register tile) in one loop,
// the last 13 rows in a second, each with its own copy of the softmax,
// the parts written into the result.
// CHECK: kiln.strategy = "attention in blocks of 37 query rows; matmul 37x200x16: {{.*}}, one thread; {{.*}}matmul 37x16x200: {{.*}}, one thread;
// CHECK-LABEL: func.func @ragged
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK-NOT: scf.forall (
// AVX2: kiln.strategy = "attention in blocks of 24 query rows; attention's last 13 query rows; matmul 24x200x16: {{.*}}, one thread; {{.*}}matmul 13x200x16: {{.*}}, one thread;
// AVX2-LABEL: func.func @ragged
// AVX2: scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<2x24x16xf32>)
// AVX2: scf.forall (%{{.*}}) in (2) shared_outs(%{{.*}}) -> (tensor<2x13x16xf32>)
func.func @ragged(%q: tensor<2x37x16xf32>, %kt: tensor<2x16x200xf32>, %v: tensor<2x200x16xf32>) -> tensor<2x37x16xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %scale = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %s = tosa.matmul %q, %kt, %z, %z : (tensor<2x37x16xf32>, tensor<2x16x200xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x37x200xf32>
  %sc = tosa.mul %s, %scale, %shift : (tensor<2x37x200xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x37x200xf32>
  %mx = tosa.reduce_max %sc {axis = 2 : i32} : (tensor<2x37x200xf32>) -> tensor<2x37x1xf32>
  %d = tosa.sub %sc, %mx : (tensor<2x37x200xf32>, tensor<2x37x1xf32>) -> tensor<2x37x200xf32>
  %e = tosa.exp %d : (tensor<2x37x200xf32>) -> tensor<2x37x200xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x37x200xf32>) -> tensor<2x37x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x37x1xf32>) -> tensor<2x37x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<2x37x200xf32>, tensor<2x37x1xf32>, tensor<1xi8>) -> tensor<2x37x200xf32>
  %o = tosa.matmul %p, %v, %z, %z : (tensor<2x37x200xf32>, tensor<2x200x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x37x16xf32>
  return %o : tensor<2x37x16xf32>
}
