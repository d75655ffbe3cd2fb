"""The pipeline's YAML config, validated by pydantic: a wrong key or value is a clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dpprefsyn.private import FitConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class PrivateSource(Section):
    path: str = Field(description="Private preference data: a file, a saved dataset or hub name.")
    format: str = "auto"
    split: str | None = None
    on_error: Literal["raise", "drop"] = "raise"


class Budget(Section):
    lifetime_epsilon: float = Field(10.0, gt=0, description="Total over all fits of this data.")
    lifetime_delta: float | None = Field(None, gt=0, lt=1)
    lock_timeout_s: float = Field(0.0, ge=0, description="Wait this long for another run.")


class PromptSource(Section):
    path: str
    format: str = "auto"
    columns: dict[str, str] | None = None
    split: str | None = None
    limit: int | None = Field(None, gt=0)
    exclude_datasets: list[str] = Field(
        default_factory=list,
        description="Drop prompts whose `dataset` column is one of these (AlpacaEval carries "
        "HH-RLHF and OASST prompts: exclude them when those are the private data).",
    )


class Generation(Section):
    backend: Literal["auto", "vllm", "transformers", "pool"] = "auto"
    cpu_fallback: Literal["pool", "transformers"] = "pool"
    n: int = Field(5, ge=2, description="Candidates per prompt (L).")
    seed: int = 0
    shard_size: int = Field(64, gt=0)
    vllm: dict[str, Any] = Field(default_factory=dict)
    transformers: dict[str, Any] = Field(default_factory=dict)
    pool: dict[str, Any] = Field(default_factory=dict)


class Selection(Section):
    min_gap: float = Field(0.5, ge=0)
    seed: int = 0


class Export(Section):
    style: Literal["standard", "conversational"] = "standard"
    formats: list[Literal["parquet", "jsonl"]] = Field(default_factory=list)
    push_to_hub: str | None = None
    token_env: str = "HF_TOKEN"


class PipelineConfig(Section):
    name: str = "dpprefsyn"
    out_dir: Path = Path("runs/dpprefsyn")
    state_dir: Path = Field(
        Path(".dpprefsyn"),
        description="Owner-side state: budget logs, fingerprint key, private embedding cache.",
    )
    embedding_cache: Path | None = Field(
        None,
        description="Embedding cache (vectors keyed by text hashes, no text); it holds vectors "
        "of private texts, so it stays with the owner. Default: state_dir/embeddings.",
    )
    private: PrivateSource | None = Field(
        None, description="Private preferences to fit on (this run is then the data owner's)."
    )
    model: Path | None = Field(
        None,
        description="Instead of `private`: a preference model fitted elsewhere (`dpprefsyn fit` "
        "or another run's fit/model folder). Synthesis then reads no private record and spends "
        "nothing; the data owner's budget log accounts for the fit.",
    )
    fit: dict[str, Any] = Field(default_factory=dict, description="FitConfig fields.")
    budget: Budget = Field(default_factory=Budget)
    prompts: list[PromptSource]
    generation: Generation = Field(default_factory=Generation)
    selection: Selection = Field(default_factory=Selection)
    export: Export = Field(default_factory=Export)
    demo_truth: Path | None = Field(None, description="Demo only: measure against the truth.")

    @field_validator("fit")
    @classmethod
    def _valid_fit(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            FitConfig(**value)
        except TypeError as err:
            raise ValueError(f"unknown fit setting: {err}") from None
        return value

    @model_validator(mode="after")
    def _one_private_source(self) -> PipelineConfig:
        if (self.private is None) == (self.model is None):
            raise ValueError("give exactly one of `private` (data to fit on) or `model`")
        if self.model is not None and self.fit:
            raise ValueError("`fit` settings apply only with `private`: the model is fitted")
        return self

    @field_validator("prompts")
    @classmethod
    def _some_prompts(cls, value: list[PromptSource]) -> list[PromptSource]:
        if not value:
            raise ValueError("at least one public prompt source is needed")
        return value

    @property
    def cache_dir(self) -> Path:
        return self.embedding_cache or self.state_dir / "embeddings"

    def fit_config(self) -> FitConfig:
        return FitConfig(**self.fit)

    @classmethod
    def from_yaml(cls, path: str | Path) -> PipelineConfig:
        """Read a YAML file; relative paths in it are resolved against the file's folder."""
        path = Path(path)
        raw = yaml.safe_load(path.read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: the config must be a mapping")
        cfg = cls(**raw)
        base = path.resolve().parent
        return cfg._resolved(base)

    def _resolved(self, base: Path) -> PipelineConfig:
        def fix(p: str | Path) -> str:
            q = Path(p)
            if q.is_absolute() or not (base / q).exists():
                return str(p)
            return str((base / q).resolve())

        if self.private is not None:
            self.private.path = fix(self.private.path)
        if self.model is not None:
            self.model = Path(fix(self.model))
            if not (self.model / "model.json").is_file():
                raise ValueError(f"model: {self.model} is not a preference model folder")
        for src in self.prompts:
            src.path = fix(src.path)
        pool = dict(self.generation.pool)
        if "sources" in pool:
            pool["sources"] = [fix(s) if isinstance(s, str) else s for s in pool["sources"]]
        self.generation.pool = pool
        if self.demo_truth is not None:
            self.demo_truth = Path(fix(self.demo_truth))
        return self
