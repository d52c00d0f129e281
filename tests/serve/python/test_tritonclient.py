"""kiln serve driven by Triton's own Python clients (tritonclient, HTTP and
gRPC), unchanged: what a user of Triton or KServe points at kiln.

Run by run_pytest.sh (a ctest) in a venv it makes from PyPI; KILN_SERVE_BIN
names the server program.
"""
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import pytest

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

MODEL = """
func.func @main(%x: tensor<?x4xf32> {kiln.name = "x"}) -> (tensor<?x4xf32> {kiln.name = "y"}) {
  %w = "tosa.const"() <{values = dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>}> : () -> tensor<1x4xf32>
  %a = tosa.add %x, %w : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x4xf32>
  return %a : tensor<?x4xf32>
}
"""
CONFIG = """
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000 }
"""
WEIGHT = np.array([1, 2, 3, 4], dtype=np.float32)


@pytest.fixture(scope="module")
def server():
    binary = os.environ.get("KILN_SERVE_BIN")
    if not binary or not os.path.exists(binary):
        pytest.skip("KILN_SERVE_BIN does not name the kiln-serve program")
    repo = tempfile.mkdtemp(prefix="kiln-tritonclient-")
    for name, config in (("adder", CONFIG), ("plain", None)):
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "1", "model.mlir"), "w") as f:
            f.write(MODEL)
        if config:
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(config)
    log = open(os.path.join(repo, "serve.log"), "w+")
    proc = subprocess.Popen([binary, "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                             "--metrics-port", "0", "--option", "cache=off"], stderr=log)
    ports = None
    for _ in range(600):
        time.sleep(0.1)
        log.seek(0)
        m = re.search(r"ready: HTTP [\d.]+:(\d+) gRPC [\d.]+:(\d+) metrics [\d.]+:(\d+)", log.read())
        if m:
            ports = tuple(int(p) for p in m.groups())
            break
        if proc.poll() is not None:
            break
    if not ports:
        proc.kill()
        log.seek(0)
        pytest.fail("kiln-serve did not report ready:\n" + log.read())
    yield {"http": f"127.0.0.1:{ports[0]}", "grpc": f"127.0.0.1:{ports[1]}", "metrics": ports[2]}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    shutil.rmtree(repo)


def test_http_health_metadata_config(server):
    c = httpclient.InferenceServerClient(server["http"])
    assert c.is_server_live() and c.is_server_ready()
    assert c.is_model_ready("adder")
    assert c.get_server_metadata()["name"] == "kiln"
    meta = c.get_model_metadata("adder")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["outputs"][0]["name"] == "y"
    config = c.get_model_config("adder")
    assert config["max_batch_size"] == 16
    assert config["input"][0]["dims"] == [4]


def test_grpc_health_metadata_config(server):
    c = grpcclient.InferenceServerClient(server["grpc"])
    assert c.is_server_live() and c.is_server_ready()
    assert c.is_model_ready("adder")
    meta = c.get_model_metadata("adder", as_json=True)
    assert meta["inputs"][0]["shape"] == ["-1", "4"]
    config = c.get_model_config("adder", as_json=True)["config"]
    assert config["max_batch_size"] == 16
    assert config["input"][0]["data_type"] == "TYPE_FP32"


@pytest.mark.parametrize("binary", [True, False])
def test_http_infer(server, binary):
    c = httpclient.InferenceServerClient(server["http"])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("y", binary_data=binary)
    result = c.infer("adder", [inp], outputs=[out], request_id="r-1")
    np.testing.assert_array_equal(result.as_numpy("y"), x + WEIGHT)
    assert result.get_response()["id"] == "r-1"


def test_grpc_infer(server):
    c = grpcclient.InferenceServerClient(server["grpc"])
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = c.infer("plain", [inp], outputs=[grpcclient.InferRequestedOutput("y")])
    np.testing.assert_array_equal(result.as_numpy("y"), x + WEIGHT)


def test_errors_are_the_protocols(server):
    h = httpclient.InferenceServerClient(server["http"])
    g = grpcclient.InferenceServerClient(server["grpc"])
    x = np.zeros((2, 3), dtype=np.float32)
    for client, mod in ((h, httpclient), (g, grpcclient)):
        inp = mod.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException, match=r"shape \[2,3\], the model takes \[-1,4\]"):
            client.infer("adder", [inp])
        with pytest.raises(InferenceServerException, match="unknown model 'nosuch'"):
            client.infer("nosuch", [inp])
    bad = grpcclient.InferInput("x", [1, 4], "FP64")
    bad.set_data_from_numpy(np.zeros((1, 4), dtype=np.float64))
    with pytest.raises(InferenceServerException, match="datatype FP64, the model takes FP32"):
        g.infer("adder", [bad])


def test_concurrent_requests_are_batched_and_answered_each(server):
    c = grpcclient.InferenceServerClient(server["grpc"])

    def one(i):
        x = np.full((1 + i % 3, 4), float(i), dtype=np.float32)
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        return x, c.infer("adder", [inp]).as_numpy("y")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for x, y in pool.map(one, range(64)):
            np.testing.assert_array_equal(y, x + WEIGHT)
    text = urllib.request.urlopen(f"http://127.0.0.1:{server['metrics']}/metrics").read().decode()
    executions = int(re.search(r'kiln_execution_count_total\{model="adder",version="1"\} (\d+)', text).group(1))
    inferences = int(re.search(r'kiln_inference_count_total\{model="adder",version="1"\} (\d+)', text).group(1))
    assert inferences >= 64
    assert executions < 64, "no requests were merged"
