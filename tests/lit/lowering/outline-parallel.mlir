// RUN: %kiln-opt %s --kiln-outline-parallel | FileCheck %s
// RUN: %kiln-opt %s --pass-pipeline="builtin.module(kiln-lower-to-llvm)" | FileCheck %s --check-prefix=LLVM

// A forall over 4 x 8 tiles becomes one launch of 32 linearized iterations;
// the body gets the captured buffers and rebuilds each tile's indices.
// CHECK-LABEL: func.func @kiln_fn(
// CHECK: %[[N:.*]] = arith.constant 32 : index
// CHECK: call @kiln_par_launch_kiln_fn_0(%[[N]], %arg0, %arg1)
// CHECK-NOT: scf.forall
// CHECK: func.func private @kiln_fn_par0(%[[B:.*]]: index, %[[E:.*]]: index, %{{.*}}: memref<64x256xf32>, %{{.*}}: memref<64x256xf32>)
// CHECK: scf.for %[[T:.*]] = %[[B]] to %[[E]]
// CHECK: arith.remui %[[T]]
// CHECK: arith.divui %[[T]]
// CHECK: memref.subview
// CHECK: func.func private @kiln_par_launch_kiln_fn_0(index, memref<64x256xf32>, memref<64x256xf32>) attributes {kiln.parallel_body = @kiln_fn_par0}

// After lowering: the launcher stores the captures in stack slots and hands a
// task function to the runtime's kiln_parallel_for (grain 1).
// LLVM: llvm.func internal @kiln_par_launch_kiln_fn_0(%[[N:.*]]: i64, %[[A:.*]]: !llvm.ptr, %[[C:.*]]: !llvm.ptr)
// LLVM: llvm.alloca
// LLVM: llvm.store %[[A]]
// LLVM: llvm.store %[[C]]
// LLVM: %[[F:.*]] = llvm.mlir.addressof @kiln_fn_par0_task
// LLVM: llvm.call @kiln_parallel_for(%[[N]], %{{.*}}, %[[F]], %{{.*}})
// LLVM: llvm.func internal @kiln_fn_par0_task(%{{.*}}: !llvm.ptr, %[[B:.*]]: i64, %[[E:.*]]: i64)
// LLVM: llvm.call @kiln_fn_par0(%[[B]], %[[E]]
// LLVM: llvm.func @kiln_entry
func.func @kiln_fn(%in: memref<64x256xf32>, %out: memref<64x256xf32>) {
  scf.forall (%i, %j) = (0, 0) to (64, 256) step (16, 32) {
    %a = memref.subview %in[%i, %j] [16, 32] [1, 1] : memref<64x256xf32> to memref<16x32xf32, strided<[256, 1], offset: ?>>
    %b = memref.subview %out[%i, %j] [16, 32] [1, 1] : memref<64x256xf32> to memref<16x32xf32, strided<[256, 1], offset: ?>>
    memref.copy %a, %b : memref<16x32xf32, strided<[256, 1], offset: ?>> to memref<16x32xf32, strided<[256, 1], offset: ?>>
  }
  return
}
