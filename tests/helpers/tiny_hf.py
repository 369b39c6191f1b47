"""Tiny Hugging Face models and tokenizers built locally (no network): a 2-layer Llama-style model, a GPT-2 with
learned absolute positions, a byte-level tokenizer whose ids are the bytes (as pebench's) and a small BPE trained
on a text."""
from pathlib import Path


def byte_tokenizer():
    """Token id = byte value (pebench's byte stream), the library's own (what export writes)."""
    from pebench.export import byte_tokenizer as tok

    return tok()


def bpe_tokenizer(text: str, vocab_size: int = 400):
    """A small byte-level BPE trained on ``text`` (subword tokens: several bytes per token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


def tiny_llama(folder: Path, tokenizer=None, context: int = 64, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tokenizer or byte_tokenizer()
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=context,
                      tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id)
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
        folder)
    tok.save_pretrained(folder)
    return Path(folder)
