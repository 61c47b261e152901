"""The sequence-model policy's config and its input, without torch.

``PolicyConfig`` is the ``policy`` field of the trainer config (``GRPOConfig``): ``mlp`` (the
default) is the pilot's NumPy MLP, ``transformer`` the small PyTorch transformer of
``transformer_policy``, which reads the whole program at once. Everything here imports without
torch, so the core install still loads the trainer; torch is needed only to train a transformer
(the ``torch`` extra).

The transformer sees one token per branch (``tokens``): the branch's shown value (one-hot and
scaled), whether it is broken, tested by a visible test and type-strict; its position enters as a
learned position embedding. It outputs 34 action logits per token; the policy's distribution for
acting on a broken branch is read off that branch's token, so one forward pass gives every step
of an episode (as with the MLP, an observation depends only on the program and the step).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from verigap.patchworld.programs import N_VALUES, Programs

N_TOKEN_FEATURES = N_VALUES + 4  # one-hot value, scaled value, broken, tested, strict


class PolicyConfig(BaseModel):
    """Which policy the trainer trains. The transformer fields are ignored by the MLP (whose
    width is ``sft.hidden``) and must stay at their defaults with ``kind: mlp``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["mlp", "transformer"] = Field(
        "mlp", description="mlp (NumPy) | transformer (PyTorch, needs the torch extra)"
    )
    d_model: int = Field(32, ge=4, description="transformer: width of a token")
    layers: int = Field(2, ge=1, le=8, description="transformer: encoder blocks")
    heads: int = Field(4, ge=1, description="transformer: attention heads")
    ff: int = Field(64, ge=1, description="transformer: hidden units of each block's MLP")

    @model_validator(mode="after")
    def _fits(self) -> PolicyConfig:
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must be a multiple of heads={self.heads}")
        if self.kind == "mlp" and self.model_fields_set - {"kind"}:
            raise ValueError(
                "d_model, layers, heads and ff set the transformer; with kind: mlp "
                "leave them out (the MLP's width is sft.hidden)"
            )
        return self


def tokens(programs: Programs) -> np.ndarray:
    """(B, 12, N_TOKEN_FEATURES) float32: one token per branch of every program."""
    b, n = programs.shown.shape
    out = np.zeros((b, n, N_TOKEN_FEATURES), dtype=np.float32)
    rows, cols = np.meshgrid(np.arange(b), np.arange(n), indexing="ij")
    out[rows, cols, programs.shown] = 1.0
    out[:, :, N_VALUES] = programs.shown / (N_VALUES - 1)
    out[:, :, N_VALUES + 1] = programs.broken
    out[:, :, N_VALUES + 2] = programs.tested
    out[:, :, N_VALUES + 3] = programs.strict
    return out
