"""The one helper module the tests share: the micro config (one definition, varied per file by overrides), a CLI
runner, the scheme lists from the registry and a tiny model config, hand-made models for task scoring, and tiny
Hugging Face models and tokenizers built locally (no network)."""

from pathlib import Path

import torch
import yaml
from typer.testing import CliRunner

from pebench.cli import app
from pebench.config import ModelConfig
from pebench.model.pe import GROUPS, scheme_names

runner = CliRunner()

# From the registry: a built-in scheme added as one new module is in every test that iterates these.
CLASSIC, MODERN = list(GROUPS["classic"]), list(GROUPS["modern"])
SCHEMES = scheme_names()


def tiny_model_config(pe: str, **kw) -> ModelConfig:
    base = dict(
        vocab_size=256,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_mlp=64,
        context=16,
        pe=pe,
        pe_options={"shaw": {"k_max": 4}, "t5": {"num_buckets": 8, "max_distance": 16}},
    )
    base.update(kw)
    return ModelConfig(**base)


MICRO = {
    "name": "micro",
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_mlp": 64, "context": 16},
    "train": {
        "steps": 2,
        "batch_size": 4,
        "lr": 0.003,
        "warmup": 1,
        "log_every": 1,
        "checkpoint_every": 2,
        "data": "sotu",
    },
    "eval": {"multiples": [1, 2], "max_tokens": 600, "batch_tokens": 256},
}


def merged(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def micro(**sections) -> dict:
    """The micro config with sections overridden: micro(train={"steps": 4})."""
    return merged(MICRO, sections)


def write_micro(folder: Path, name: str = "micro.yaml", **sections) -> Path:
    p = Path(folder) / name
    p.write_text(yaml.safe_dump(micro(**sections)))
    return p


def micro_file(tmp_path_factory, **sections) -> Path:
    """A module-scoped micro config file: micro_file(tmp_path_factory, train={"steps": 4})."""
    return write_micro(tmp_path_factory.mktemp("cfg"), **sections)


def invoke(*args):
    """The CLI on these arguments (paths and numbers as text)."""
    return runner.invoke(app, [str(a) for a in args])


# -- hand-made models for task scoring ----------------------------------------------------------------------------
class Oracle(torch.nn.Module):
    """Logits one-hot on the next token of its own input: it 'copies the right digits'."""

    def forward(self, x):
        out = torch.full((*x.shape, 256), -10.0)
        out[:, :-1].scatter_(-1, x[:, 1:, None], 10.0)
        return out


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(*x.shape, 256)


def task_ctx(model, stream=None, **options):
    """An evaluation context for a task's measure(): the model, a small config, a text stream, the options."""
    import numpy as np

    from pebench.config import EvalConfig, ModelConfig
    from pebench.eval.scoring import Protocol
    from pebench.eval.tasks import EvalContext

    cfg = type("Cfg", (), {"eval": EvalConfig(batch_tokens=4096), "model": ModelConfig(context=128)})()
    s = (
        stream
        if stream is not None
        else np.frombuffer(b"The quick brown fox jumps over the lazy dog. " * 200, dtype=np.uint8)
    )
    return EvalContext(model, cfg, torch.device("cpu"), s, s, Protocol(), 512, options)


# -- tiny Hugging Face models and tokenizers (transformers imported inside each) ------------------------------------


def byte_tokenizer():
    """Token id = byte value (pebench's byte stream), the library's own (what export writes)."""
    from pebench.eval.export import byte_tokenizer as tok

    return tok()


def bpe_tokenizer(text: str, vocab_size: int = 400):
    """A small byte-level BPE trained on ``text`` (subword tokens: several bytes per token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


def tiny_llama(folder: Path, tokenizer=None, context: int = 64, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tokenizer or byte_tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=context,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def tiny_gpt2(folder: Path, context: int = 64) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = byte_tokenizer()
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=context, n_embd=32, n_layer=2, n_head=4)).save_pretrained(
        folder
    )
    tok.save_pretrained(folder)
    return Path(folder)


def tiny_llama_gguf(hf_folder: Path, out: Path) -> Path:
    """The tiny Llama saved at ``hf_folder`` (with its byte-level BPE) written as a GGUF file, as llama.cpp's
    converter writes one: its hyperparameters and tokenizer as metadata, q and k permuted to llama.cpp's rotary
    layout, every tensor in float32 (the ``gguf`` package; no network)."""
    import json

    import gguf
    import numpy as np
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(hf_folder)
    tok = AutoTokenizer.from_pretrained(hf_folder)
    cfg = model.config
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_vocab_size(cfg.vocab_size)
    spec = json.loads(tok.backend_tokenizer.to_str())["model"]
    vocab = sorted(spec["vocab"].items(), key=lambda kv: kv[1])
    w.add_tokenizer_model("gpt2")
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t == tok.eos_token else 1 for t, _ in vocab])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["merges"]])
    w.add_eos_token_id(tok.eos_token_id)
    w.add_bos_token_id(tok.eos_token_id)

    def permute(t, heads):
        return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)

    names = {"self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up"}
    names |= {"mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for name, p in model.state_dict().items():
        a = p.detach().float().numpy()
        if name == "model.embed_tokens.weight":
            w.add_tensor("token_embd.weight", a)
        elif name == "model.norm.weight":
            w.add_tensor("output_norm.weight", a)
        elif name == "lm_head.weight":
            w.add_tensor("output.weight", a)
        else:
            i, rest = name.split(".")[2], ".".join(name.split(".")[3:-1])
            if rest == "self_attn.q_proj":
                w.add_tensor(f"blk.{i}.attn_q.weight", permute(a, cfg.num_attention_heads))
            elif rest == "self_attn.k_proj":
                w.add_tensor(f"blk.{i}.attn_k.weight", permute(a, cfg.num_key_value_heads))
            elif rest == "self_attn.v_proj":
                w.add_tensor(f"blk.{i}.attn_v.weight", a)
            else:
                w.add_tensor(f"blk.{i}.{names[rest]}.weight", np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(out)


class TokenOracle(torch.nn.Module):
    """Logits one-hot on the next token of its own input, over a tokenizer's vocabulary."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab

    def forward(self, x):
        out = torch.full((*x.shape, self.vocab), -10.0)
        out[:, :-1].scatter_(-1, x[:, 1:, None], 10.0)
        return out


class TokenUniform(TokenOracle):
    """The same logits for every token: exact match at chance, ties split."""

    def forward(self, x):
        return torch.zeros(*x.shape, self.vocab)


def token_encoder(tok):
    """text -> an outside tokenizer's ids (no special tokens), as pebench's tasks encode with ``eval --hf``."""
    import numpy as np

    return lambda text: np.asarray(tok(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def tiny_outside(folder: Path, text: str, vocab: int = 300, context: int = 64):
    """A tiny random Llama saved in ``folder`` with a BPE tokenizer trained on ``text``: (its folder, its tokenizer)."""
    from pebench.eval import hf

    model = tiny_llama(folder, bpe_tokenizer(text, vocab), context=context)
    return model, hf.open_model(str(model)).tokenizer
