"""kiln with PyTorch: DLPack in and out, torch.compile(backend="kiln") on a
torchvision ResNet-18 and a small transformers BERT (random weights, no
downloads), the fallback to PyTorch, and load_onnx. Skipped, saying why,
where torch, torch-mlir, torchvision, transformers or onnx are missing
(tests/python/run_pytest.sh runs this file in the peers venv that has them)."""

import os
import warnings

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch", reason="torch is not installed in this Python")


def need(module):
    return pytest.importorskip(module, reason=f"{module} is not installed in this Python")


ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = tosa.add %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    r = kiln.Runtime(threads=2, cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield r
    r.close()


def test_torch_tensors_in_and_out_without_copies(rt):
    m = rt.load(ADD)
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.ones(2, 3)
    addr, copied = kiln._kiln._input_address(a)
    assert addr == a.data_ptr() and not copied
    (y,) = m.run([a, b], output="torch")
    assert isinstance(y, torch.Tensor) and torch.equal(y, a + b)
    out = torch.empty(2, 3)
    (r,) = m.run([a, b], out=[out])
    assert r is out and torch.equal(out, a + b)
    # a tensor that requires grad is read through detach(); a transposed one is copied
    w = torch.ones(2, 3, requires_grad=True)
    np.testing.assert_array_equal(m(w, b), 2 * np.ones((2, 3), np.float32))
    t = torch.arange(6, dtype=torch.float32).reshape(3, 2).t()
    np.testing.assert_array_equal(m(t, b), t.numpy() + 1)
    # DLPack capsules: torch reads them without a copy
    (cap,) = m.run([a, b], output="dlpack")
    assert torch.equal(torch.utils.dlpack.from_dlpack(cap), a + b)


def _compiled(model, *args, **kwargs):
    need("torch_mlir")
    import kiln.torch_backend as kb

    torch._dynamo.reset()
    before = dict(kb.stats)
    c = torch.compile(model, backend="kiln")
    with torch.no_grad():
        got = c(*args, **kwargs)
        want = model(*args, **kwargs)
    return got, want, {k: kb.stats[k] - before[k] for k in before}


def test_torch_compile_resnet18():
    tv = need("torchvision")
    torch.manual_seed(0)
    model = tv.models.resnet18().eval()
    x = torch.randn(1, 3, 224, 224)
    got, want, stats = _compiled(model, x)
    assert stats["graphs_compiled"] >= 1 and stats["graphs_fallback"] == 0, stats
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_torch_compile_small_bert():
    tf = need("transformers")
    torch.manual_seed(0)
    cfg = tf.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    model = tf.BertModel(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 10:] = 0
    got, want, stats = _compiled(model, input_ids=ids, attention_mask=mask)
    assert stats["graphs_compiled"] >= 1 and stats["graphs_fallback"] == 0, stats
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)


def test_torch_compile_falls_back_once_with_a_warning():
    need("torch_mlir")
    import kiln.torch_backend as kb

    def f(x):
        return torch.erfinv(x * 0.5) + 1  # no TOSA lowering in torch-mlir

    kb._warned.clear()
    x = torch.rand(8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got, want, stats = _compiled(f, x)
        torch._dynamo.reset()
        _compiled(f, x)  # the same reason again: no second warning
    ours = [m for m in w if "kiln torch.compile backend" in str(m.message)]
    assert len(ours) == 1 and "runs in PyTorch" in str(ours[0].message), [str(m.message) for m in w]
    assert stats["graphs_fallback"] == 1
    torch.testing.assert_close(got, want)


def test_load_onnx(rt, tmp_path):
    need("onnx")
    need("torch_mlir")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    path = tmp_path / "mlp.onnx"
    try:
        torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"], dynamo=False)
    except Exception as e:  # the exporter's own dependencies
        pytest.skip(f"torch.onnx.export failed here: {e}")
    m = rt.load_onnx(path)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-5, atol=1e-5)
