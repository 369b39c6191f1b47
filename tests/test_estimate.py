"""``pebench bench --estimate``: each figure against a direct count on a small model: parameters, training and
evaluation FLOPs (torch's FLOP counter), AdamW's state and the gradients after a real step, the tensors autograd keeps
for the backward, the live storages of an evaluation forward (a dispatch mode that watches every storage an op makes),
and, where CUDA exists, the allocator's peak; then the command's output and its errors."""

import weakref
from dataclasses import replace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from pebench.cli import app
from pebench.config import config_from_dict
from pebench.model.decoder import DecoderLM
from pebench.perf import estimate as es
from support import runner


def _cfg(pe: str, batch: int = 2, T: int = 32, **model) -> "es.Config":
    m = dict(d_model=48, n_layers=2, n_heads=4, d_mlp=192, context=T, pe=pe, **model)
    return config_from_dict(
        {"model": m, "train": {"steps": 7, "batch_size": batch}, "eval": {"multiples": [1, 4], "batch_tokens": 1024}},
        name="est",
    )


@pytest.mark.parametrize("pe", ["none", "rope", "learned", "t5", "alibi"])
def test_parameters_and_training_flops_are_the_models_own(pe):
    cfg = _cfg(pe)
    e = es.estimate(cfg, "fp32")
    model = DecoderLM(cfg.model)
    assert e.params == model.num_params()
    assert e.train_flops_per_token == model.flops_per_token(cfg.model.context)
    assert e.train_tokens == 7 * 2 * 32 and e.train_flops == e.train_tokens * e.train_flops_per_token


def test_evaluation_flops_are_a_forward_by_the_flop_counter():
    """A forward is a third of a step: 2N + 4 L T d per token (the full score matrix, as the training count)."""
    cfg = _cfg("none")
    model = DecoderLM(cfg.model).eval()
    model.set_attention_backend("math")
    e = es.estimate(cfg, "fp32", [64])
    x = torch.randint(0, 256, (3, 64))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    assert counter.get_total_flops() == 3 * 64 * e.evals[0].flops_per_token
    assert e.evals[0].flops == cfg.eval.max_tokens * e.evals[0].flops_per_token
    assert e.evals[0].rows == 1024 // 64


def test_gradients_and_adamw_moments_are_counted_after_a_real_step():
    cfg = _cfg("learned")
    model = DecoderLM(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (2, 32))
    model(x, x)[1].backward()
    opt.step()
    e = es.estimate(cfg, "fp32")
    moments = sum(v.nbytes for st in opt.state.values() for k, v in st.items() if k in ("exp_avg", "exp_avg_sq"))
    assert moments == e.optimizer_bytes
    assert sum(p.grad.nbytes for p in model.parameters()) == e.grad_bytes == e.weight_bytes


def _saved_bytes(model, B: int, T: int) -> int:
    """Bytes of the distinct storages autograd keeps for the backward of one step (parameters and buffers not)."""
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    kept = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in own:
            kept[s.data_ptr()] = s.nbytes()
        return t

    x = torch.randint(0, 256, (B, T))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x, x)
    return sum(kept.values())


@pytest.mark.parametrize("pe", ["none", "rope", "alibi"])
@pytest.mark.parametrize("B,T", [(1, 32), (1, 64)])
def test_training_activations_match_what_autograd_keeps(pe, B, T):
    """fp32, the fused path (NoPE, RoPE's two rotated copies) and a materialized logit term (ALiBi), within 2%."""
    cfg = _cfg(pe, batch=B, T=T)
    e = es.estimate(cfg, "fp32")
    got = _saved_bytes(DecoderLM(cfg.model), B, T)
    assert e.activation_bytes == pytest.approx(got, rel=0.02)


def test_the_scheme_probe_reads_rotations_and_terms_per_layer():
    assert es.probe_scheme(_cfg("none")) == es.SchemeTerms(0, 0, 0)
    assert es.probe_scheme(_cfg("rope")) == es.SchemeTerms(2, 0, 0)
    assert es.probe_scheme(_cfg("alibi")) == es.SchemeTerms(0, 2, 2)
    irope = replace(_cfg("rope").model, layers=[])
    from pebench.model.patterns import with_layers

    pat = replace(_cfg("rope"), model=with_layers(replace(irope, n_layers=4), "nope-rope-alt"))
    assert es.probe_scheme(pat) == es.SchemeTerms(2, 0, 0)  # two RoPE layers of four


class _LiveBytes(TorchDispatchMode):
    """The peak of the bytes of storages that ops made and that some tensor still holds."""

    def __init__(self):
        super().__init__()
        self.size, self.holders, self.now, self.peak = {}, {}, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr():
                key = t.untyped_storage().data_ptr()
                if key not in self.size:
                    self.size[key], self.holders[key] = t.untyped_storage().nbytes(), 0
                    self.now += self.size[key]
                    self.peak = max(self.peak, self.now)
                self.holders[key] += 1
                weakref.finalize(t, self._release, key)
        return out

    def _release(self, key):
        self.holders[key] -= 1
        if not self.holders[key]:
            self.now -= self.size.pop(key)
            del self.holders[key]


@pytest.mark.parametrize("pe", ["none", "rope"])
@pytest.mark.parametrize("L", [64, 256])
@pytest.mark.parametrize("vocab", [256, 1024])  # the head's phase, or a block's, is the largest
def test_evaluation_activations_match_the_live_storages_of_a_forward(pe, L, vocab):
    cfg = _cfg(pe, vocab_size=vocab)
    e = es.estimate(cfg, "fp32", [L])
    model = DecoderLM(cfg.model).eval()
    x = torch.randint(0, 256, (e.evals[0].rows, L))
    with torch.no_grad(), _LiveBytes() as live:
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())  # as the scorer: the log-softmax too
    assert e.evals[0].activation_bytes == pytest.approx(live.peak, rel=0.03)


def test_a_materialized_term_is_a_lower_bound_of_what_evaluation_holds():
    cfg = _cfg("alibi")
    with_term, plain = es.estimate(cfg, "fp32", [256]).evals[0], es.estimate(_cfg("none"), "fp32", [256]).evals[0]
    model = DecoderLM(cfg.model).eval()
    with torch.no_grad(), _LiveBytes() as live:
        model(torch.randint(0, 256, (with_term.rows, 256)))  # a lower bound: the scorer comes on top
    assert plain.activation_bytes < with_term.activation_bytes <= live.peak


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the allocator's peak needs CUDA")
def test_a_cuda_step_peaks_near_the_estimate():
    cfg = _cfg("rope", batch=4, T=256)
    model = DecoderLM(cfg.model).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (4, 256), device="cuda")
    model(x, x)[1].backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    model(x, x)[1].backward()
    e = es.estimate(cfg, "fp32")
    assert torch.cuda.max_memory_allocated() - base == pytest.approx(e.activation_bytes, rel=0.25)


def test_predicted_time_is_flops_over_the_peak_at_its_utilisation():
    e = es.estimate(_cfg("rope"), "fp32")
    (p,) = es.custom_preset(2.0, 0.5)
    assert es.predicted_seconds(e.train_flops, p) == pytest.approx(e.train_flops / 1e12)
    assert [q.name for q in es.custom_preset(None, None)] == list(es.PEAKS)
    assert {q.mfu for q in es.custom_preset(None, 0.3)} == {0.3}


def test_the_command_prints_every_table_and_refuses_bad_input(tmp_path):
    r = runner.invoke(
        app, ["bench", "--estimate", "tiny", "--peak-tflops", "1", "--mfu", "0.5", "--results", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    assert "821,504 parameters" in r.output and "| 2,048 |" in r.output and "| given | 1 | 50% |" in r.output
    assert not list(tmp_path.iterdir())  # on paper: nothing written
    for args, words in [
        (["--mfu", "1.5"], "--mfu must be in (0, 1]"),
        (["--peak-tflops", "-1"], "--peak-tflops must be a positive number"),
        (["--pe", "rope,alibi"], "one scheme"),
        (["--precision", "fp16"], "--precision must be one of auto, fp32, bf16"),
    ]:
        r = runner.invoke(app, ["bench", "--estimate", "tiny", *args])
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output
    r = runner.invoke(app, ["bench", "--estimate", "nosuch"])
    assert r.exit_code == 2 and "unknown config 'nosuch'" in r.output
