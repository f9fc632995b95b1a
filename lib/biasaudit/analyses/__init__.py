"""One function per table of the book: each takes a scores table (and the run's `StudyOptions`)
and returns a tidy DataFrame. One module per idea:

- `scores`: soft and binary scores, versions paired with their English originals;
- `drops`: language drops and the item-by-item cell tests (chapter 10);
- `floor`: the noise floor and each model's gap against it (chapters 11, 12);
- `verdict`: the book's answer per language and the evidence per model beside it (chapter 22);
- `carry_over`: how much of an item's preference survives a change (chapter 13);
- `detection`: injected shifts and the power of the test (chapter 19);
- `subsets`: by source, by dimension, faithful translations only (chapters 14–16);
- `aggregates`: summed vs mean log-probs, model agreement (chapters 17, 18);
- `ablation`: the three pipeline errors (chapter 20);
- `case_study`: one item everywhere (chapter 21);
- `stats`: the tests and intervals all of the above use (sign-flip permutation tests,
  Benjamini–Hochberg, bootstrap and t intervals).

The template half's analyses (pass rates, translator comparisons) are in `biasaudit.templates`.

Signs used everywhere: change = version − English; drop = English − version (positive: the
version looks less biased).
"""

from biasaudit.analyses.ablation import (
    ERROR_FLAGS,
    error_example,
    error_settings,
    label_errors,
    released_label_settings,
    setting_name,
)
from biasaudit.analyses.aggregates import (
    SURFACE_FEATURES,
    length_fit,
    length_matched,
    model_agreement,
    summed_vs_mean,
    surface_properties,
    word_frequency_support,
)
from biasaudit.analyses.carry_over import (
    CHANGES,
    carry_over_pairs,
    carry_over_table,
    carry_point,
    translations_kept,
    within_language_same_items,
)
from biasaudit.analyses.case_study import case_study, pick_case
from biasaudit.analyses.detection import detection_power, language_detection, paper_spike_in
from biasaudit.analyses.drops import (
    CELL_COLUMNS,
    cell_tests,
    cells_from_pairs,
    language_drops,
    model_language_drops,
)
from biasaudit.analyses.floor import (
    floor_cells,
    model_drop_table,
    model_floors,
    model_gaps,
    noise_floor,
    unchanged_fields,
)
from biasaudit.analyses.scores import (
    ITEM_KEYS,
    ScoresError,
    check_scores,
    english_rewording_pairs,
    has_aggregate,
    item_scores,
    option_logprobs,
    paired_with_english,
    score_summary,
)
from biasaudit.analyses.subsets import (
    CONTRAST_SUBSETS,
    FLUENCY_GAP,
    KEPT_SUBSETS,
    SOURCE_ORDER,
    against_rewording,
    by_dimension,
    by_source,
    faithful_only,
    judged_versions,
    kept_translations,
    version_similarity,
)

__all__ = [
    "CELL_COLUMNS", "CHANGES", "CONTRAST_SUBSETS", "ERROR_FLAGS", "FLUENCY_GAP", "ITEM_KEYS", "KEPT_SUBSETS",
    "SOURCE_ORDER", "SURFACE_FEATURES", "against_rewording", "by_dimension", "by_source", "carry_over_pairs",
    "carry_over_table", "carry_point", "case_study", "cell_tests", "cells_from_pairs", "check_scores",
    "detection_power", "english_rewording_pairs", "error_example", "error_settings", "faithful_only", "floor_cells",
    "has_aggregate", "item_scores", "judged_versions", "kept_translations", "label_errors", "language_detection",
    "language_drops", "length_fit", "length_matched", "model_agreement", "model_drop_table", "model_floors",
    "model_gaps", "model_language_drops", "noise_floor", "option_logprobs", "paired_with_english", "paper_spike_in",
    "pick_case", "released_label_settings", "score_summary", "ScoresError", "setting_name", "summed_vs_mean",
    "surface_properties", "translations_kept", "unchanged_fields", "version_similarity",
    "within_language_same_items", "word_frequency_support",
]
