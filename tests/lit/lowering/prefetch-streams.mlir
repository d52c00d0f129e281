// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(kiln-prefetch-streams{distance-bytes=8192 min-stream-bytes=65536}))" | FileCheck %s
// RUN: %kiln-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(kiln-prefetch-streams{distance-bytes=0 min-stream-bytes=65536}))" | FileCheck %s --check-prefix=OFF
// RUN: %kiln-opt %s --split-input-file --kiln-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// A register tile's reduction loop (4 rows of accumulators) reading the rows
// of a filter panel (16 x 256 x 32 f32, 512 KiB: it streams) through a view
// the loop steps:
// each 128-byte row gets two prefetches (one per cache line) 8 KiB = 64
// rows ahead along the stepped dimension, into L2 (locality 2). Past the
// view's end is allowed: a prefetch never faults.
// CHECK-LABEL: func.func @kiln_fn
// CHECK: %[[P:.*]] = memref.subview %arg0[%{{.*}}, 0, 0] [1, 256, 32]
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: %[[ROW:.*]] = memref.subview %[[P]][0, %[[K]], 0] [1, 1, 32]
// CHECK: %[[AHEAD:.*]] = arith.addi %[[K]], %c64
// CHECK: memref.prefetch %[[P]][%c0{{.*}}, %[[AHEAD]], %c0{{.*}}], read, locality<2>, data
// CHECK: %[[LINE:.*]] = arith.addi %c0{{.*}}, %c16
// CHECK: memref.prefetch %[[P]][%c0{{.*}}, %[[AHEAD]], %[[LINE]]], read, locality<2>, data
// CHECK-NOT: memref.prefetch
// CHECK: vector.transfer_read %{{.*}} : memref<1x1x32xf32, {{.*}}>, vector<32xf32>
// OFF-NOT: memref.prefetch
// LLVM: llvm.func @kiln_fn
// LLVM-COUNT-2: "llvm.intr.prefetch"(%{{.*}}) <{cache = 1 : i32, hint = 2 : i32, rw = 0 : i32}>
// LLVM-NOT: llvm.intr.prefetch
// LLVM: llvm.func @kiln_fn
func.func @kiln_fn(%arg0: memref<16x256x32xf32>, %arg1: memref<7x256xf32>, %out: memref<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  %cst = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4x32xf32>
  scf.for %arg2 = %c0 to %c16 step %c1 {
    %panel = memref.subview %arg0[%arg2, 0, 0] [1, 256, 32] [1, 1, 1] : memref<16x256x32xf32> to memref<1x256x32xf32, strided<[8192, 32, 1], offset: ?>>
    %acc = scf.for %k = %c0 to %c256 step %c1 iter_args(%a = %zero) -> (vector<4x32xf32>) {
      %row = memref.subview %panel[0, %k, 0] [1, 1, 32] [1, 1, 1] : memref<1x256x32xf32, strided<[8192, 32, 1], offset: ?>> to memref<1x1x32xf32, strided<[8192, 32, 1], offset: ?>>
      %b = vector.transfer_read %row[%c0, %c0, %c0], %cst {in_bounds = [true]} : memref<1x1x32xf32, strided<[8192, 32, 1], offset: ?>>, vector<32xf32>
      %x = memref.load %arg1[%c0, %k] : memref<7x256xf32>
      %xb = vector.broadcast %x : f32 to vector<32xf32>
      %a0 = vector.extract %a[0] : vector<32xf32> from vector<4x32xf32>
      %r0 = vector.fma %xb, %b, %a0 : vector<32xf32>
      %r = vector.insert %r0, %a [0] : vector<32xf32> into vector<4x32xf32>
      scf.yield %r : vector<4x32xf32>
    }
    %acc0 = vector.extract %acc[0] : vector<32xf32> from vector<4x32xf32>
    vector.transfer_write %acc0, %out[%arg2, %c0] {in_bounds = [true]} : vector<32xf32>, memref<16x32xf32>
  }
  return
}

// -----

// The read indexes the panel itself with the loop's variable: the same
// prefetch on its indices. A 64-byte row takes one. Four accumulators, as
// four values.
// CHECK-LABEL: func.func @kiln_fn
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK: %[[AHEAD:.*]] = arith.addi %[[K]], %c128
// CHECK: memref.prefetch %arg0[%{{.*}}, %[[AHEAD]], %c0{{.*}}], read, locality<2>, data
// CHECK-NOT: memref.prefetch
func.func @kiln_fn(%arg0: memref<64x256x16xf32>, %arg1: memref<256xf32>, %out: memref<64x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %cst = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<16xf32>
  scf.for %arg2 = %c0 to %c64 step %c1 {
    %acc:4 = scf.for %k = %c0 to %c256 step %c1 iter_args(%a = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero)
        -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
      %b = vector.load %arg0[%arg2, %k, %c0] : memref<64x256x16xf32>, vector<16xf32>
      %x = memref.load %arg1[%k] : memref<256xf32>
      %xb = vector.broadcast %x : f32 to vector<16xf32>
      %r = vector.fma %xb, %b, %a : vector<16xf32>
      scf.yield %r, %a1, %a2, %a3 : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
    }
    vector.store %acc#0, %out[%arg2, %c0] : memref<64x16xf32>, vector<16xf32>
  }
  return
}

// -----

// Left alone: a filter too small to stream (16 KiB, below min-stream-bytes),
// a loop that carries no vector, a read along the row's own contiguous
// dimension (the loop steps through one row: nothing to run ahead of), a
// tile of one accumulator row (a GEMV waits on its loads already), and rows
// that 64 passes of an outer loop read again (after the first pass they
// come from cache).
// CHECK-LABEL: func.func @kiln_fn
// CHECK-NOT: memref.prefetch
func.func @kiln_fn(%small: memref<128x32xf32>, %big: memref<512x64xf32>, %out: memref<32xf32>, %out2: memref<512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c512 = arith.constant 512 : index
  %cst = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<32xf32>
  %z4 = arith.constant dense<0.0> : vector<4x32xf32>
  %acc = scf.for %k = %c0 to %c128 step %c1 iter_args(%a = %z4) -> (vector<4x32xf32>) {
    %b = vector.load %small[%k, %c0] : memref<128x32xf32>, vector<32xf32>
    %r = vector.insert %b, %a [0] : vector<32xf32> into vector<4x32xf32>
    scf.yield %r : vector<4x32xf32>
  }
  %acc0 = vector.extract %acc[0] : vector<32xf32> from vector<4x32xf32>
  vector.store %acc0, %out[%c0] : memref<32xf32>, vector<32xf32>
  %gemv = scf.for %k = %c0 to %c512 step %c1 iter_args(%a = %zero) -> (vector<32xf32>) {
    %b = vector.load %big[%k, %c0] : memref<512x64xf32>, vector<32xf32>
    %r = arith.addf %a, %b : vector<32xf32>
    scf.yield %r : vector<32xf32>
  }
  vector.store %gemv, %out[%c0] : memref<32xf32>, vector<32xf32>
  %c64 = arith.constant 64 : index
  scf.for %m = %c0 to %c64 step %c1 {
    %tile = scf.for %k = %c0 to %c512 step %c1 iter_args(%a = %z4) -> (vector<4x32xf32>) {
      %b = vector.load %big[%k, %c0] : memref<512x64xf32>, vector<32xf32>
      %r = vector.insert %b, %a [1] : vector<32xf32> into vector<4x32xf32>
      scf.yield %r : vector<4x32xf32>
    }
    %t0 = vector.extract %tile[1] : vector<32xf32> from vector<4x32xf32>
    vector.store %t0, %out[%c0] : memref<32xf32>, vector<32xf32>
  }
  scf.for %k = %c0 to %c512 step %c1 {
    %b = vector.load %big[%k, %c0] : memref<512x64xf32>, vector<32xf32>
    vector.store %b, %out2[%c0] : memref<512xf32>, vector<32xf32>
  }
  %z16 = arith.constant dense<0.0> : vector<32xf32>
  %acc2 = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %z16) -> (vector<32xf32>) {
    %b = vector.load %big[%c0, %j] : memref<512x64xf32>, vector<32xf32>
    %r = arith.addf %a, %b : vector<32xf32>
    scf.yield %r : vector<32xf32>
  }
  vector.store %acc2, %out[%c0] : memref<32xf32>, vector<32xf32>
  return
}
