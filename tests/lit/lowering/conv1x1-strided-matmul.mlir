// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 fma-pipes=2})" | FileCheck %s --check-prefix=AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 fma-pipes=2},kiln-bufferize)" | FileCheck %s --check-prefix=BUF
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefix=AVX2

// A strided 1x1 conv (ResNet's downsampling projection at batch 8) is a
// matmul of the pixels it reads: those are copied into a tensor of their
// own first (a strided view's rows cannot be collapsed into the matmul's
// rows), in parallel vector tiles, and the matmul takes its register
// tiles and k blocks over all 8 x 14 x 14 pixels (as a conv, tiles of
// 2 x 32 over each 14-wide row). Where the conv's tile does as well as
// the matmul's (AVX2 here), it stays a conv that reads the pixels with
// their stride. (The filter is an argument here: its transpose runs on
// loops; a model's constant filter is stored in the form the matmul reads.)
// AVX512: kiln.strategy = "matmul 1568x512x256: registers 6x64 (+2 rows), k blocks of 128, {{[0-9]+}} parallel blocks of {{[0-9]+}}x{{[0-9]+}} + init; {{.*}}copy in parallel"
// AVX512-NOT: linalg.conv_2d
// AVX2: kiln.strategy = "conv 1x1 256->512 on 14x14 x8:
// BUF-LABEL: func.func @downsample
// BUF: memref.subview %arg0[0, 0, 0, 0] [8, 14, 14, 256] [1, 2, 2, 1]
// BUF: %[[PIXELS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x14x14x256xf32>
// BUF: memref.collapse_shape %[[PIXELS]] {{\[}}[0, 1, 2], [3]] : memref<8x14x14x256xf32> into memref<1568x256xf32>
// BUF-NOT: linalg.conv_2d
// BUF: vector.fma
func.func @downsample(%x: tensor<8x27x27x256xf32>, %w: tensor<512x1x1x256xf32>, %bias: tensor<512xf32>) -> tensor<8x14x14x512xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : (tensor<8x27x27x256xf32>, tensor<512x1x1x256xf32>, tensor<512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x14x14x512xf32>
  return %r : tensor<8x14x14x512xf32>
}
