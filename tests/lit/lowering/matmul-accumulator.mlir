// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 fma-pipes=2},kiln-bufferize)" | FileCheck %s
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16},kiln-bufferize)" | FileCheck %s --check-prefix=AVX2

// A matmul in parallel blocks over several k blocks, with a fill and an
// epilogue, sums each block's products in a contiguous buffer of its own
// (the block's rows 64 floats apart, not the output's 768), and the
// epilogue reads that buffer and writes the output. The rows past the last
// 6-row register tile (128 = 21 x 6 + 2) are the row loop's peeled
// remainder in the same k block: no second accumulator, no copies.
// CHECK-LABEL: func.func @ffn(
// CHECK: scf.forall (%{{.*}}) in (12) {
// CHECK: %[[ACC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<128x64xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: scf.for %{{.*}} = %c0 to %c3072 step %c128 {
// CHECK: scf.for %{{.*}} = %c0 to %c126 step %c6 {
// CHECK: vector<6x64xf32>
// CHECK: vector<2x64xf32>
// CHECK: memref.dealloc %[[ACC]]
// CHECK-NOT: memref.copy

// One k block (K = 128): the epilogue finishes the output in place.
// CHECK-LABEL: func.func @one_k_block(
// CHECK-NOT: memref.alloc
// CHECK: return

// On AVX2, 4x16 tiles that divide the rows and k blocks of 256: the same one
// accumulator per block.
// AVX2-LABEL: func.func @ffn(
// AVX2: memref.alloc() {alignment = 64 : i64} : memref<128x96xf32>
// AVX2-NOT: memref.alloc
// AVX2-NOT: memref.copy
// AVX2-LABEL: func.func @one_k_block(

func.func @ffn(%x: tensor<1x128x3072xf32>, %w: tensor<1x3072x768xf32>, %b: tensor<1x1x768xf32>) -> tensor<1x128x768xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %x, %w, %z, %z : (tensor<1x128x3072xf32>, tensor<1x3072x768xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x768xf32>
  %a = tosa.add %y, %b : (tensor<1x128x768xf32>, tensor<1x1x768xf32>) -> tensor<1x128x768xf32>
  return %a : tensor<1x128x768xf32>
}

func.func @one_k_block(%x: tensor<1x128x128xf32>, %w: tensor<1x128x768xf32>, %b: tensor<1x1x768xf32>) -> tensor<1x128x768xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %x, %w, %z, %z : (tensor<1x128x128xf32>, tensor<1x128x768xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x768xf32>
  %a = tosa.add %y, %b : (tensor<1x128x768xf32>, tensor<1x1x768xf32>) -> tensor<1x128x768xf32>
  return %a : tensor<1x128x768xf32>
}
