"""The models kiln's zoo and peer benchmarks use, built with fixed seeds and
random weights (nothing is downloaded): torchvision CNNs, ViT and Swin
(1x3x224x224 images: resnet50, mobilenet_v2, efficientnet_b0,
convnext_tiny, regnet_y_400mf, vit_b_16, swin_t, ...), a transformers
BERT-base encoder (sequence 128, token ids in), a T5-small encoder
(RMSNorm, relative position bias) and a GPT-2 decoder
(sequence 128: causal self-attention, GELU with tanh, Conv1D weights stored
[in, out] and applied as addmm)."""
import torch


def build_model(name, batch=1):
    """The model and its input, with fixed random weights (no download):
    a torchvision CNN (batch x 3 x 224 x 224 images) or a transformers
    model (batch x 128 token ids in). The weights do not depend on
    `batch`; the input's first rows are batch 1's."""
    torch.manual_seed(0)
    if name == "bert":
        from transformers import BertConfig, BertModel
        cfg = BertConfig()
        cfg._attn_implementation = "eager"
        bert = BertModel(cfg, add_pooling_layer=False).eval()
        # torch-mlir's importer cannot map registered buffers: pass what
        # they hold (positions, token types) explicitly and drop them.
        for mod in bert.modules():
            for k in list(mod._buffers.keys()):
                del mod._buffers[k]

        class Encoder(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids):
                pos = torch.arange(ids.shape[1]).unsqueeze(0)
                return self.m(input_ids=ids, token_type_ids=torch.zeros_like(ids),
                              position_ids=pos).last_hidden_state

        return Encoder(bert).eval(), token_ids(cfg.vocab_size, batch)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2Model
        cfg = GPT2Config()
        cfg._attn_implementation = "eager"
        gpt = GPT2Model(cfg).eval()
        for mod in gpt.modules():
            for k in list(mod._buffers.keys()):
                del mod._buffers[k]

        class Decoder(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids):
                pos = torch.arange(ids.shape[1]).unsqueeze(0)
                return self.m(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state

        return Decoder(gpt).eval(), token_ids(cfg.vocab_size, batch)
    if name == "t5_encoder":
        # T5-small's encoder: RMSNorm (T5LayerNorm), relative position
        # bias, ReLU FFN, no biases.
        from transformers import T5Config, T5EncoderModel
        cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64, vocab_size=32128)
        cfg._attn_implementation = "eager"
        t5 = T5EncoderModel(cfg).eval()

        class T5Encoder(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids):
                return self.m(input_ids=ids).last_hidden_state

        return T5Encoder(t5).eval(), token_ids(cfg.vocab_size, batch)
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    # Some classifiers start at zero (torchvision's ViT head): every output
    # would be 0 whatever the layers before it computed, and a comparison
    # against the framework would check nothing. Random weights instead.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and not m.weight.any():
                m.weight.normal_(0.0, 0.02)
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.02)
    return model, torch.cat([torch.randn(1, 3, 224, 224) for _ in range(batch)])


def token_ids(vocab, batch):
    """batch x 128 token ids drawn after the weights (row 0: batch 1's)."""
    return torch.cat([torch.randint(0, vocab, (1, 128)) for _ in range(batch)])


def onnx_export(model, x, path, **kwargs):
    """torch.onnx.export (the TorchScript exporter, opset 17) of `model` on
    `x`. While tracing, transformers (5.x) derives a packed-sequence mask
    from the position ids with torch.diff, which that exporter has no
    symbolic for; with positions 0..L-1 in every row that mask is "one
    sequence per row", what the function returns outside tracing (None),
    so the export leaves it out: the same model, exportable."""
    import contextlib
    with contextlib.ExitStack() as stack:
        try:
            from transformers import masking_utils
        except ImportError:
            masking_utils = None
        if masking_utils is not None and hasattr(masking_utils, "find_packed_sequence_indices"):
            saved = masking_utils.find_packed_sequence_indices
            masking_utils.find_packed_sequence_indices = lambda position_ids: None
            stack.callback(setattr, masking_utils, "find_packed_sequence_indices", saved)
        torch.onnx.export(model, x, path, opset_version=17, dynamo=False, **kwargs)
