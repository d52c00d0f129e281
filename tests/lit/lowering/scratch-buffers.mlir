// RUN: %kiln-opt %s --split-input-file --kiln-scratch-buffers | FileCheck %s
// RUN: %kiln-opt %s --split-input-file --kiln-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// kiln_fn's top-level temporaries become views of one scratch buffer the
// runtime hands out (kiln_scratch_acquire), each at its own 64-byte-aligned
// offset; their deallocs go and the buffer is released before the return.
// A temporary inside a loop and one of dynamic size stay allocations.
// CHECK: module attributes {kiln.scratch_bytes = 8576 : i64}
// CHECK: func.func private @kiln_scratch_acquire(i64) -> memref<8576xi8>
// CHECK: func.func private @kiln_scratch_release(memref<8576xi8>)
// CHECK-LABEL: func.func @kiln_fn
// CHECK: %[[N:.*]] = arith.constant 8576 : i64
// CHECK: %[[S:.*]] = call @kiln_scratch_acquire(%[[N]]) : (i64) -> memref<8576xi8>
// CHECK: %[[O0:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = memref.view %[[S]][%[[O0]]][] : memref<8576xi8> to memref<4x100xf32>
// CHECK: %[[O1:.*]] = arith.constant 1600 : index
// CHECK: %[[B:.*]] = memref.view %[[S]][%[[O1]]][] : memref<8576xi8> to memref<1000xi8>
// CHECK: %[[O2:.*]] = arith.constant 2624 : index
// CHECK: memref.view %[[S]][%[[O2]]][] : memref<8576xi8> to memref<8x186xf32>
// CHECK: scf.for
// CHECK:   memref.alloc() : memref<16xf32>
// CHECK:   memref.dealloc
// CHECK: }
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-NOT: memref.dealloc %[[A]]
// CHECK-NOT: memref.dealloc %[[B]]
// CHECK: call @kiln_scratch_release(%[[S]]) : (memref<8576xi8>) -> ()
// CHECK-NEXT: return

// The runtime calls take and return bare pointers; the temporaries in the
// loop and of dynamic size still come from malloc.
// LLVM: llvm.func @kiln_scratch_acquire(i64) -> !llvm.ptr
// LLVM: llvm.func @kiln_scratch_release(!llvm.ptr)
// LLVM-LABEL: llvm.func @kiln_fn
// LLVM: llvm.call @kiln_scratch_acquire(%{{.*}}) : (i64) -> !llvm.ptr
// LLVM: llvm.call @malloc
// LLVM: llvm.call @free
// LLVM: llvm.call @malloc
// LLVM: llvm.call @free
// LLVM-NOT: llvm.call @free
// LLVM: llvm.call @kiln_scratch_release(%{{.*}}) : (!llvm.ptr) -> ()
// LLVM-NEXT: llvm.return
func.func @kiln_fn(%in: memref<4x100xf32>, %size: memref<index>, %out: memref<4x100xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x100xf32>
  %b = memref.alloc() : memref<1000xi8>
  %c = memref.alloc() {alignment = 64 : i64} : memref<8x186xf32>
  memref.copy %in, %a : memref<4x100xf32> to memref<4x100xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<16xf32>
    %v = memref.load %in[%i, %i] : memref<4x100xf32>
    memref.store %v, %t[%i] : memref<16xf32>
    %w = memref.load %t[%i] : memref<16xf32>
    memref.store %w, %a[%i, %c0] : memref<4x100xf32>
    memref.dealloc %t : memref<16xf32>
  }
  %n = memref.load %size[] : memref<index>
  %d = memref.alloc(%n) : memref<?xf32>
  %x = memref.load %in[%c0, %c0] : memref<4x100xf32>
  memref.store %x, %d[%c0] : memref<?xf32>
  %y = memref.load %d[%c0] : memref<?xf32>
  memref.store %y, %a[%c1, %c0] : memref<4x100xf32>
  memref.dealloc %d : memref<?xf32>
  memref.copy %a, %out : memref<4x100xf32> to memref<4x100xf32>
  memref.dealloc %a : memref<4x100xf32>
  memref.dealloc %b : memref<1000xi8>
  memref.dealloc %c : memref<8x186xf32>
  return
}

// -----

// No temporaries: nothing to acquire.
// CHECK-NOT: kiln.scratch_bytes
// CHECK-LABEL: func.func @kiln_fn
// CHECK-NOT: kiln_scratch_acquire
func.func @kiln_fn(%in: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %in, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// A function that calls another of the module is left alone: the callee
// could free a temporary.
// CHECK-LABEL: func.func @kiln_fn
// CHECK-NOT: kiln_scratch_acquire
// CHECK: memref.alloc
func.func @helper(%m: memref<4xf32>) {
  return
}
func.func @kiln_fn(%in: memref<4xf32>, %out: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  call @helper(%a) : (memref<4xf32>) -> ()
  memref.copy %in, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  return
}
