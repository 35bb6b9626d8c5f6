"""The tiny demo policy: a character-level tokenizer and a small Qwen2 model built in code.

It needs no download, trains on two CPU cores in minutes, and is saved with
`save_pretrained`, so a tiny run's checkpoint is an ordinary Hugging Face
checkpoint directory that `hf:PATH` (or any transformers code) loads.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

# ChatML, as Qwen and SmolLM use it: the tiny model's template is an ordinary one.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
CHARS = string.printable  # digits, letters, punctuation (LaTeX and code), whitespace


@dataclass
class TinyModelConfig:
    """Size of the tiny Qwen2 model."""

    hidden_size: int = 128
    """Width of the residual stream."""
    num_layers: int = 4
    """Number of transformer blocks."""
    num_heads: int = 4
    """Attention heads (head dim = hidden_size / num_heads)."""
    intermediate_size: int = 384
    """Width of the MLP."""
    max_positions: int = 512
    """Longest context, in characters."""


def build_tiny_tokenizer() -> Any:
    """A character-level `PreTrainedTokenizerFast` with a ChatML template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + [c for c in CHARS if c not in SPECIAL_TOKENS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_tiny_model(tokenizer: Any, config: TinyModelConfig | None = None, seed: int = 0) -> Any:
    """A freshly initialised Qwen2 causal LM sized by `config`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = config or TinyModelConfig()
    hf_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(hf_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model
