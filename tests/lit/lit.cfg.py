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

# torch-mlir's tools (optional): `kiln import` tests run where they are
# installed (bench/peers/setup.sh) and are UNSUPPORTED elsewhere.
def _find_import_tools():
    candidates = [os.environ.get("KILN_IMPORT_TOOLS", "")]
    candidates += os.environ.get("PATH", "").split(os.pathsep)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append(os.environ.get("KILN_PEERS_VENV", os.path.join(cache, "kiln", "peers-venv")) + "/bin")
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "torch-mlir-opt")) and os.path.exists(os.path.join(d, "python3")):
            return d
    return None

_tools = _find_import_tools()
if _tools:
    config.available_features.add("torch-mlir")
    config.environment["KILN_IMPORT_TOOLS"] = _tools
    config.substitutions.append(("%peers-python", os.path.join(_tools, "python3")))
    config.substitutions.append(("%import-tools", _tools))
    # transformers beside them (bench/peers/setup.sh installs it): looked
    # for on disk, as importing it takes seconds.
    import glob
    if glob.glob(os.path.join(os.path.dirname(_tools), "lib", "python3*", "site-packages", "transformers")):
        config.available_features.add("transformers")

# Node.js (optional) renders the profile report's scripts in a test.
import shutil
_node = shutil.which("node") or shutil.which("nodejs")
if _node:
    config.available_features.add("node")
    config.substitutions.append(("%node", _node))

# The CUDA toolkit's ptxas (optional) assembles generated PTX in tests; a GPU
# (optional) runs it: without one, tests check the error instead.
_cuda_bin = "/usr/local/cuda/bin"
config.environment["PATH"] = os.pathsep.join([config.environment["PATH"], _cuda_bin])
if shutil.which("ptxas", path=config.environment["PATH"]):
    config.available_features.add("ptxas")
if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
    config.available_features.add("gpu")

# Chromium (optional, Debian's `chromium`): a test renders the profile's HTML
# report headless and checks that its scripts ran.
_chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if _chromium:
    config.available_features.add("chromium")
    config.substitutions.append(("%chromium", _chromium))

# Builds under a sanitizer (KILN_SANITIZE): the runtime reserves terabytes of
# address space, so tests that set `ulimit -v` cannot run there.
if getattr(config, "kiln_sanitize", ""):
    config.available_features.add("sanitizer")
