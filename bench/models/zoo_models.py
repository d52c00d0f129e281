"""The models kiln's zoo and peer benchmarks use, built with fixed seeds and
random weights (nothing is downloaded): torchvision CNNs and ViT
(1x3x224x224 images) and a transformers BERT-base encoder (sequence 128,
token ids in)."""
import torch


def build_model(name):
    """The model and its input, with fixed random weights (no download):
    a torchvision CNN (1x3x224x224 image) or "bert" (a transformers
    BERT-base encoder, sequence 128, token ids in)."""
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

        return Encoder(bert).eval(), torch.randint(0, cfg.vocab_size, (1, 128))
    import torchvision
    return getattr(torchvision.models, name)(weights=None).eval(), torch.randn(1, 3, 224, 224)
