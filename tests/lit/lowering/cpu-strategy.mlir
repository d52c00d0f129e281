// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32})" | FileCheck %s --check-prefix=AVX512
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16})" | FileCheck %s --check-prefix=AVX2
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=0})" | FileCheck %s --check-prefix=OFF
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-specialize-shapes{function=elementwise shapes=4x1000xf32,4x1000xf32},kiln-tosa-to-linalg,kiln-cpu-tile-vectorize,kiln-bufferize,kiln-lower-to-llvm)" | FileCheck %s --check-prefix=LLVM

// Matmul: a register tile of rows x vectors whose accumulator stays in
// vector registers across the k loop (an scf.for carrying the vector), FMAs
// of a broadcast row of A with a vector of B. AVX-512 (32 registers) takes
// 4 rows of 4 zmm; AVX2 (16 ymm) 4 rows of 2, leaving room for B and A.
// AVX512-LABEL: func.func @matmul
// AVX512: scf.for {{.*}} iter_args({{.*}}) -> (vector<4x64xf32>)
// AVX512-COUNT-4: vector.fma {{.*}} : vector<64xf32>
// AVX512-NOT: linalg.batch_matmul
// AVX2-LABEL: func.func @matmul
// AVX2: scf.for {{.*}} iter_args({{.*}}) -> (vector<4x16xf32>)
// AVX2-COUNT-4: vector.fma {{.*}} : vector<16xf32>
// OFF-LABEL: func.func @matmul
// OFF: linalg.batch_matmul
// OFF-NOT: vector.
func.func @matmul(%a: tensor<1x256x256xf32>, %b: tensor<1x256x256xf32>) -> tensor<1x256x256xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.matmul %a, %b, %z, %z : (tensor<1x256x256xf32>, tensor<1x256x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x256x256xf32>
  return %r : tensor<1x256x256xf32>
}

// Conv: filter to HWCF, a register tile over (output width, channels),
// decomposed to 1-D convolutions; the accumulator is carried through the
// kh, kw and c loops (with 16 ymm registers 7 rows of 2 would spill, 2
// rows of 4 fit).
// The ReLU after it is vectorized on whole vectors.
// AVX512-LABEL: func.func @conv
// AVX512: linalg.transpose {{.*}} permutation = [1, 2, 3, 0]
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512: vector.fma {{.*}} : vector<32xf32>
// AVX512-NOT: linalg.conv
// AVX512: arith.maximumf {{.*}} : vector<32xf32>
// AVX2-LABEL: func.func @conv
// AVX2: scf.for {{.*}} -> (vector<2x32xf32>)
// AVX2: vector.fma {{.*}} : vector<32xf32>
func.func @conv(%x: tensor<1x14x14x32xf32>, %w: tensor<32x3x3x32xf32>, %bias: tensor<32xf32>) -> tensor<1x14x14x32xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x14x14x32xf32>, tensor<32x3x3x32xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x14x14x32xf32>
  %c = tosa.clamp %r {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  return %c : tensor<1x14x14x32xf32>
}

// Conv on a 7-wide map: AVX2's 16 registers cannot hold 7 rows of 2 ymm,
// so the output columns split: a 4x16 register tile for the first 4, a
// 3x16 one for the last 3 (static, no masks) — not 6x16 and a 1x16 tail,
// whose two accumulators wait on each FMA's latency. AVX-512 keeps 7 rows
// of 2 zmm, which divide the width. Unpadded, the AVX2 conv runs as a
// matmul over its 49 pixels (5x16 tiles and a 4x16 tail), whose tile
// scores more FMAs per load than the conv's.
// AVX2-LABEL: func.func @conv_tail
// AVX2-NOT: linalg.conv
// AVX2: scf.for {{.*}} -> (vector<5x16xf32>)
// AVX2-COUNT-5: vector.fma {{.*}} : vector<16xf32>
// AVX2: scf.for {{.*}} -> (vector<4x16xf32>)
// AVX2-NOT: linalg.conv
// AVX2-NOT: vector<1x16xf32>
// AVX2-LABEL: func.func @conv_tail_padded
// AVX2: tensor.extract_slice {{.*}}[0, 0, 0, 0] [1, 7, 4, 128] [1, 1, 1, 1] : tensor<1x7x7x128xf32> to tensor<1x7x4x128xf32>
// AVX2: scf.for {{.*}} -> (vector<4x16xf32>)
// AVX2-COUNT-4: vector.fma {{.*}} : vector<16xf32>
// AVX2: tensor.extract_slice {{.*}}[0, 0, 4, 0] [1, 7, 3, 128] [1, 1, 1, 1] : tensor<1x7x7x128xf32> to tensor<1x7x3x128xf32>
// AVX2: scf.for {{.*}} -> (vector<3x16xf32>)
// AVX2-COUNT-3: vector.fma {{.*}} : vector<16xf32>
// AVX2-NOT: linalg.conv
// AVX512-LABEL: func.func @conv_tail
// AVX512-NOT: tensor<1x7x6x128xf32>
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512-NOT: linalg.conv
// AVX512-LABEL: func.func @conv_tail_padded
// AVX512-NOT: tensor<1x7x4x128xf32>
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512-NOT: linalg.conv
func.func @conv_tail(%x: tensor<1x7x7x64xf32>, %w: tensor<128x1x1x64xf32>, %bias: tensor<128xf32>) -> tensor<1x7x7x128xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x7x7x64xf32>, tensor<128x1x1x64xf32>, tensor<128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x7x7x128xf32>
  return %r : tensor<1x7x7x128xf32>
}

func.func @conv_tail_padded(%x: tensor<1x7x7x64xf32>, %w: tensor<128x1x1x64xf32>, %bias: tensor<128xf32>) -> tensor<1x9x9x128xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.conv2d %x, %w, %bias, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x7x7x64xf32>, tensor<128x1x1x64xf32>, tensor<128xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x7x7x128xf32>
  %p = tosa.const_shape {values = dense<[0, 0, 1, 1, 1, 1, 0, 0]> : tensor<8xindex>} : () -> !tosa.shape<8>
  %y = tosa.pad %r, %p, %z : (tensor<1x7x7x128xf32>, !tosa.shape<8>, tensor<1xf32>) -> tensor<1x9x9x128xf32>
  return %y : tensor<1x9x9x128xf32>
}

// A 1x1 conv on a 14-wide map runs as a matmul over its 196 pixels when
// that gives a better register tile: AVX-512 takes 4 x 64 over the pixels
// (as a conv it would take 7 x 32 over one row); the bias init and the
// ReLU are collapsed with it and fused into its parallel tiles. AVX2's
// best tile is the same either way (2 x 32): it stays a conv.
// AVX512-LABEL: func.func @conv1x1_matmul
// AVX512-DAG: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] : tensor<1x14x14x128xf32> into tensor<196x128xf32>
// AVX512-DAG: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] : tensor<1x1x128x256xf32> into tensor<128x256xf32>
// AVX512: scf.forall
// AVX512: scf.for {{.*}} -> (vector<4x64xf32>)
// AVX512-COUNT-4: vector.fma {{.*}} : vector<64xf32>
// AVX512: arith.maximumf {{.*}} : vector<
// AVX512: scf.forall.in_parallel
// AVX512: tensor.expand_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] output_shape [1, 14, 14, 256] : tensor<196x256xf32> into tensor<1x14x14x256xf32>
// AVX512-NOT: linalg.conv
// AVX512-NOT: linalg.matmul
// AVX2-LABEL: func.func @conv1x1_matmul
// AVX2-NOT: tensor<196x
// AVX2: return
func.func @conv1x1_matmul(%x: tensor<1x14x14x128xf32>, %w: tensor<1x1x128x256xf32>, %bias: tensor<256xf32>) -> tensor<1x14x14x256xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %f = tosa.transpose %w {perms = array<i32: 3, 0, 1, 2>} : (tensor<1x1x128x256xf32>) -> tensor<256x1x1x128xf32>
  %r = tosa.conv2d %x, %f, %bias, %z, %z {acc_type = f32, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x14x14x128xf32>, tensor<256x1x1x128xf32>, tensor<256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x14x14x256xf32>
  %c = tosa.clamp %r {min_val = 0.0 : f32, max_val = 3.4e38 : f32} : (tensor<1x14x14x256xf32>) -> tensor<1x14x14x256xf32>
  return %c : tensor<1x14x14x256xf32>
}

// Elementwise: the inner dimension in whole vectors, the remainder (1000 =
// 31 x 32 + 8) peeled into one static tail; no masks. exp becomes a
// polynomial on vectors, not one libm call per lane.
// AVX512-LABEL: func.func @elementwise
// AVX512: scf.for {{.*}} to %c992 step %c32
// AVX512: arith.addf {{.*}} : vector<32xf32>
// AVX512-NOT: vector.create_mask
// AVX512-NOT: math.exp
// AVX512: arith.addf {{.*}} : vector<8xf32>
// LLVM-LABEL: llvm.func @kiln_fn
// LLVM-NOT: @expf
// LLVM: llvm.intr.fma
func.func @elementwise(%a: tensor<4x1000xf32>, %b: tensor<4x1000xf32>) -> tensor<4x1000xf32> {
  %s = tosa.add %a, %b : (tensor<4x1000xf32>, tensor<4x1000xf32>) -> tensor<4x1000xf32>
  %e = tosa.exp %s : (tensor<4x1000xf32>) -> tensor<4x1000xf32>
  return %e : tensor<4x1000xf32>
}

// Elementwise ops that move 1 MiB or more share their outer rows among
// the threads (8 parallel tiles of 125 rows); smaller ones (@elementwise
// above) stay on the calling thread.
// AVX512-LABEL: func.func @elementwise_parallel
// AVX512: scf.forall ({{.*}}) in (8)
// AVX512: arith.addf {{.*}} : vector<32xf32>
// AVX2-LABEL: func.func @elementwise_parallel
// AVX2: scf.forall ({{.*}}) in (8)
// AVX2: arith.addf {{.*}} : vector<16xf32>
// OFF-LABEL: func.func @elementwise_parallel
// OFF-NOT: scf.forall
// OFF-LABEL: func.func @bools
func.func @elementwise_parallel(%a: tensor<1000x1000xf32>, %b: tensor<1000x1000xf32>) -> tensor<1000x1000xf32> {
  %s = tosa.add %a, %b : (tensor<1000x1000xf32>, tensor<1000x1000xf32>) -> tensor<1000x1000xf32>
  return %s : tensor<1000x1000xf32>
}

// i1 tensors are one byte per element in kiln's buffers: never vectorized
// (a vector<Nxi1> load would read packed bits).
// AVX512-LABEL: func.func @bools
// AVX512: linalg.generic
// AVX512-NOT: vector.transfer_read
// AVX512: return
func.func @bools(%a: tensor<64xi1>) -> tensor<64xi32> {
  %r = tosa.cast %a : (tensor<64xi1>) -> tensor<64xi32>
  return %r : tensor<64xi32>
}

// Row reductions: partial results in a vector across the row, one
// horizontal reduction at the end (1000 = 125 x 8 on 8-wide vectors).
// AVX512-LABEL: func.func @row_sums
// AVX512-NOT: scf.forall
// AVX512: scf.for {{.*}} to %c1000 step %c8 iter_args({{.*}}) -> (vector<8xf32>)
// AVX512: arith.addf {{.*}} : vector<8xf32>
// AVX512: vector.reduction <add>
func.func @row_sums(%a: tensor<64x1000xf32>) -> tensor<64x1xf32> {
  %r = tosa.reduce_sum %a {axis = 1 : i32} : (tensor<64x1000xf32>) -> tensor<64x1xf32>
  return %r : tensor<64x1xf32>
}

// Row reductions over 1 MiB or more: rows shared among the threads.
// AVX512-LABEL: func.func @row_sums_parallel
// AVX512: scf.forall ({{.*}}) in (8)
// AVX512: scf.for {{.*}} to %c1000 step %c8 iter_args({{.*}}) -> (vector<8xf32>)
// AVX512: vector.reduction <add>
func.func @row_sums_parallel(%a: tensor<512x1000xf32>) -> tensor<512x1xf32> {
  %r = tosa.reduce_sum %a {axis = 1 : i32} : (tensor<512x1000xf32>) -> tensor<512x1xf32>
  return %r : tensor<512x1xf32>
}

// f64 rows (layer norms exported in double): the same, on vectors of half
// as many lanes (768 = 48 x 16 on AVX-512's 8 f64 lanes, two vectors).
// AVX512-LABEL: func.func @row_sums_f64
// AVX512: scf.for {{.*}} to %c768 step %c16 iter_args({{.*}}) -> (vector<16xf64>)
// AVX512: vector.reduction <add>
// AVX2-LABEL: func.func @row_sums_f64
// AVX2: scf.for {{.*}} to %c768 step %c8 iter_args({{.*}}) -> (vector<8xf64>)
func.func @row_sums_f64(%a: tensor<1x128x768xf64>) -> tensor<1x128x1xf64> {
  %r = tosa.reduce_sum %a {axis = 2 : i32} : (tensor<1x128x768xf64>) -> tensor<1x128x1xf64>
  return %r : tensor<1x128x1xf64>
}

// Reductions over outer dimensions (a global pool over H and W of NHWC
// data): vectors across the channels, the accumulator carried in a register
// across the reduced rows, no horizontal reduction.
// AVX512-LABEL: func.func @pool_sums
// AVX512: scf.for {{.*}} iter_args({{.*}}) -> (vector<32xf32>)
// AVX512: arith.addf {{.*}} : vector<32xf32>
// AVX512-NOT: vector.reduction
// AVX2-LABEL: func.func @pool_sums
// AVX2: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>)
// AVX2: arith.addf {{.*}} : vector<16xf32>
func.func @pool_sums(%x: tensor<1x7x7x256xf32>) -> tensor<1x1x1x256xf32> {
  %r1 = tosa.reduce_sum %x {axis = 2 : i32} : (tensor<1x7x7x256xf32>) -> tensor<1x7x1x256xf32>
  %r2 = tosa.reduce_sum %r1 {axis = 1 : i32} : (tensor<1x7x1x256xf32>) -> tensor<1x1x1x256xf32>
  return %r2 : tensor<1x1x1x256xf32>
}

// Depthwise conv (TOSA's hwcm with one filter per channel, rewritten to
// hwc): vectors over channels, rows of output pixels, FMAs with the
// accumulator carried across kh and kw.
// AVX512-LABEL: func.func @depthwise
// AVX512-NOT: linalg.depthwise
// AVX512: scf.for {{.*}} -> (vector<7x32xf32>)
// AVX512: vector.fma {{.*}} : vector<7x32xf32>
func.func @depthwise(%x: tensor<1x14x14x32xf32>, %w: tensor<3x3x32x1xf32>, %b: tensor<32xf32>) -> tensor<1x14x14x32xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %r = tosa.depthwise_conv2d %x, %w, %b, %z, %z {acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x14x14x32xf32>, tensor<3x3x32x1xf32>, tensor<32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x14x14x32xf32>
  return %r : tensor<1x14x14x32xf32>
}
