"""The prediction registry: a YAML file of named trainer settings and pre-registered predictions.

Every prediction names the runs it needs (settings, each a trainer config), one or more metrics
from a fixed vocabulary and a refutation criterion as data: which statistic, compared how with
what number, over how many seeds, with which bootstrap interval. Nothing in the file is code.

A prediction's *hash* covers its question, its sentence, its criterion and the resolved configs
of the settings it uses; a verdict records the hash it was computed against, so a prediction
edited after its verdict shows as amended (see ``verdicts``). The ``sanity_check`` marking is
outside the hash: calling a criterion a control changes how it is counted, not what it says.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verigap.errors import ConfigError
from verigap.experiments.language_model import TRAINERS, LMSetting
from verigap.experiments.metrics import check_metric
from verigap.patchworld.grpo import GRPOConfig

#: The registry that ships with verigap: the NumPy-MLP experiment log.
DEFAULT_REGISTRY = Path(__file__).with_name("predictions.yaml")

Compare = Literal["<", "<=", ">", ">="]


class _Criterion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    compare: Compare
    value: float = Field(description="the number the statistic is compared with")
    min_seeds: int = Field(3, ge=1, description="fewer seeds per setting: inconclusive")
    confidence: float = Field(0.9, gt=0, lt=1, description="bootstrap interval over seeds")

    def metrics_used(self) -> list[str]:
        return [self.metric]


class Threshold(_Criterion):
    """The seed-mean of ``metric`` in ``setting`` compared with ``value``."""

    kind: Literal["threshold"] = "threshold"
    setting: str

    def settings_used(self) -> list[str]:
        return [self.setting]

    def describe(self) -> str:
        return f"{self.metric}[{self.setting}] {self.compare} {self.value:g}"


class Contrast(_Criterion):
    """The seed-paired difference ``metric[a] - metric[b]`` compared with ``value``."""

    kind: Literal["contrast"] = "contrast"
    a: str
    b: str

    def settings_used(self) -> list[str]:
        return [self.a, self.b]

    def describe(self) -> str:
        return f"{self.metric}[{self.a}] - {self.metric}[{self.b}] {self.compare} {self.value:g}"


class Point(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    setting: str
    x: float


class Slope(_Criterion):
    """The least-squares slope of the seed-mean of ``metric`` against ``x`` over the points."""

    kind: Literal["slope"] = "slope"
    points: list[Point] = Field(min_length=2)

    def settings_used(self) -> list[str]:
        return [p.setting for p in self.points]

    def describe(self) -> str:
        xs = ", ".join(f"{p.setting}@{p.x:g}" for p in self.points)
        return f"slope of {self.metric} over ({xs}) {self.compare} {self.value:g}"


class Position(_Criterion):
    """Where ``mid`` sits between ``low`` and ``high``: (m[mid] - m[high]) / (m[low] - m[high]);
    1 means ``mid`` is as bad as ``low``, 0 as good as ``high``."""

    kind: Literal["position"] = "position"
    low: str
    mid: str
    high: str

    def settings_used(self) -> list[str]:
        return [self.low, self.mid, self.high]

    def describe(self) -> str:
        m = self.metric
        return (
            f"({m}[{self.mid}] - {m}[{self.high}]) / ({m}[{self.low}] - {m}[{self.high}]) "
            f"{self.compare} {self.value:g}"
        )


class Correlation(_Criterion):
    """Pearson correlation between ``x_metric`` and ``metric`` over every run (setting x seed)
    of ``settings``; the bootstrap resamples runs."""

    kind: Literal["correlation"] = "correlation"
    x_metric: str
    settings: list[str] = Field(min_length=2)

    def settings_used(self) -> list[str]:
        return list(self.settings)

    def metrics_used(self) -> list[str]:
        return [self.x_metric, self.metric]

    def describe(self) -> str:
        return (
            f"corr({self.x_metric}, {self.metric}) over {len(self.settings)} settings "
            f"{self.compare} {self.value:g}"
        )


Criterion = Annotated[
    Threshold | Contrast | Slope | Position | Correlation, Field(discriminator="kind")
]


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")
    question: str = Field(min_length=1)
    prediction: str = Field(min_length=1, description="the prediction, in one sentence")
    criterion: Criterion
    sanity_check: str | None = Field(
        None,
        min_length=20,
        description="set on a criterion that cannot fail by construction, saying why; such a "
        "control is reported apart and never counted as supported or refuted",
    )

    @field_validator("sanity_check")
    @classmethod
    def _says_why(cls, v: str | None) -> str | None:
        if v is not None and len(v.split()) < 4:
            raise ValueError("say in a sentence why the criterion cannot fail by construction")
        return v


class Registry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seeds: list[int] = Field([0, 1, 2], min_length=1)
    trainer: Literal["numpy_mlp", "language_model"] = Field(
        "numpy_mlp",
        description="the trainer of every setting that names no other; "
        "defaults and quick apply to its settings only",
    )
    defaults: dict[str, Any] = Field(
        default_factory=dict, description="trainer fields every setting starts from"
    )
    quick: dict[str, Any] = Field(
        default_factory=dict, description="trainer fields --quick overrides"
    )
    settings: dict[str, dict[str, Any]]
    predictions: list[Prediction]

    def trainer_of(self, setting: str) -> str:
        return str(self.settings[setting].get("trainer", self.trainer))

    def config(self, setting: str, seed: int, quick: bool = False) -> GRPOConfig | LMSetting:
        """The full trainer config of one run. A setting naming another trainer than the
        registry's is built from its own fields and that trainer's defaults alone."""
        own = {k: v for k, v in self.settings[setting].items() if k != "trainer"}
        trainer = self.trainer_of(setting)
        data = own
        if trainer == self.trainer:
            data = _merge(self.defaults, own)
            if quick:
                data = _merge(data, self.quick)
        if trainer == "language_model":
            return LMSetting.model_validate({**data, "seed": seed})
        data.setdefault("options", {})
        return GRPOConfig.model_validate({**data, "seed": seed})

    def run_config(self, setting: str, seed: int, quick: bool = False) -> dict[str, Any]:
        """The config a run directory stores and is keyed by (JSON)."""
        cfg = self.config(setting, seed, quick)
        if isinstance(cfg, LMSetting):
            return cfg.run_config()
        return cfg.model_dump(mode="json")

    def prediction(self, pid: str) -> Prediction:
        for p in self.predictions:
            if p.id == pid:
                return p
        raise ConfigError(f"no prediction {pid!r}; `verigap experiments list` shows the ids")

    def prediction_hash(self, p: Prediction) -> str:
        """sha256 of the prediction's text, criterion and the resolved configs it uses."""
        doc = {
            "id": p.id,
            "question": p.question,
            "prediction": p.prediction,
            "criterion": p.criterion.model_dump(mode="json"),
            "settings": {
                s: self.run_config(s, 0) for s in sorted(set(p.criterion.settings_used()))
            },
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _where(loc: tuple) -> str:
    return ".".join(str(x) for x in loc)


def parse_registry(data: Any, source: str = "registry") -> Registry:
    """Validate a registry document; every error is one line naming the entry and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'settings' and 'predictions'")
    preds = data.get("predictions")
    if isinstance(preds, list):
        for i, p in enumerate(preds):
            name = p.get("id", f"#{i + 1}") if isinstance(p, dict) else f"#{i + 1}"
            try:
                Prediction.model_validate(p)
            except ValidationError as e:
                err = e.errors()[0]
                raise ConfigError(
                    f"{source}: prediction {name}, field "
                    f"{_where(err['loc']) or '<entry>'}: {err['msg']}"
                ) from None
    try:
        reg = Registry.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ConfigError(f"{source}: field {_where(err['loc'])}: {err['msg']}") from None
    _check(reg, source)
    return reg


def _check(reg: Registry, source: str) -> None:
    for name in reg.settings:
        if reg.trainer_of(name) not in TRAINERS:
            raise ConfigError(
                f"{source}: setting {name}, field trainer: unknown trainer "
                f"{reg.trainer_of(name)!r}; use {' or '.join(TRAINERS)}"
            )
        for quick in (False, True):
            try:
                reg.config(name, reg.seeds[0], quick=quick)
            except ValidationError as e:
                err = e.errors()[0]
                raise ConfigError(
                    f"{source}: setting {name}, field {_where(err['loc'])}: {err['msg']}"
                ) from None
    seen: dict[str, int] = {}
    for i, p in enumerate(reg.predictions):
        if p.id in seen:
            raise ConfigError(
                f"{source}: prediction {p.id}, field id: duplicate id (entries "
                f"{seen[p.id] + 1} and {i + 1}); give each prediction its own id"
            )
        seen[p.id] = i
        c = p.criterion
        for field_name in ("setting", "a", "b", "low", "mid", "high", "settings", "points"):
            if not hasattr(c, field_name):
                continue
            value = getattr(c, field_name)
            names = [
                x.setting if isinstance(x, Point) else x
                for x in (value if isinstance(value, list) else [value])
            ]
            for s in names:
                if s not in reg.settings:
                    raise ConfigError(
                        f"{source}: prediction {p.id}, field criterion.{field_name}: unknown "
                        f"setting {s!r}; define it under 'settings' (known: "
                        f"{', '.join(sorted(reg.settings))})"
                    )
        for field_name, metric in (
            ("metric", c.metric),
            ("x_metric", getattr(c, "x_metric", None)),
        ):
            if metric is None:
                continue
            try:
                k = check_metric(metric)
            except ValueError as e:
                raise ConfigError(
                    f"{source}: prediction {p.id}, field criterion.{field_name}: {e}"
                ) from None
            if metric.startswith("probe_"):
                for s in c.settings_used():
                    policy = reg.config(s, reg.seeds[0]).policy
                    if policy is None or policy.kind != "transformer":
                        raise ConfigError(
                            f"{source}: prediction {p.id}, field criterion.{field_name}: "
                            f"{metric} needs probes, which only a transformer policy has; "
                            f"give setting {s!r} policy: {{kind: transformer}}"
                        )
            if k is not None:
                for s in c.settings_used():
                    opts = reg.config(s, reg.seeds[0]).options
                    if opts is None or k not in opts.eval_ks:
                        raise ConfigError(
                            f"{source}: prediction {p.id}, field criterion.{field_name}: "
                            f"{metric} cannot be computed: setting {s!r} does not evaluate at "
                            f"k={k}; add {k} to its options.eval_ks"
                        )
        why = _uncomputable(c, len(reg.seeds))
        if why:
            raise ConfigError(
                f"{source}: prediction {p.id}, field criterion: cannot be computed: {why}"
            )


def _uncomputable(c: Any, n_seeds: int) -> str | None:
    if c.min_seeds > n_seeds:
        return (
            f"min_seeds={c.min_seeds} but the registry runs {n_seeds} seed(s); "
            "lower min_seeds or add seeds"
        )
    if isinstance(c, Contrast) and c.a == c.b:
        return f"a contrast of setting {c.a!r} with itself is always 0; name two settings"
    if isinstance(c, Slope) and len({p.x for p in c.points}) < 2:
        return "a slope needs at least two distinct x values"
    if isinstance(c, Position) and len({c.low, c.mid, c.high}) < 3:
        return "low, mid and high must be three different settings"
    if isinstance(c, Correlation):
        if c.x_metric == c.metric:
            return "the correlation of a metric with itself is always 1; name two metrics"
        if len(c.settings) * n_seeds < 4:
            return "a correlation needs at least 4 runs"
    return None


def load_registry(path: str | Path = DEFAULT_REGISTRY) -> Registry:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such registry file") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e})") from None
    return parse_registry(data, str(path))
