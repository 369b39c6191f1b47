"""Canon layers (Allen-Zhu 2025, arXiv 2512.17351): h'_t = h_t + sum_s w[:, s] h_{t-3+s}, by hand; a zero kernel is no
Canon layer (the plain model's output exactly); the model stays causal with every point on, through the whole forward
and through the tail-only paths evaluation uses; the flag names its runs and refuses an unknown point."""

import pytest
import torch

from pebench.config import ConfigFlags, resolve_config
from pebench.model.canon import Canon
from pebench.model.decoder import DecoderLM
from pebench.util.errors import UsageError
from support import tiny_model_config


def test_a_canon_layer_is_the_papers_residual_convolution_by_hand():
    torch.manual_seed(0)
    layer = Canon(3).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    w = layer.weight
    want = x.clone()
    for b in range(2):
        for t in range(6):
            for c in range(3):
                want[b, t, c] += sum(float(w[c, s]) * float(x[b, t - 3 + s, c]) for s in range(4) if t - 3 + s >= 0)
    assert torch.allclose(layer(x), want, atol=1e-12)


def test_a_zero_kernel_is_no_canon_layer_and_a_learned_one_changes_the_output():
    torch.manual_seed(0)
    canon = DecoderLM(tiny_model_config("none", canon="ABCD")).double()
    torch.manual_seed(0)
    plain = DecoderLM(tiny_model_config("none")).double()
    plain.load_state_dict({k: v for k, v in canon.state_dict().items() if "canon" not in k})
    assert sum(1 for k in canon.state_dict() if "canon" in k) == 4 * 2  # four points in each of two blocks
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert not torch.allclose(canon(x), plain(x))
        for name, p in canon.named_parameters():
            if "canon" in name:
                p.zero_()
        assert torch.allclose(canon(x), plain(x), atol=1e-12)


@pytest.mark.parametrize("points", ["ABCD", "CD", "B"])
def test_the_model_stays_causal_and_the_tail_paths_agree(points):
    """Changing token 9 changes nothing before it; logits_tail and logits_from (the evaluation's shortcuts, which
    run the last layer from a start) equal the whole forward's rows, though Canon-C and D read 3 tokens back."""
    torch.manual_seed(1)
    m = DecoderLM(tiny_model_config("rope", canon=points)).double().eval()
    x = torch.randint(0, 256, (3, 20))
    other = x.clone()
    other[:, 9] = (x[:, 9] + 1) % 256
    with torch.no_grad():
        a, b = m(x), m(other)
        assert torch.allclose(a[:, :9], b[:, :9], atol=1e-12) and not torch.allclose(a[:, 9:], b[:, 9:])
        assert torch.allclose(m.logits_tail(x, 12), a[:, 12:], atol=1e-6)  # its last layer attends in float32
        same = x.clone()
        same[1:, :12] = x[0, :12]  # rows sharing their first 12 tokens
        assert torch.allclose(m.logits_from(same, 12), m(same)[:, 12:], atol=1e-6)


def test_the_canon_flag_joins_the_name_and_refuses_an_unknown_point():
    cfg, _ = resolve_config(ConfigFlags(canon="ABCD"))
    assert cfg.model.canon == "ABCD" and cfg.name == "tiny-canon"
    assert resolve_config(ConfigFlags(canon="AC"))[0].name == "tiny-canon-AC"
    with pytest.raises(UsageError, match="--canon must be letters of ABCD"):
        resolve_config(ConfigFlags(canon="ABE"))
    with pytest.raises(UsageError, match="each at most once"):
        resolve_config(ConfigFlags(canon="AA"))
