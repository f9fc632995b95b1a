"""The options every analysis shares, in one validated object.

Six settings decide every number of the results chapters: which log-prob aggregate, how many
sign flips and bootstrap draws, the seed every random step derives from, the false-discovery
rate and the interval level. They travel together as one frozen `StudyOptions`, so a chapter
cannot test with one seed and bootstrap with another, and so a stored result can be keyed by
exactly the options that made it (`StudyOptions.key`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_SEED: int = 20261129

Aggregate = Literal["mean", "sum"]


class StudyOptions(BaseModel):
    """aggregate, n_permutations, n_bootstrap, seed, alpha and level of one analysis run.

    Strict: a string where a number belongs, or an unknown name, is an error rather than a
    silent conversion or a setting that is quietly ignored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    aggregate: Aggregate = Field("mean", description='"mean": per-token mean log-prob (the study\'s choice); "sum": summed')
    n_permutations: int = Field(10_000, ge=1, description="sign-flip draws per test (exact enumeration for 16 items or fewer)")
    n_bootstrap: int = Field(5_000, ge=1, description="bootstrap resamples of the base items for every interval")
    seed: int = Field(DEFAULT_SEED, ge=0, description="every random step derives from this")
    alpha: float = Field(0.05, gt=0, lt=1, description="false-discovery rate for calling a shift reliable")
    level: float = Field(0.95, gt=0, lt=1, description="level of every interval")

    def but(self, **changes: Any) -> "StudyOptions":
        """A copy with some options changed, validated like the original."""
        return StudyOptions(**{**self.model_dump(), **changes})

    def key(self, *extra: Any) -> str:
        """A short stable hash of these options (and any extra arguments of a computation)."""
        text = json.dumps([self.model_dump(), *extra], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_OPTIONS = StudyOptions()
