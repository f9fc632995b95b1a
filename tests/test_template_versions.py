"""Templates translated and paraphrased by machine: every field translated (the expected answers
too), a template that loses or changes a placeholder is failed with the reason, and the
machine-made library is written in LangBiTe's format."""

from __future__ import annotations

import json

import pandas as pd
from biasaudit import translate as tr
from biasaudit.templates.library import read_project_library, read_template_file
from biasaudit.templates.versions import (
    paraphrase_templates,
    translate_communities,
    translate_templates,
    write_library,
)


def rot13(text: str) -> str:
    """Letters rotated outside {PLACEHOLDERS}: a "translation" that shares no word with its source."""
    import codecs
    import re

    return "".join(part if part.startswith("{") else codecs.encode(part, "rot13")
                   for part in re.split(r"(\{[A-Z_0-9]+\})", text))


class Marking(tr.Translator):
    """ROT13 with the target in front ("[fr] ..."); validates like a real backend, so a dropped
    placeholder fails."""

    backend = "marking"

    def __init__(self, broken: dict[str, str] | None = None):
        super().__init__("marker/mt", cache=False, progress=False)
        self.broken = broken or {}

    def _generate(self, texts, source, target):
        return [self.broken.get(t, f"[{target}] {rot13(t)}") for t in texts]

    def _outcome(self, raw, text, source, target):
        reason = tr.validate_output(raw, text, source, target)
        return tr.Outcome(None if reason else raw, raw, reason)


def english(n: int = 3) -> pd.DataFrame:
    templates, _ = read_project_library([], paraphrases=False)
    return templates.loc[templates["variant"] == "original"].head(n).reset_index(drop=True)


def test_every_field_and_expected_answer_is_translated():
    source = english()
    made, failed = translate_templates(source, Marking(), ["fr"])
    assert failed.empty and len(made) == len(source)
    first = made.iloc[0]
    assert first["prompt"] == "[fr] " + rot13(source.loc[0, "prompt"]) and first["variant"] == "translation"
    assert first["template_id"] == f"{source.loc[0, 'base_id']}/fr@mt" and first["via"] == "marker/mt"
    answers = json.loads(first["oracle_prediction"])["expected_value"]
    assert answers == ["[fr] " + rot13(v) for v in json.loads(source.loc[0, "oracle_prediction"])["expected_value"]]
    assert first["oracle"] == source.loc[0, "oracle"] and first["base_id"] == source.loc[0, "base_id"]


def test_a_template_that_loses_a_placeholder_is_failed_with_the_reason():
    source = english()
    prompt = source.loc[1, "prompt"]
    assert "{" in prompt, "the fixture's second template has placeholders"
    dropped = prompt.split("{")[0] + "everyone?"
    made, failed = translate_templates(source, Marking(broken={prompt: dropped}), ["fr"])
    assert len(made) == 2 and failed[["base_id", "field", "reason"]].iloc[0].tolist() == [
        source.loc[1, "base_id"], "prompt", "placeholders changed"]


def test_communities_are_translated_entry_by_entry():
    lists = {"GENDER": {"en": ["men", "women"], "es": ["hombres", "mujeres"]}}
    out, failed = translate_communities(lists, Marking(broken={"women": ""}), ["fr", "es"])
    assert out["GENDER"]["fr"] == ["[fr] zra", "women"] and out["GENDER"]["es"] == ["hombres", "mujeres"]
    assert failed[["language", "text", "reason"]].iloc[0].tolist() == ["fr", "women", "empty"]


class Rewording(tr.Paraphraser):
    def __init__(self):
        tr.CachedTextMap.__init__(self, "rewriter", cache=False, progress=False)
        self.n, self.max_new_tokens = 2, 100

    def _generate(self, texts, source, target):
        return [(f"1. Tell me: {t}\n2. I wonder: {t}" if "Should" not in t else "1. Something else entirely.")
                + tr.END_OF_REPLY for t in texts]


def test_paraphrases_keep_the_answer_format_and_fail_short():
    source = english()
    made, failed = paraphrase_templates(source, Rewording())
    assert set(made["via"]) == {"rewriter:p1", "rewriter:p2"} and (made["variant"] == "paraphrase").all()
    assert (made["output_formatting"].to_numpy() == source.set_index("template_id").loc[
        made["template_id"].str.replace(r"~.*", "", regex=True), "output_formatting"].to_numpy()).all()
    assert len(made) == 4 and len(failed) == 2, "the template reworded without its placeholders fails for k = 1, 2"
    assert set(failed["reason"]) == {"placeholders changed; 0 of 2 rewordings usable"}
    assert made.loc[made["via"] == "rewriter:p2", "prompt"].str.startswith("I wonder: ").all()


def test_the_machine_made_library_is_langbite_format(tmp_path):
    made, _ = translate_templates(english(), Marking(), ["fr"])
    (path,) = write_library(made, tmp_path)
    assert path.name == "prompts_fr--mt.csv"
    back, _ = read_template_file(path, "fr")
    assert back["prompt"].tolist() == made["prompt"].tolist()
