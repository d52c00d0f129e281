"""`kiln import` on ONNX exports of small, randomly initialized models of
many architectures (transformers' configs, nothing downloaded): each is
exported with torch.onnx.export (opset 17), imported, run once by `kiln run`
and compared with PyTorch's output. Prints `NAME: ok` or `NAME: FAILED ...`
per model (for lit/cli/import-architectures.test).

    python3 import_architectures.py OUT_DIR KILN [NAME ...]
"""
import os
import subprocess
import sys

import numpy as np
import torch
import transformers as T

out, kiln = sys.argv[1], sys.argv[2]
ids = None


def models():
    global ids
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (1, 16))
    image = torch.randn(1, 3, 64, 64)
    text = dict(vocab_size=100, max_position_embeddings=64)
    return {
        # Encoders: attention with padding-free masks, GELU, LayerNorm.
        "distilbert": (lambda: T.DistilBertModel(T.DistilBertConfig(
            vocab_size=100, dim=64, n_layers=2, n_heads=4, hidden_dim=128)), ids),
        "roberta": (lambda: T.RobertaModel(T.RobertaConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, **text),
            add_pooling_layer=False), ids),
        "bart_encoder": (lambda: T.BartModel(T.BartConfig(
            d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, **text)).encoder, ids),
        # Decoders: causal masks (GPT-Neo's as a boolean constant), RMSNorm,
        # rotary positions, gated SiLU MLPs.
        "gpt_neo": (lambda: T.GPTNeoModel(T.GPTNeoConfig(
            hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=8,
            **text)), ids),
        "llama": (lambda: T.LlamaModel(T.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, **text)), ids),
        "qwen2": (lambda: T.Qwen2Model(T.Qwen2Config(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, **text)), ids),
        # Audio: a conv feature extractor, grouped positional conv; Whisper's
        # conv stem and encoder.
        "wav2vec2": (lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32),
            conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2, num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4)), torch.randn(1, 1600)),
        "whisper_encoder": (lambda: T.WhisperModel(T.WhisperConfig(
            vocab_size=100, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0, d_model=64,
            encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=50)).encoder,
            torch.randn(1, 16, 100)),
        # Vision: patch embeddings, windows (Swin), mixed conv and attention
        # (MobileViT, SegFormer), ConvNeXt V2's global response norm.
        "vit": (lambda: T.ViTModel(T.ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=64,
            patch_size=16), add_pooling_layer=False), image),
        "clip_vision": (lambda: T.CLIPVisionModel(T.CLIPVisionConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=64,
            patch_size=16)), image),
        "swin": (lambda: T.SwinModel(T.SwinConfig(
            image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4)), image),
        "mobilevit": (lambda: T.MobileViTModel(T.MobileViTConfig(
            image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])), image),
        "segformer": (lambda: T.SegformerModel(T.SegformerConfig(
            hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 4, 8],
            decoder_hidden_size=64)), image),
        "convnextv2": (lambda: T.ConvNextV2Model(T.ConvNextV2Config(
            hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])), image),
    }


class FirstOutput(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        o = self.m(x)
        return o.last_hidden_state if hasattr(o, "last_hidden_state") else o[0]


NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)


def randomized(model):
    """`model` with its norms' scales around 1 and every other all-zero
    weight drawn at random: some initializations draw norm scales around 0
    or zero a block's last layer, and MobileViT's output then underflowed
    to zeros, which a comparison checks nothing with."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, NORMS) and getattr(m, "weight", None) is not None:
                m.weight.normal_(1.0, 0.02)
        for name, p in model.named_parameters():
            if name.endswith("weight") and not p.any():
                p.normal_(0.0, 0.02)
    return model


def check(name, build, x):
    model = FirstOutput(randomized(build().eval())).eval()
    with torch.no_grad():
        y = model(x).numpy()
    if not np.abs(y).max() > 0:
        return "FAILED: PyTorch's output is all zeros (nothing to compare)"
    base = os.path.join(out, name)
    np.save(base + ".x.npy", x.numpy())
    torch.onnx.export(model, (x,), base + ".onnx", opset_version=17, dynamo=False)
    r = subprocess.run([kiln, "import", "--force", base + ".onnx", "-o", base + ".mlir"], capture_output=True,
                       text=True)
    if r.returncode:
        return "FAILED kiln import: " + r.stderr.strip()[:400]
    r = subprocess.run([kiln, "run", base + ".mlir", "-i", f"0={base}.x.npy", "-o", base + ".out", "-n", "0"],
                       capture_output=True, text=True)
    if r.returncode:
        return "FAILED kiln run: " + r.stderr.strip()[:400]
    got = np.load(os.path.join(base + ".out", "out0.npy"))
    rel = float(np.linalg.norm(got - y) / max(float(np.linalg.norm(y)), 1e-30))
    return "ok" if got.shape == y.shape and rel <= 1e-4 else f"FAILED: relative L2 {rel:.2e}, shape {got.shape}"


all_models = models()
for name in sys.argv[3:] or list(all_models):
    build, x = all_models[name]
    try:
        print(f"{name}: {check(name, build, x)}", flush=True)
    except Exception as e:  # noqa: BLE001 (an exporter's failure is the model's line, not the script's end)
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
