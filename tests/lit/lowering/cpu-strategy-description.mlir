// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefix=AVX512
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefix=AVX2
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=0})" | FileCheck %s --check-prefix=OFF
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 fma-pipes=2})" | FileCheck %s --check-prefix=TWO

// kiln-cpu-strategy says what it made of each kernel (module attribute
// kiln.strategy; `kiln profile` prints it under each kernel and the report
// shows it beside %peak): register tiles by vector width, blocks, fused
// epilogues, and the ops no strategy took, which run as plain loops.

// A matmul with its bias and ReLU in the parallel tiles (TOSA's 3-D
// matmul flattened for the bias, as exporters write nn.Linear): AVX-512
// takes 4 rows of 4 zmm, AVX2 4 rows of 2 ymm.
// AVX512: module attributes {kiln.strategy = "matmul 196x256x128: registers 4x64, 28 parallel blocks of 28x64 + fill + epilogue(add, minimum, maximum)"}
// AVX2: module attributes {kiln.strategy = "matmul 196x256x128: registers 4x16, {{[0-9]+}} parallel blocks of {{[0-9]+}}x{{[0-9]+}} + fill + epilogue(add, minimum, maximum)"}
// Without vectors: no strategy, nothing said.
// OFF-NOT: kiln.strategy
func.func @matmul_bias_relu(%a: tensor<1x196x128xf32>, %b: tensor<1x128x256xf32>, %bias: tensor<1x256xf32>) -> tensor<196x256xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %a, %b, %z, %z : (tensor<1x196x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x196x256xf32>
  %shape = tosa.const_shape {values = dense<[196, 256]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %f = tosa.reshape %r, %shape : (tensor<1x196x256xf32>, !tosa.shape<2>) -> tensor<196x256xf32>
  %s = tosa.add %f, %bias : (tensor<196x256xf32>, tensor<1x256xf32>) -> tensor<196x256xf32>
  %c = tosa.clamp %s {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<196x256xf32>) -> tensor<196x256xf32>
  return %c : tensor<196x256xf32>
}

// -----

// A matmul whose result is split into heads: the split ([0, 2, 1, 3],
// rows stay rows) copies rows in vectors; the transpose for K^T, which
// moves the innermost dimension, transposes blocks of a vector's width.
// AVX512: kiln.strategy = "matmul 128x256x64: registers 4x64, 8 parallel blocks of 64x64; transpose 1x4x128x64: rows in vectors; transpose 1x4x64x128: blocks of 16x16 transposed in registers; fill"
// AVX2: kiln.strategy = "matmul 128x256x64: registers 4x16, 8 parallel blocks of 128x32; transpose 1x4x128x64: rows in vectors; transpose 1x4x64x128: blocks of 8x8 transposed in registers; fill"
func.func @matmul_to_heads(%a: tensor<1x128x64xf32>, %b: tensor<1x64x256xf32>) -> (tensor<1x4x128x64xf32>, tensor<1x4x64x128xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %a, %b, %z, %z : (tensor<1x128x64xf32>, tensor<1x64x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x256xf32>
  %shape = tosa.const_shape {values = dense<[1, 128, 4, 64]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %h = tosa.reshape %r, %shape : (tensor<1x128x256xf32>, !tosa.shape<4>) -> tensor<1x128x4x64xf32>
  %t = tosa.transpose %h {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x128x4x64xf32>) -> tensor<1x4x128x64xf32>
  %k = tosa.transpose %h {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x128x4x64xf32>) -> tensor<1x4x64x128xf32>
  return %t, %k : tensor<1x4x128x64xf32>, tensor<1x4x64x128xf32>
}

// -----

// K^T over a number of keys that no block of 8 divides (ViT's 197, a
// prime): blocks of a whole vector and one of the last 5 keys, both
// transposed in registers (before: the whole transpose on scalar loops).
// AVX512: kiln.strategy = "transpose 1x12x64x197: blocks of 16x16 transposed in registers (+ 16x5 for the last 5), in parallel"
// AVX2: kiln.strategy = "transpose 1x12x64x197: blocks of 8x8 transposed in registers (+ 8x5 for the last 5), in parallel"
func.func @odd_keys_transposed(%h: tensor<1x12x197x64xf32>) -> tensor<1x12x64x197xf32> {
  %k = tosa.transpose %h {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x12x197x64xf32>) -> tensor<1x12x64x197xf32>
  return %k : tensor<1x12x64x197xf32>
}

// -----

// A 3x3 conv with its bias and ReLU in the register tiles; a depthwise
// conv; a softmax's row reductions and elementwise passes (those last,
// counted).
// AVX512: kiln.strategy = "conv 3x3 32->64 on 28x28: registers 4x64, 8 channels at a time, 14 parallel blocks + init + epilogue(minimum, maximum); depthwise conv 3x3 on 28x28x64: registers 4x64, 14 parallel blocks + fill + epilogue(add) in registers; fill x8"
// AVX2: kiln.strategy = "conv 3x3 32->64 on 28x28: registers 4x16, 14 parallel blocks + init + epilogue(minimum, maximum); depthwise conv 3x3 on 28x28x64: registers 4x16, 14 parallel blocks + fill + epilogue(add) in registers; fill x8"
func.func @convs(%x: tensor<1x28x28x32xf32>, %w: tensor<64x3x3x32xf32>, %bias: tensor<64xf32>, %dw: tensor<3x3x64x1xf32>) -> tensor<1x28x28x64xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x28x28x32xf32>, tensor<64x3x3x32xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x28x28x64xf32>
  %c = tosa.clamp %r {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x28x28x64xf32>) -> tensor<1x28x28x64xf32>
  %d = tosa.depthwise_conv2d %c, %dw, %bias, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x28x28x64xf32>, tensor<3x3x64x1xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x28x28x64xf32>
  return %d : tensor<1x28x28x64xf32>
}

// -----

// A batch adds parallel blocks, it does not make them bigger: each of the
// 4 images in 8 blocks of 7 rows as at batch 1 (whole images per block
// kept 3.2 MB input slabs streaming from memory once per filter tile).
// The filter is the transpose of an HWCF weight (kiln's packed filters):
// the conv reads the weight itself, and no transpose is described.
// AVX512: module attributes {kiln.strategy = "conv 1x1 256->128 on 56x56 x4: registers 4x64, {{.*}}32 parallel blocks + init{{.*}}"
// AVX2: module attributes {kiln.strategy = "conv 1x1 256->128 on 56x56 x4: registers {{.*}}32 parallel blocks + init{{.*}}"
func.func @batched_conv(%x: tensor<4x56x56x256xf32>, %hwcf: tensor<1x1x256x128xf32>, %bias: tensor<128xf32>) -> tensor<4x56x56x128xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %w = tosa.transpose %hwcf {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x256x128xf32>) -> tensor<128x1x1x256xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<4x56x56x256xf32>, tensor<128x1x1x256xf32>, tensor<128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x56x56x128xf32>
  %c = tosa.clamp %r {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<4x56x56x128xf32>) -> tensor<4x56x56x128xf32>
  return %c : tensor<4x56x56x128xf32>
}

// -----

// A softmax over rows of 1000 floats: one row chain (the whole softmax in
// each block of 4 rows, which fill half of L1), its reductions in vectors.
// AVX512: kiln.strategy = "row chain in blocks of 4 rows; row reduction of 1000: vectors of {{[0-9]+}}{{.*}}; elementwise{{.*}} x{{[0-9]+}}
func.func @softmax(%x: tensor<4x1000xf32>) -> tensor<4x1000xf32> {
  %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x1000xf32>) -> tensor<4x1xf32>
  %s = tosa.sub %x, %m : (tensor<4x1000xf32>, tensor<4x1xf32>) -> tensor<4x1000xf32>
  %e = tosa.exp %s : (tensor<4x1000xf32>) -> tensor<4x1000xf32>
  %sum = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x1000xf32>) -> tensor<4x1xf32>
  %r = tosa.reciprocal %sum : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %z = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %y = tosa.mul %e, %r, %z : (tensor<4x1000xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x1000xf32>
  return %y : tensor<4x1000xf32>
}

// -----

// An image from NCHW to NHWC: 3 channels are too narrow for blocks, so the
// transpose stays on loops and says so.
// AVX512: kiln.strategy = "transpose on loops; elementwise in parallel"
func.func @nchw_to_nhwc(%x: tensor<1x3x224x224xf32>) -> tensor<1x224x224x3xf32> {
  %t = tosa.transpose %x {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x3x224x224xf32>) -> tensor<1x224x224x3xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1x3xf32>}> : () -> tensor<1x1x1x3xf32>
  %r = tosa.add %t, %one : (tensor<1x224x224x3xf32>, tensor<1x1x1x3xf32>) -> tensor<1x224x224x3xf32>
  return %r : tensor<1x224x224x3xf32>
}

// -----

// Rows no vector width divides (ViT's 197 tokens): whole vectors, then the
// rest after them, not the whole row on loops.
// AVX512: kiln.strategy = "row reduction of 197: vectors of 16 (+5 after), rows in parallel; fill"
// AVX2: kiln.strategy = "row reduction of 197: vectors of 8 (+5 after), rows in parallel; fill"
func.func @ragged_rows(%x: tensor<12x197x197xf32>) -> tensor<12x197x1xf32> {
  %m = tosa.reduce_max %x {axis = 2 : i32} : (tensor<12x197x197xf32>) -> tensor<12x197x1xf32>
  return %m : tensor<12x197x1xf32>
}

// -----

// A conv whose filter count no vector divides (ShuffleNet's 116) computes
// its init in registers of whole vectors and one tile of the rest: the
// words name those tiles, not the 7x4 that divides 116.
// AVX512: kiln.strategy = "conv 1x1 116->116 on 28x28: registers 7x16 (+ 7x4 for the last 4 filters), 14 parallel blocks + fill in registers"
// AVX2: kiln.strategy = "conv 1x1 116->116 on 28x28: registers 7x8 (+ 7x4 for the last 4 filters), 14 parallel blocks + fill in registers"
func.func @ragged_filters(%x: tensor<1x28x28x116xf32>, %w: tensor<1x1x116x116xf32>) -> tensor<1x28x28x116xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x116xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x116xf32>) -> tensor<1x28x28x116xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x28x28x116xf32>, tensor<1x1x116x116xf32>) outs(%f : tensor<1x28x28x116xf32>) -> tensor<1x28x28x116xf32>
  return %y : tensor<1x28x28x116xf32>
}

// -----

// 40 filters (RegNet's blocks of 40): on AVX-512 tiles of two vectors and
// one of the other 8 (32 + 8, not 16 + 16 + 8); AVX2's 8 lanes divide 40,
// but a one-vector tile (7x8) does less than one FMA per load: tiles of two
// vectors and one of the last (32 + 8) there too.
// AVX512: kiln.strategy = "conv 1x1 256->40 on 28x28: registers 7x32 (+ 7x8 for the last 8 filters), 14 parallel blocks + fill in registers"
// AVX2: kiln.strategy = "conv 1x1 256->40 on 28x28: registers 4x16 (+ 4x8 for the last 8 filters), 14 parallel blocks + fill"
func.func @ragged_filters_two_vectors(%x: tensor<1x28x28x256xf32>, %w: tensor<1x1x256x40xf32>) -> tensor<1x28x28x40xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x40xf32>) -> tensor<1x28x28x40xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x28x28x256xf32>, tensor<1x1x256x40xf32>) outs(%f : tensor<1x28x28x40xf32>) -> tensor<1x28x28x40xf32>
  return %y : tensor<1x28x28x40xf32>
}

// -----

// The same at 3.8 MFLOP (MobileNetV3's 240 -> 40 on 14x14): 7x32 + 7x8
// tiles, on one thread where a core does two 512-bit FMAs a cycle (below
// the 4 MFLOP a parallel launch needs there), in parallel blocks where it
// does fewer (one pipe: 2 MFLOP; AVX2 1 MFLOP, two-vector tiles and one
// of the last 8 as above).
// AVX512: kiln.strategy = "conv 1x1 240->40 on 14x14: registers 7x32 (+ 7x8 for the last 8 filters), 14 parallel blocks + fill in registers"
// AVX2: kiln.strategy = "conv 1x1 240->40 on 14x14: registers 5x16 (+4 columns) (+ 5x8 for the last 8 filters), 14 parallel blocks + fill"
// TWO: kiln.strategy = "conv 1x1 240->40 on 14x14: registers 7x32 (+ 7x8 for the last 8 filters), one thread"
func.func @ragged_filters_two_vectors_one_thread(%x: tensor<1x14x14x240xf32>, %w: tensor<1x1x240x40xf32>) -> tensor<1x14x14x40xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14x14x40xf32>) -> tensor<1x14x14x40xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x14x14x240xf32>, tensor<1x1x240x40xf32>) outs(%f : tensor<1x14x14x40xf32>) -> tensor<1x14x14x40xf32>
  return %y : tensor<1x14x14x40xf32>
}

// -----

// A filter count that no register tile of 4 or more divides (ShuffleNet's
// 58): tiles of whole vectors and one of the rest, not loops.
// AVX512: kiln.strategy = "conv 1x1 58->58 on 28x28: registers 7x16 (+ 7x10 for the last 10 filters), 14 parallel blocks + fill"
// AVX2: kiln.strategy = "conv 1x1 58->58 on 28x28: registers 7x8 (+ 7x2 for the last 2 filters), 14 parallel blocks + fill"
func.func @ragged_filters_no_tile(%x: tensor<1x28x28x58xf32>, %w: tensor<58x1x1x58xf32>) -> tensor<1x28x28x58xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x58xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x58xf32>) -> tensor<1x28x28x58xf32>
  %y = linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x28x28x58xf32>, tensor<58x1x1x58xf32>) outs(%f : tensor<1x28x28x58xf32>) -> tensor<1x28x28x58xf32>
  return %y : tensor<1x28x28x58xf32>
}

// -----

// Depthwise convs over channels no whole vector divides (58 and 116):
// whole vectors and a tile of the rest, not loops or quarter vectors.
// AVX512: kiln.strategy = "depthwise conv 3x3 on 28x28x58: registers 7x16 (+ 7x10 for the last 10 channels), 14 parallel blocks + fill in registers; depthwise conv 3x3 on 14x14x116: registers 7x16 (+ 7x4 for the last 4 channels), one thread"
// AVX2: kiln.strategy = "depthwise conv 3x3 on 28x28x58: registers 7x8 (+ 7x2 for the last 2 channels), 14 parallel blocks + fill in registers; depthwise conv 3x3 on 14x14x116: registers 7x8 (+ 7x4 for the last 4 channels), 14 parallel blocks + fill in registers"
func.func @ragged_channels(%x: tensor<1x30x30x58xf32>, %w: tensor<3x3x58xf32>, %x2: tensor<1x16x16x116xf32>, %w2: tensor<3x3x116xf32>) -> (tensor<1x28x28x58xf32>, tensor<1x14x14x116xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x58xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x58xf32>) -> tensor<1x28x28x58xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x30x30x58xf32>, tensor<3x3x58xf32>) outs(%f : tensor<1x28x28x58xf32>) -> tensor<1x28x28x58xf32>
  %e2 = tensor.empty() : tensor<1x14x14x116xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x14x14x116xf32>) -> tensor<1x14x14x116xf32>
  %y2 = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x2, %w2 : tensor<1x16x16x116xf32>, tensor<3x3x116xf32>) outs(%f2 : tensor<1x14x14x116xf32>) -> tensor<1x14x14x116xf32>
  return %y, %y2 : tensor<1x28x28x58xf32>, tensor<1x14x14x116xf32>
}

// -----

// A classifier (a vector times a 4 MB weight, 2 MFLOP): memory-bound, in
// parallel blocks of columns for the cores to read memory together (it ran
// on one thread: below the FLOPs bound for parallel blocks).
// AVX512: kiln.strategy = "matmul 1x1000x1024: registers 1x8, k blocks of 256, 25 parallel blocks of 1x40 + fill + epilogue(add)"
// AVX2: kiln.strategy = "matmul 1x1000x1024: registers 1x8, k blocks of 256, 25 parallel blocks of 1x40 + fill + epilogue(add)"
func.func @classifier(%x: tensor<1x1x1024xf32>, %w: tensor<1x1024x1000xf32>, %b: tensor<1x1x1000xf32>) -> tensor<1x1x1000xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %y = tosa.matmul %x, %w, %z, %z : (tensor<1x1x1024xf32>, tensor<1x1024x1000xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x1000xf32>
  %r = tosa.add %y, %b : (tensor<1x1x1000xf32>, tensor<1x1x1000xf32>) -> tensor<1x1x1000xf32>
  return %r : tensor<1x1x1000xf32>
}

// -----

// BERT-base's projection (128 tokens, 768 -> 768): 4 rows of 4 zmm divide
// the rows; a core with two 512-bit FMA pipes (fma-pipes=2: Xeons with AMX)
// takes 6 rows of the same columns and a 2-row tail (2.4 FMAs per load
// against 2.0), the blocks unchanged.
// AVX512: kiln.strategy = "matmul 128x768x768: registers 4x64, k blocks of 128, 12 parallel blocks of 128x64; fill"
// TWO: kiln.strategy = "matmul 128x768x768: registers 6x64 (+2 rows), k blocks of 128, 12 parallel blocks of 128x64; fill"
func.func @bert_projection(%a: tensor<1x128x768xf32>, %b: tensor<1x768x768xf32>) -> tensor<1x128x768xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %a, %b, %z, %z : (tensor<1x128x768xf32>, tensor<1x768x768xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x768xf32>
  return %r : tensor<1x128x768xf32>
}

// -----

// Attention over a sequence no vector divides (ViT's 197 tokens): Q K^T's
// columns in whole-vector tiles and one tile of the last 5 (the only
// dividing tile was one column wide: scalar code, and the Eigen kernel won
// its placement at 4x the time), its threads on the 12 heads; x V's
// reduction over 197 keys in one block, not 197 blocks of one.
// AVX512: kiln.strategy = "12 x matmul 197x197x64: registers 6x64 (+5 rows) (+ 6x5 for the last 5 columns), 12 parallel blocks of 197x197; fill in parallel"
// AVX2: kiln.strategy = "12 x matmul 197x197x64: registers 6x16 (+5 rows) (+ 6x5 for the last 5 columns), 12 parallel blocks of 197x197; fill in parallel"
func.func @ragged_columns(%q: tensor<12x197x64xf32>, %k: tensor<12x64x197xf32>) -> tensor<12x197x197xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = tosa.matmul %q, %k, %z, %z : (tensor<12x197x64xf32>, tensor<12x64x197xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x197x197xf32>
  return %s : tensor<12x197x197xf32>
}

// -----

// AVX512: kiln.strategy = "12 x matmul 197x64x197: registers 6x64 (+5 rows), 12 parallel blocks of 197x64; fill"
// AVX2: kiln.strategy = "12 x matmul 197x64x197: registers 6x16 (+5 rows), 12 parallel blocks of 197x64; fill"
func.func @ragged_reduction(%p: tensor<12x197x197xf32>, %v: tensor<12x197x64xf32>) -> tensor<12x197x64xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = tosa.matmul %p, %v, %z, %z : (tensor<12x197x197xf32>, tensor<12x197x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<12x197x64xf32>
  return %s : tensor<12x197x64xf32>
}

// -----

// Blocks of filters no whole vector divides (RegNet's 440 in blocks of 40:
// its 366 KB filter streams, over a quarter of L2): at 512 bits whole
// vectors and a tile of the last 8 in each block, not five tiles of 8 (half
// vectors, one load per 7 half-width FMAs); at 256 bits 8 is a whole vector,
// and each block one tile of 8: 55 blocks, which two threads share within
// 2% (11 blocks of 40 ran 6 on one thread, 5 on the other). At 512 bits
// the 11 blocks (an odd number below 24) are each over both halves of the
// rows: 22 tasks.
// AVX512: kiln.strategy = "conv 1x1 208->440 on 14x14: registers 7x32 (+ 7x8 for the last 8 filters of each block), blocks of 40 filters, 52 channels at a time, 22 parallel blocks + fill"
// AVX2: kiln.strategy = "conv 1x1 208->440 on 14x14: registers 7x8, blocks of 8 filters, 52 channels at a time, 55 parallel blocks + fill"
func.func @ragged_filter_blocks(%x: tensor<1x14x14x208xf32>, %w: tensor<440x1x1x208xf32>) -> tensor<1x14x14x440xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x440xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14x14x440xf32>) -> tensor<1x14x14x440xf32>
  %y = linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x14x14x208xf32>, tensor<440x1x1x208xf32>) outs(%f : tensor<1x14x14x440xf32>) -> tensor<1x14x14x440xf32>
  return %y : tensor<1x14x14x440xf32>
}
// -----

// A depthwise conv with SiLU and a squeeze-and-excitation pool after it
// (EfficientNet's): the SiLU after each register tile where there are 16
// vector registers (exp's constants spill beside the tile), in the tile at
// 512 bits; the pool's sum over 56x56x144 (1.8 MB) in parallel blocks.
// AVX512: kiln.strategy = "depthwise conv 3x3 on 56x56x144: registers 8x16, 8 parallel blocks + fill + epilogue(add, negf, exp, div, mul) in registers; outer reduction: vectors of 16, in parallel; outer reduction: vectors of 16; fill x2"
// AVX2: kiln.strategy = "depthwise conv 3x3 on 56x56x144: registers 4x16, 8 parallel blocks + fill + epilogue(add, negf, exp, div, mul); outer reduction: vectors of 16, in parallel; outer reduction: vectors of 16; fill x2"
func.func @depthwise_silu_pool(%x: tensor<1x58x58x144xf32>, %w: tensor<3x3x144x1xf32>, %b: tensor<144xf32>) -> (tensor<1x56x56x144xf32>, tensor<1x1x1x144xf32>) {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %sh = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %d = tosa.depthwise_conv2d %x, %w, %b, %z, %z {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x58x58x144xf32>, tensor<3x3x144x1xf32>, tensor<144xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x56x56x144xf32>
  %s = tosa.sigmoid %d : (tensor<1x56x56x144xf32>) -> tensor<1x56x56x144xf32>
  %y = tosa.mul %d, %s, %sh : (tensor<1x56x56x144xf32>, tensor<1x56x56x144xf32>, tensor<1xi8>) -> tensor<1x56x56x144xf32>
  %r1 = tosa.reduce_sum %y {axis = 2 : i32} : (tensor<1x56x56x144xf32>) -> tensor<1x56x1x144xf32>
  %r2 = tosa.reduce_sum %r1 {axis = 1 : i32} : (tensor<1x56x1x144xf32>) -> tensor<1x1x1x144xf32>
  return %y, %r2 : tensor<1x56x56x144xf32>, tensor<1x1x1x144xf32>
}

// -----

// A streamed filter in an odd number of blocks below 24 (3 of 32):
// the rows are halved too, six tasks for the threads to share evenly
// (MobileNetV2's 1x1 576 -> 96 on 14x14).
// AVX512: kiln.strategy = "conv 1x1 576->96 on 14x14: registers 7x32, blocks of 32 filters, 192 channels at a time, 6 parallel blocks + fill"
// AVX2: kiln.strategy = "conv 1x1 576->96 on 14x14: registers 2x32, blocks of 32 filters, 192 channels at a time, 6 parallel blocks + fill"
func.func @odd_filter_blocks(%x: tensor<1x14x14x576xf32>, %w: tensor<1x1x576x96xf32>) -> tensor<1x14x14x96xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14x14x96xf32>) -> tensor<1x14x14x96xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x14x14x576xf32>, tensor<1x1x576x96xf32>) outs(%f : tensor<1x14x14x96xf32>) -> tensor<1x14x14x96xf32>
  return %y : tensor<1x14x14x96xf32>
}

// -----

// The same on a 7x7 map, whose 7 rows cannot be halved: at 512 bits the
// blocks are halved instead (6 of 16 filters, 7x16 tiles with enough
// accumulators), the epilogue in registers (MobileNetV3-small's 1x1
// 576 -> 96 on 7x7 34 -> 27 us); AVX2's one-vector tiles already make 12.
// AVX512: kiln.strategy = "conv 1x1 576->96 on 7x7: registers 7x16, blocks of 16 filters, 6 parallel blocks + fill in registers"
// AVX2: kiln.strategy = "conv 1x1 576->96 on 7x7: registers 7x8, blocks of 8 filters, 12 parallel blocks + fill in registers"
func.func @odd_filter_blocks_odd_rows(%x: tensor<1x7x7x576xf32>, %w: tensor<1x1x576x96xf32>) -> tensor<1x7x7x96xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x7x7x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x7x7x96xf32>) -> tensor<1x7x7x96xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x7x7x576xf32>, tensor<1x1x576x96xf32>) outs(%f : tensor<1x7x7x96xf32>) -> tensor<1x7x7x96xf32>
  return %y : tensor<1x7x7x96xf32>
}

// -----

// A depthwise conv on a 7x7 map: 7 row blocks (4 on one thread, 3 on the
// other), so the channels are halved too: 14 tasks.
// AVX512: kiln.strategy = "depthwise conv 3x3 on 7x7x960: registers 7x32, 14 parallel blocks + fill in registers"
// AVX512: scf.forall (%{{.*}}, %{{.*}}) in (7, 2)
// AVX2: kiln.strategy = "depthwise conv 3x3 on 7x7x960: registers 7x8, 14 parallel blocks + fill in registers"
func.func @depthwise_odd_rows(%x: tensor<1x9x9x960xf32>, %w: tensor<3x3x960xf32>) -> tensor<1x7x7x960xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x7x7x960xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x7x7x960xf32>) -> tensor<1x7x7x960xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x9x9x960xf32>, tensor<3x3x960xf32>) outs(%f : tensor<1x7x7x960xf32>) -> tensor<1x7x7x960xf32>
  return %y : tensor<1x7x7x960xf32>
}

// -----

// 24 filters over a reduction of 27 (ShuffleNetV2's stem): one-vector
// tiles stay on AVX2 (two-vector ones with a tile of the last 8 measured
// slower there: their fill and epilogue leave the registers).
// AVX2: kiln.strategy = "conv 3x3 3->24 on 112x112: registers 8x8, 8 parallel blocks + fill"
func.func @short_reduction_one_vector(%x: tensor<1x114x114x3xf32>, %w: tensor<24x3x3x3xf32>) -> tensor<1x112x112x24xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x112x112x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x112x112x24xf32>) -> tensor<1x112x112x24xf32>
  %y = linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x114x114x3xf32>, tensor<24x3x3x3xf32>) outs(%f : tensor<1x112x112x24xf32>) -> tensor<1x112x112x24xf32>
  return %y : tensor<1x112x112x24xf32>
}

// -----

// 240 filters at 512 bits: 7 + 1/2 vectors. With 32 registers the
// one-vector tiles are 7 rows deep, enough chains for the FMA's latency,
// and keep the ReLU in their registers: no two-vector tiles with a tile of
// the last vector (their epilogue leaves the registers; EfficientNet-B0's
// 40 -> 240 on 28x28 190 against 200 us, RegNetY's 32 -> 48 on 112x112
// 372 against 454, kiln profile --serial, Zen 4).
// AVX512: kiln.strategy = "conv 1x1 40->240 on 28x28: registers 7x16, 14 parallel blocks + fill + epilogue(maximum, minimum) in registers"
func.func @one_vector_tiles_deep_enough(%x: tensor<1x28x28x40xf32>, %w: tensor<1x1x40x240xf32>) -> tensor<1x28x28x240xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x240xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x240xf32>) -> tensor<1x28x28x240xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x28x28x40xf32>, tensor<1x1x40x240xf32>) outs(%f : tensor<1x28x28x240xf32>) -> tensor<1x28x28x240xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%y : tensor<1x28x28x240xf32>) outs(%e : tensor<1x28x28x240xf32>) {
  ^bb0(%a: f32, %o: f32):
    %lo = arith.maximumf %a, %zero : f32
    %six = arith.constant 6.0 : f32
    %hi = arith.minimumf %lo, %six : f32
    linalg.yield %hi : f32
  } -> tensor<1x28x28x240xf32>
  return %r : tensor<1x28x28x240xf32>
}

// -----

// On a 1x1 map (squeeze-and-excitation) a one-vector tile is one chain:
// two-vector tiles and one of the last vector (1152 -> 48: 1x32 + 1x16;
// EfficientNet-B0's 9-11 us against 13-21 with 1x16, Zen 4).
// AVX512: kiln.strategy = "conv 1x1 1152->48 on 1x1: registers 1x32 (+ 1x16 for the last 16 filters){{.*}}"
func.func @two_vector_tiles_one_pixel(%x: tensor<1x1x1x1152xf32>, %w: tensor<1x1x1152x48xf32>) -> tensor<1x1x1x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1x1x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x1x1x48xf32>) -> tensor<1x1x1x48xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x1x1x1152xf32>, tensor<1x1x1152x48xf32>) outs(%f : tensor<1x1x1x48xf32>) -> tensor<1x1x1x48xf32>
  return %y : tensor<1x1x1x48xf32>
}
