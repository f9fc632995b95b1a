"""One run's scores under one set of options, with every expensive table computed once.

Chapters 10, 11, 12, 16 and 22 all read the same model × language cell tests; chapter 12 and 22
read the same bootstraps. A `Study` computes each such table once per run, options and scores, and
stores it under `runs/<run>/results/` (`biasaudit.core.store.ResultStore`): the second chapter that
asks reads the stored table. The key includes a fingerprint of the scores, so rescoring a model
or adding an item computes afresh.
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable, Literal

import pandas as pd

from biasaudit import analyses
from biasaudit.analyses import verdict as verdict_analysis
from biasaudit.core.options import DEFAULT_OPTIONS, StudyOptions
from biasaudit.core.paths import run_dir
from biasaudit.core.store import ResultStore, table_fingerprint
from biasaudit.run.pipeline import read_scores, scores_in_item_order


class Study:
    """The scores of run `run_name` (of `models`, or every model) and the options to analyse them."""

    def __init__(self, run_name: str, options: StudyOptions = DEFAULT_OPTIONS, models: list[str] | None = None):
        self.run_name = run_name
        self.options = options
        self.models = list(models) if models else None
        self.results = ResultStore(run_dir(run_name))

    @classmethod
    def from_params(cls, params) -> "Study":
        """The study a run's parameters describe (`biasaudit.run.params.RunParams`)."""
        return cls(params.run_name, params.options, params.model_filter)

    @cached_property
    def scores(self) -> pd.DataFrame:
        return read_scores(self.run_name, models=self.models)

    def restricted_to(self, item_ids: pd.Series) -> "Study":
        """This study on the scores of `item_ids` alone, in their order: what a run scoring only those
        versions would find (a ValueError where this run has not scored some of them). Its tables are
        stored beside the whole study's, under their own scores."""
        missing = sorted(set(item_ids) - set(self.scores["item_id"]))
        if missing:
            raise ValueError(f"run {self.run_name!r} has not scored {len(missing)} of those versions "
                             f"(e.g. {missing[:3]}), so it cannot say what a run of them would find")
        study = Study(self.run_name, self.options, self.models)
        study.__dict__["scores"] = scores_in_item_order(self.scores, item_ids)  # the cached property, set
        return study

    @cached_property
    def fingerprint(self) -> str:
        return table_fingerprint(self.scores)

    def computed(self, name: str, compute: Callable[[], pd.DataFrame], *extra) -> pd.DataFrame:
        """`compute()` stored as `name`, keyed by the options, the scores and any `extra` arguments."""
        return self.results.get(name, self.options.key(self.fingerprint, *extra), compute)

    def cells(self) -> pd.DataFrame:
        """Every model × language cell of translations: drop, sign-flip p, BH q (family: all cells)."""
        return self.computed("cell_tests", lambda: analyses.cell_tests(self.scores, self.options))

    def floor_cells(self) -> pd.DataFrame:
        """Every model × route cell of English rewordings, tested the same way (family: all routes)."""
        return self.computed("floor_cells", lambda: analyses.floor_cells(self.scores, self.options))

    def gaps(self, floor_over_routes: Literal["median", "mean"] = "mean") -> pd.DataFrame:
        """Each model's gap, floor and gap − floor with its bootstrap interval."""
        return self.computed("model_gaps", lambda: analyses.model_gaps(
            self.scores, self.options, floor_over_routes=floor_over_routes, cells=self.cells(),
            floors=self.floor_cells()), floor_over_routes)

    def language_drops(self) -> pd.DataFrame:
        return self.computed("language_drops", lambda: analyses.language_drops(self.scores, self.options,
                                                                               cells=self.cells()))

    def noise_floor(self) -> pd.DataFrame:
        return self.computed("noise_floor", lambda: analyses.noise_floor(self.scores, self.options,
                                                                         cells=self.floor_cells()))

    def carry_over(self) -> pd.DataFrame:
        return self.computed("carry_over", lambda: analyses.carry_over_table(self.scores, self.options))

    def verdict_cells(self, similarity: pd.DataFrame | None, threshold: float, n_runs: int) -> pd.DataFrame:
        """Every model × language cell's evidence and verdict (chapter 22), including the power of its
        test at its own drop, which chapter 19 shows per language too: one table, so the two pages
        give the same numbers."""
        return self.computed("verdict_cells", lambda: verdict_analysis.verdict_cells(
            self.scores, self.options, cells=self.cells(), floors=self.floor_cells(), similarity=similarity,
            threshold=threshold, n_runs=n_runs), threshold, n_runs, similarity is not None)

    def language_verdicts(self) -> pd.DataFrame:
        """The book's verdict per language (chapter 22's rule), which chapters 10, 16 and 19 show beside
        their own numbers: one table, so no two pages give a language different answers."""
        return self.computed("language_verdicts", lambda: verdict_analysis.verdict_languages(
            self.scores, self.options, cells=self.cells(), floors=self.floor_cells(), drops=self.language_drops()))

    def detection(self, deltas: list[float], n_runs: int, inject: Literal["all", "one"] = "all") -> pd.DataFrame:
        return self.computed("detection", lambda: analyses.detection_power(
            self.scores, self.options, deltas=deltas, n_runs=n_runs, inject=inject), list(deltas), n_runs, inject)
