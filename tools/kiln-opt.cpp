// kiln-opt: mlir-opt with kiln's passes and pipeline stages registered, for
// lit tests of each lowering stage.
#include "lowering/graph/Passes.h"
#include "lowering/pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  kiln::lowering::registerKilnPassesAndPipelines();
  mlir::DialectRegistry registry;
  kiln::lowering::registerKilnDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kiln-opt: MLIR optimizer with kiln's passes\n", registry));
}
