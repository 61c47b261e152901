"""A tiny randomly initialised chat model built offline: the local-model path with no weights.

``tiny_chat_model()`` returns a small Llama-architecture model and a byte-level tokenizer with a
ChatML chat template, both made in memory from a seed, so tests (and a first smoke run) exercise
the same code as a real model: chat template, generation, tool-call parsing, the episode loop,
TRL's trainers. ``memorize`` fits it to one reply so greedy decoding produces chosen text.
"""

from __future__ import annotations

from typing import Any

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ("<|im_start|>", "<|im_end|>", "<pad>")


def tiny_tokenizer() -> Any:
    """Byte-level tokenizer: one token per byte (every text is encodable) plus ChatML markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    for s in SPECIAL:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<pad>"
    )
    fast.add_special_tokens({"additional_special_tokens": list(SPECIAL[:2])})
    fast.chat_template = CHATML
    return fast


def tiny_chat_model(
    seed: int = 0, *, hidden: int = 64, layers: int = 2, max_positions: int = 8192
) -> tuple[Any, Any]:
    """(model, tokenizer): a random Llama with a few hundred thousand parameters."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_positions,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.eval()
    return model, tok
