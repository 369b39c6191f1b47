"""``pebench export RUN --hf DEST``: a pebench RoPE or NoPE run as a Hugging Face GPT-NeoX checkpoint that computes
the same function, with a byte tokenizer whose ids are the bytes (so `pebench eval --hf DEST` reads the same stream).

Why GPT-NeoX: it is the stock architecture whose block is pebench's exactly (pre-norm LayerNorm with bias, attention
and GELU MLP in sequence when ``use_parallel_residual`` is false, rotate-half RoPE over the whole head, tied
embeddings); Llama's RMSNorm and SwiGLU are not. The differences are bookkeeping: NeoX packs q, k, v per head (the
rows are permuted) and its linear layers carry biases (written as zeros). Schemes other than RoPE and NoPE (ALiBi,
T5, Shaw, learned or sinusoidal tables, ...), a RoPE scaling or a logit scale baked into the run have no NeoX
equivalent and are refused with the reason.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..results import guard_target
from ..util.errors import UsageError


def byte_tokenizer():
    """A fast tokenizer whose token id is the byte value (byte 0 the end of text), pebench's byte stream exactly."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    chars = bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=chars[0])


def exportable(cfg, model) -> None:
    """Raise UsageError naming what has no GPT-NeoX equivalent."""
    m = cfg.model
    if m.pe not in ("rope", "none"):
        raise UsageError(
            f"{m.pe} has no equivalent in a stock Hugging Face architecture (GPT-NeoX applies RoPE or, "
            "with partial_rotary_factor 0, nothing); export takes rope and none runs"
        )
    if m.pe == "rope" and model.pe.variant != "default":
        raise UsageError(
            f"the run bakes in the RoPE scaling {model.pe.variant!r}; export the unscaled run and set "
            "the scaling at evaluation (pebench eval --hf DEST --rope-scaling ...)"
        )
    if m.logit_scale != "none":
        raise UsageError(f"the run's logit scale {m.logit_scale!r} has no GPT-NeoX equivalent")
    if m.vocab_size != 256:
        raise UsageError("export writes pebench's byte tokenizer; the run's vocabulary is not 256 bytes")


def neox_state(model, cfg) -> dict:
    """GPT-NeoX parameter names -> tensors holding the pebench model's weights (zero biases)."""
    d, H = cfg.model.d_model, cfg.model.n_heads
    out = {
        "gpt_neox.embed_in.weight": model.tok.weight,
        "embed_out.weight": model.head.weight,
        "gpt_neox.final_layer_norm.weight": model.ln_f.weight,
        "gpt_neox.final_layer_norm.bias": model.ln_f.bias,
    }
    for i, b in enumerate(model.blocks):
        p = f"gpt_neox.layers.{i}."
        qkv = b.attn.qkv.weight.view(3, H, d // H, d).permute(1, 0, 2, 3).reshape(3 * d, d)  # per head: q, k, v
        out.update(
            {
                p + "input_layernorm.weight": b.ln1.weight,
                p + "input_layernorm.bias": b.ln1.bias,
                p + "post_attention_layernorm.weight": b.ln2.weight,
                p + "post_attention_layernorm.bias": b.ln2.bias,
                p + "attention.query_key_value.weight": qkv,
                p + "attention.dense.weight": b.attn.proj.weight,
                p + "mlp.dense_h_to_4h.weight": b.mlp[0].weight,
                p + "mlp.dense_h_to_4h.bias": torch.zeros(cfg.model.d_mlp),
                p + "mlp.dense_4h_to_h.weight": b.mlp[2].weight,
                p + "mlp.dense_4h_to_h.bias": torch.zeros(d),
            }
        )
    return {k: v.detach().clone().float().contiguous() for k, v in out.items()}


def neox_config(cfg, model):
    from transformers import GPTNeoXConfig

    m = cfg.model
    base = float(model.pe.options.base) if m.pe == "rope" else 10000.0
    rope = {"rope_type": "default", "rope_theta": base, "partial_rotary_factor": 1.0 if m.pe == "rope" else 0.0}
    return GPTNeoXConfig(
        vocab_size=256,
        hidden_size=m.d_model,
        num_hidden_layers=m.n_layers,
        num_attention_heads=m.n_heads,
        intermediate_size=m.d_mlp,
        hidden_act="gelu",
        max_position_embeddings=m.context,
        layer_norm_eps=1e-5,
        use_parallel_residual=False,
        attention_bias=False,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        rope_parameters=rope,
        rotary_pct=rope["partial_rotary_factor"],
        rotary_emb_base=base,
    )


def export_run(results, run: str, dest: Path) -> Path:
    """Write ``run`` to ``dest`` (a new or empty folder; never over a user's files), atomically via a temp folder."""
    import shutil
    import tempfile

    from ..model.checkpoint import load_run_model
    from .hf import require_transformers

    tf = require_transformers()
    dest = guard_target(Path(dest), "--hf")
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"{dest} exists and is not empty; export writes a new folder")
    cfg, _, model = load_run_model(results, run, torch.device("cpu"))
    exportable(cfg, model)
    hf = tf.GPTNeoXForCausalLM(neox_config(cfg, model))
    state = neox_state(model, cfg)
    if "lm_head.weight" in hf.state_dict():  # the output layer's name in transformers 5 (embed_out before)
        state["lm_head.weight"] = state.pop("embed_out.weight")
    missing, unexpected = hf.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.endswith("rotary_emb.inv_freq")]:
        raise UsageError(f"GPT-NeoX layout changed in this transformers: missing {missing}, unexpected {unexpected}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    except OSError as e:  # said of the folder asked for, never of the temporary one beside it
        raise UsageError(f"--hf {dest}: cannot write there ({e.strerror or type(e).__name__})") from e
    try:
        hf.save_pretrained(tmp)
        byte_tokenizer().save_pretrained(tmp)
        (tmp / "PEBENCH_EXPORT.txt").write_text(
            f"exported from pebench run {run} ({cfg.model.pe}, config hash {cfg.hash()})\n"
        )
        if dest.exists():
            dest.rmdir()
        tmp.rename(dest)
    except OSError as e:
        raise UsageError(f"--hf {dest}: the export could not be written ({e.strerror or type(e).__name__})") from e
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest
