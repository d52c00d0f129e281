import os
import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_bin_dir, "..", "tests", "lit-out")

config.substitutions.append(("%kiln_src", config.kiln_src_dir))  # before %kiln
config.substitutions.append(("%kiln-opt", os.path.join(config.kiln_bin_dir, "kiln-opt")))
config.substitutions.append(("%kiln", os.path.join(config.kiln_bin_dir, "kiln")))
config.substitutions.append(("%mlir-opt", config.mlir_opt))
config.substitutions.append(("%inputs", os.path.join(config.kiln_src_dir, "tests", "e2e", "inputs")))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("not ", "not "))
config.environment["PATH"] = os.pathsep.join(["/usr/lib/llvm-22/bin", config.environment.get("PATH", os.environ.get("PATH", ""))])

# The CLI's persistent compile cache goes to the build tree, never $HOME.
config.environment["KILN_CACHE_DIR"] = os.path.join(config.test_exec_root, "kiln-cache")
