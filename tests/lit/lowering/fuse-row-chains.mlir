// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=512 vector-registers=32 l1-bytes=32768})" | FileCheck %s
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(kiln-tosa-to-linalg,kiln-cpu-strategy{vector-bits=256 vector-registers=16 l1-bytes=32768})" | FileCheck %s --check-prefix=AVX2

// A residual add and a layer norm as torch exports BERT's (its variance in
// f64, on [1, S, C] with the row sums read back as [1, S, 1]): one
// scf.forall over blocks of 4 rows (4 x 384 f64 fill half of L1), every
// op of the chain inside it, no pass over the whole tensor and no reshape
// left. At both vector widths.
// CHECK: kiln.strategy = "row chain in blocks of 4 rows, in parallel; row reduction of 384:
// CHECK-NOT: in parallel
// CHECK-SAME: "
// CHECK-LABEL: func.func @layer_norm
// CHECK-NOT: tensor.expand_shape
// CHECK: scf.forall (%{{.*}}) = (0) to (256) step (4)
// CHECK-NOT: scf.forall (
// CHECK: scf.forall.in_parallel
// AVX2: kiln.strategy = "row chain in blocks of 4 rows, in parallel;
// AVX2-LABEL: func.func @layer_norm
// AVX2: scf.forall (%{{.*}}) = (0) to (256) step (4)
func.func @layer_norm(%x: tensor<1x256x384xf32>, %res: tensor<1x256x384xf32>, %g: tensor<1x1x384xf32>, %b: tensor<1x1x384xf32>) -> tensor<1x256x384xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv64 = "tosa.const"() <{values = dense<0.0026041666666666665> : tensor<1x1x1xf64>}> : () -> tensor<1x1x1xf64>
  %inv = "tosa.const"() <{values = dense<0.00260416674> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0E-12> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %s = tosa.add %x, %res : (tensor<1x256x384xf32>, tensor<1x256x384xf32>) -> tensor<1x256x384xf32>
  %s64 = tosa.cast %s : (tensor<1x256x384xf32>) -> tensor<1x256x384xf64>
  %sum64 = tosa.reduce_sum %s64 {axis = 2 : i32} : (tensor<1x256x384xf64>) -> tensor<1x256x1xf64>
  %mean64 = tosa.mul %sum64, %inv64, %shift : (tensor<1x256x1xf64>, tensor<1x1x1xf64>, tensor<1xi8>) -> tensor<1x256x1xf64>
  %d64 = tosa.sub %s64, %mean64 : (tensor<1x256x384xf64>, tensor<1x256x1xf64>) -> tensor<1x256x384xf64>
  %sq = tosa.mul %d64, %d64, %shift : (tensor<1x256x384xf64>, tensor<1x256x384xf64>, tensor<1xi8>) -> tensor<1x256x384xf64>
  %ssq = tosa.reduce_sum %sq {axis = 2 : i32} : (tensor<1x256x384xf64>) -> tensor<1x256x1xf64>
  %var64 = tosa.mul %ssq, %inv64, %shift : (tensor<1x256x1xf64>, tensor<1x1x1xf64>, tensor<1xi8>) -> tensor<1x256x1xf64>
  %var = tosa.cast %var64 : (tensor<1x256x1xf64>) -> tensor<1x256x1xf32>
  %sum = tosa.reduce_sum %s {axis = 2 : i32} : (tensor<1x256x384xf32>) -> tensor<1x256x1xf32>
  %mean = tosa.mul %sum, %inv, %shift : (tensor<1x256x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x256x1xf32>
  %ve = tosa.add %var, %eps : (tensor<1x256x1xf32>, tensor<1x1x1xf32>) -> tensor<1x256x1xf32>
  %rs = tosa.rsqrt %ve : (tensor<1x256x1xf32>) -> tensor<1x256x1xf32>
  %d = tosa.sub %s, %mean : (tensor<1x256x384xf32>, tensor<1x256x1xf32>) -> tensor<1x256x384xf32>
  %n = tosa.mul %d, %rs, %shift : (tensor<1x256x384xf32>, tensor<1x256x1xf32>, tensor<1xi8>) -> tensor<1x256x384xf32>
  %ng = tosa.mul %n, %g, %shift : (tensor<1x256x384xf32>, tensor<1x1x384xf32>, tensor<1xi8>) -> tensor<1x256x384xf32>
  %y = tosa.add %ng, %b : (tensor<1x256x384xf32>, tensor<1x1x384xf32>) -> tensor<1x256x384xf32>
  return %y : tensor<1x256x384xf32>
}

// -----

// A matmul, its bias add and T5's RMS norm after it: the bias add stays the
// matmul's epilogue (in its parallel tiles), the norm is a row chain of its
// own over the matmul's output (blocks of 8 rows of 512 floats).
// CHECK: kiln.strategy = "row chain in blocks of 8 rows, in parallel; matmul 256x512x256: {{.*}}epilogue(add)
// CHECK-LABEL: func.func @matmul_rms_norm
// CHECK: scf.forall (%{{.*}}) = (0) to (256) step (8)
func.func @matmul_rms_norm(%x: tensor<1x256x256xf32>, %w: tensor<1x256x512xf32>, %bias: tensor<1x1x512xf32>, %g: tensor<1x1x512xf32>) -> tensor<1x256x512xf32> {
  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv = "tosa.const"() <{values = dense<0.001953125> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0E-6> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %m = tosa.matmul %x, %w, %z, %z : (tensor<1x256x256xf32>, tensor<1x256x512xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x256x512xf32>
  %h = tosa.add %m, %bias : (tensor<1x256x512xf32>, tensor<1x1x512xf32>) -> tensor<1x256x512xf32>
  %sq = tosa.mul %h, %h, %shift : (tensor<1x256x512xf32>, tensor<1x256x512xf32>, tensor<1xi8>) -> tensor<1x256x512xf32>
  %ss = tosa.reduce_sum %sq {axis = 2 : i32} : (tensor<1x256x512xf32>) -> tensor<1x256x1xf32>
  %ms = tosa.mul %ss, %inv, %shift : (tensor<1x256x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x256x1xf32>
  %e = tosa.add %ms, %eps : (tensor<1x256x1xf32>, tensor<1x1x1xf32>) -> tensor<1x256x1xf32>
  %r = tosa.rsqrt %e : (tensor<1x256x1xf32>) -> tensor<1x256x1xf32>
  %n = tosa.mul %h, %r, %shift : (tensor<1x256x512xf32>, tensor<1x256x1xf32>, tensor<1xi8>) -> tensor<1x256x512xf32>
  %y = tosa.mul %n, %g, %shift : (tensor<1x256x512xf32>, tensor<1x1x512xf32>, tensor<1xi8>) -> tensor<1x256x512xf32>
  return %y : tensor<1x256x512xf32>
}

// -----

// A softmax over 97 rows (prime: no block near the 16 rows of 256 floats
// that fill half of L1 divides them) of 4 heads: a block of all 97 rows
// per head. With one head there would be no other loop to share out: the
// chain stays as it was (next case).
// CHECK: kiln.strategy = "row chain in blocks of 97 rows, in parallel;
// CHECK-LABEL: func.func @softmax_prime_rows
// CHECK: scf.forall (%{{.*}}) in (4)
func.func @softmax_prime_rows(%x: tensor<4x97x256xf32>) -> tensor<4x97x256xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %mx = tosa.reduce_max %x {axis = 2 : i32} : (tensor<4x97x256xf32>) -> tensor<4x97x1xf32>
  %d = tosa.sub %x, %mx : (tensor<4x97x256xf32>, tensor<4x97x1xf32>) -> tensor<4x97x256xf32>
  %e = tosa.exp %d : (tensor<4x97x256xf32>) -> tensor<4x97x256xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x97x256xf32>) -> tensor<4x97x1xf32>
  %r = tosa.reciprocal %sum : (tensor<4x97x1xf32>) -> tensor<4x97x1xf32>
  %y = tosa.mul %e, %r, %shift : (tensor<4x97x256xf32>, tensor<4x97x1xf32>, tensor<1xi8>) -> tensor<4x97x256xf32>
  return %y : tensor<4x97x256xf32>
}

// -----

// CHECK-NOT: row chain
// CHECK-LABEL: func.func @softmax_prime_rows_one_head
func.func @softmax_prime_rows_one_head(%x: tensor<1x97x256xf32>) -> tensor<1x97x256xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %mx = tosa.reduce_max %x {axis = 2 : i32} : (tensor<1x97x256xf32>) -> tensor<1x97x1xf32>
  %d = tosa.sub %x, %mx : (tensor<1x97x256xf32>, tensor<1x97x1xf32>) -> tensor<1x97x256xf32>
  %e = tosa.exp %d : (tensor<1x97x256xf32>) -> tensor<1x97x256xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<1x97x256xf32>) -> tensor<1x97x1xf32>
  %r = tosa.reciprocal %sum : (tensor<1x97x1xf32>) -> tensor<1x97x1xf32>
  %y = tosa.mul %e, %r, %shift : (tensor<1x97x256xf32>, tensor<1x97x1xf32>, tensor<1xi8>) -> tensor<1x97x256xf32>
  return %y : tensor<1x97x256xf32>
}
