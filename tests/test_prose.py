"""The phrases chapters build sentences from, on their edge cases: nothing, one value, ties, several."""

from __future__ import annotations

import pandas as pd
from biasaudit.book import prose


def test_counts_ranges_and_differences_read_as_one_value_where_there_is_one():
    assert (prose.count_noun(1, "template"), prose.count_noun(0, "template"), prose.count_noun(2, "reason")) == \
        ("1 template", "0 templates", "2 reasons")
    assert prose.value_range(0.4, 0.6, 2) == "from 0.40 to 0.60"
    assert prose.value_range(0.5, 0.5, 2) == "0.50" and prose.value_range(12.31, 12.34, 1) == "12.3", "no 'from x to x'"
    assert prose.magnitude(-0.0123) == "0.012" and prose.magnitude(0.0004) == "less than 0.001"
    assert prose.spoken_clauses(["a", "b"]) == "a and b" and prose.spoken_clauses(["a, x", "b"]) == "a, x; and b"


def test_reasons_are_counted_and_ties_are_not_ranked():
    assert prose.reasons_sentence([], "failure") == ""
    assert prose.reasons_sentence(["empty"], "failure") == "The one failure: empty."
    assert prose.reasons_sentence(["b", "a", "a", "b"], "failure") == "The 4 failures: a (2) and b (2)."
    assert prose.reasons_sentence(["x", "x", "x", "c", "a", "b"], "refusal") == \
        "The 6 refusals: x (3), a (1), b (1) and 1 other reason (1)."


def test_extremes_name_both_ends_and_read_ties_and_single_values_as_such():
    percent = "{:.0%}".format
    assert prose.extremes(pd.Series(dtype=float), percent) == ""
    assert prose.extremes(pd.Series({"es": 0.98}), percent) == "98% in Spanish (es)"
    assert prose.extremes(pd.Series({"ar": 0.0, "es": 0.0, "ko": 0.001}), percent) == "0% in every language", \
        "equal as shown: no 'from 0% in Arabic (ar) to 0% in Arabic (ar)'"
    assert prose.extremes(pd.Series({"ko": 0.11, "es": 0.98, "fr": 0.5}), percent) == \
        "from 11% in Korean (ko) to 98% in Spanish (es)"
    assert prose.extremes(pd.Series({"ko": 0.11, "es": 0.98, "sw": 0.98, "hi": None}), percent) == \
        "from 11% in Korean (ko) to 98% in Spanish (es) and Swahili (sw)", "a tie at an end names both, NaN is left out"
    assert prose.extremes(pd.Series({"a": 1.0, "b": 2.0}), "{:.1f}".format, name=str, every="every model") == \
        "from 1.0 in a to 2.0 in b"


def test_run_scope_says_whose_numbers_a_page_shows():
    released = prose.run_scope(released=True, models=["llama3.1-8b"], offline=["smollm2-135m"])
    assert "paper released (1 model: llama3.1-8b)" in released and "offline" not in released
    small = prose.run_scope(released=False, models=["smollm2-135m", "gemma3-270m"],
                            offline=["smollm2-135m", "gemma3-270m", "tiny-random"])
    assert "small offline models (smollm2-135m and gemma3-270m)" in small and "not the paper's numbers" in small
    hub = prose.run_scope(released=False, models=["meta-llama/Llama-3.1-8B"], offline=["smollm2-135m"])
    assert "meta-llama/Llama-3.1-8B on the run's items" in hub and "offline" not in hub
    # beside the paper's ten, a model scored here is never counted among the paper's
    beside = prose.run_scope(released=True, models=["llama3.1-8b", "smollm2-135m (this run)"], offline=["smollm2-135m"])
    assert "paper released (1 model: llama3.1-8b) and of smollm2-135m (this run), scored here" in beside


def test_what_was_set_aside_is_counted_by_kind():
    from biasaudit.book.prose import collapsed_counts

    def table(*kinds):
        return pd.DataFrame([{"variant": v, "language": lang} for v, lang, n in kinds for _ in range(n)])

    # the paper's release: 37 translations whose two continuations became one, and 20 English rewordings
    assert collapsed_counts(table(("translation", "es", 13), ("translation", "sw", 24), ("rewording", "en", 20))) == \
        "37 translated versions and 20 English rewordings"
    assert collapsed_counts(table(("translation", "hi", 1))) == "1 translated version"
    assert collapsed_counts(table(("rewording", "es", 2))) == "2 rewordings in other languages"
    assert collapsed_counts(pd.DataFrame(columns=["variant", "language"])) == "no version"


def test_cells_tested_again_are_named_with_what_they_settled():
    from biasaudit.book.prose import refined_text

    cells = pd.DataFrame({"model": ["solar-10.7b", "llama3.1-8b"], "language": ["sw", "hi"],
                          "q": [0.0493, 0.002], "reliable": [True, True], "flips": [1_000_000, 20_000]})
    assert refined_text(cells, 20_000, 0.05) == (
        "1 cell had a q within Monte Carlo error of 0.05 with 20,000 sign flips, so it was tested again with "
        "1,000,000: solar-10.7b × sw (q 0.0493, reliable). The verdicts above therefore do not change with another "
        "seed.")
    assert refined_text(cells.assign(flips=20_000), 20_000, 0.05).startswith("No cell's q lay within Monte Carlo")
