// RUN: %kiln-opt %s --kiln-lower-to-llvm | FileCheck %s
// RUN: %kiln-opt %s --kiln-lower-to-llvm | %mlir-opt --verify-diagnostics > /dev/null

// Stage 3: loops -> LLVM dialect with bare-pointer memrefs, plus the packed
// entry point `kiln_entry(ptr)` that the runtime calls.
// CHECK: llvm.func @kiln_fn(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.intr.exp
// CHECK: llvm.func @kiln_entry(%[[ARGS:.*]]: !llvm.ptr)
// CHECK: %[[S0:.*]] = llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %[[ARGS]][1]
// CHECK: %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @kiln_fn(%[[P0]], %[[P1]])
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @kiln_fn(%a: memref<4x8xf32>, %out: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
    ^bb0(%in: f32, %o: f32):
      %x = math.exp %in : f32
      linalg.yield %x : f32
  }
  return
}
