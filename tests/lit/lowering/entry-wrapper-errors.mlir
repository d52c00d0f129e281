// RUN: not %kiln-opt %s --kiln-entry-wrapper 2>&1 | FileCheck %s
// CHECK: kiln-entry-wrapper: parameter 1 is 'i64', expected a bare buffer pointer
llvm.func @kiln_fn(%a: !llvm.ptr, %n: i64) {
  llvm.return
}
