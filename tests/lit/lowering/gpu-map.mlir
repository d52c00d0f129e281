// The GPU stages: parallel loops flattened into blocks of 256 threads, one
// kernel per loop nest, constants sunk, launches left in host code; then the
// kernels in LLVM dialect + NVVM with bare-pointer parameters and libdevice
// calls for math.
// RUN: %kiln-opt %s --kiln-gpu-map | FileCheck %s
// RUN: %kiln-opt %s --kiln-gpu-map --kiln-gpu-to-nvvm | FileCheck %s --check-prefix=NVVM
// RUN: %kiln-opt %s --kiln-strided-copies=as-linalg | FileCheck %s --check-prefix=COPY

#map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @kiln_fn(
// CHECK-SAME: %[[A:.*]]: memref<4x1000xf32>, %[[B:.*]]: memref<4x1000xf32>, %[[OUT:.*]]: memref<4x1000xf32>
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @kiln_fn_kernel::@kiln_fn_kernel blocks in (%[[C16]], %[[C1]], %[[C1]]) threads in (%[[C256]], %[[C1]], %[[C1]])
// CHECK-SAME: %[[A]] : memref<4x1000xf32>, %[[B]] : memref<4x1000xf32>, %[[OUT]] : memref<4x1000xf32>
// The padded copy into a view becomes a kernel of its own; the view folds
// into its stores.
// CHECK: gpu.launch_func @kiln_fn_kernel_0::@kiln_fn_kernel
// CHECK-NOT: memref.subview
// CHECK: return
// CHECK: gpu.module @kiln_fn_kernel
// CHECK: gpu.func @kiln_fn_kernel
// CHECK-SAME: kernel
// CHECK: gpu.block_id x
// CHECK: gpu.thread_id x
// CHECK: arith.cmpi ult
// CHECK: math.exp

// NVVM: gpu.module @kiln_fn_kernel
// NVVM: llvm.func @__nv_expf(f32) -> f32
// NVVM: llvm.func @kiln_fn_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr
// NVVM-SAME: nvvm.kernel
// NVVM: nvvm.read.ptx.sreg.ctaid.x
// NVVM: llvm.call @__nv_expf

// COPY: linalg.copy ins(%{{.*}} : memref<1x3x4xf32>) outs(%{{.*}} : memref<1x3x4xf32, strided<[30, 6, 1], offset: 7>>)
func.func @kiln_fn(%arg0: memref<4x1000xf32>, %arg1: memref<4x1000xf32>, %arg2: memref<4x1000xf32>,
                   %x: memref<1x3x4xf32>, %padded: memref<1x5x6xf32>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%arg0, %arg1 : memref<4x1000xf32>, memref<4x1000xf32>) outs(%arg2 : memref<4x1000xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.addf %in, %in_1 : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  %view = memref.subview %padded[0, 1, 1] [1, 3, 4] [1, 1, 1] : memref<1x5x6xf32> to memref<1x3x4xf32, strided<[30, 6, 1], offset: 7>>
  memref.copy %x, %view : memref<1x3x4xf32> to memref<1x3x4xf32, strided<[30, 6, 1], offset: 7>>
  return
}
