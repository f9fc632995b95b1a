"""Prompt templates (LangBiTe's format), their communities, and the prompts they become.

The template table has one row per template × language (docs/design.md, "Templates"): template_id,
base_id (the English template it comes from), concern, input_type, reflection_type, task_prefix,
prompt (with `{MARKUP}` / `{MARKUP1}` placeholders), output_formatting, oracle, oracle_prediction,
language, variant (`original`, `translation`, `paraphrase`) and via.

Two libraries load into it:

- the project's own (`data/templates/`, written for this project, eight languages, with English
  rewordings and a community list for every placeholder, pronouns included); any bad row is an
  error naming the file, row and field;
- LangBiTe's (SOM-Research/LangBiTe, MIT: English and its human Spanish and Catalan translations),
  downloaded at pinned commits with sha256 or read from a folder. Its known data quirks
  (docs/langbite.md §5) are reported per template and the run goes on.

Instantiation follows docs/langbite.md §1: a template's distinct placeholders are filled with every
k-permutation of distinct communities (both orders), one instance when it has none; a params cap
keeps a seeded sample (the same positions in every language, since the community lists are aligned).
Prompt assembly (§1.3): with a task prefix, the instance is quoted between triple double quotes
after a short note saying so. LangBiTe writes that note in English whatever the template's
language; here it is in the template's own language unless `note="english"`.
"""

from __future__ import annotations

import itertools
import json
import re
import zlib
from pathlib import Path
from typing import Iterable, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from biasaudit.core.words import counted
from biasaudit.core.paths import PROJECT_ROOT, cache_dir
from biasaudit.data.downloads import DownloadError, PinnedFile, fetch, verified
from biasaudit.data.public import resolve_data_dir
from biasaudit.templates.oracles import OPERATIONS, OracleError, parse_prediction

TEMPLATE_COLUMNS: list[str] = ["template_id", "base_id", "concern", "input_type", "reflection_type", "task_prefix",
                               "prompt", "output_formatting", "oracle", "oracle_prediction", "language", "variant",
                               "via"]
FILE_COLUMNS: list[str] = ["prompt_id", "concern", "input_type", "reflection_type", "task_prefix", "prompt",
                           "output_formatting", "oracle", "oracle_prediction"]
CONCERNS: tuple[str, ...] = ("ageism", "lgbtiqphobia", "politics", "racism", "religion", "sexism", "xenophobia")
# LangBiTe spells one concern "lgtbiqphobia" and has a Winograd-style "sexism_ambiguity" concern.
CONCERN_SPELLINGS: dict[str, str] = {"lgtbiqphobia": "lgbtiqphobia"}
PLACEHOLDER = re.compile(r"\{([A-Z][A-Z_]*?)(\d*)\}")
PROJECT_LIBRARY: Path = PROJECT_ROOT / "data" / "templates"

# LangBiTe's own note, sent word for word with `quote_note: english` (a protocol constant, like a
# field name: the exact sentence LangBiTe's prompt class appends to every task prefix, in every language).
LANGBITE_QUOTE_NOTE: str = 'The sentence is delimited by """.'
# The sentence that says the instance is quoted (docs/langbite.md §1.3), written for this project.
QUOTE_NOTES: dict[str, str] = {
    "en": 'The sentence is given between """.',
    "es": 'La frase va entre """.',
    "ca": 'La frase va entre """.',
    "fr": 'La phrase est donnée entre """.',
    "de": 'Der Satz steht zwischen """.',
    "lb": 'De Saz steet tëscht """.',
    "zh": '句子写在 """ 之间。',
    "ar": 'الجملة مكتوبة بين """.',
    "ko": '문장은 """ 사이에 있습니다.',
    "sw": 'Sentensi imeandikwa kati ya """.',
    "hi": 'वाक्य """ के बीच दिया गया है।',
}

LANGBITE_REPOSITORY = "SOM-Research/LangBiTe"
LANGBITE_FILES: tuple[PinnedFile, ...] = (
    PinnedFile("prompts_en_us.csv", LANGBITE_REPOSITORY, "langbite/resources/prompts_en_us.csv",
               "78502974b41a0acec959c8941e837af4efb641ee",
               "995f760630fe0c012a361c8dccdaa7db45734e384f2b4ae80ba620333bc0aaeb"),
    PinnedFile("prompts_es_es.csv", LANGBITE_REPOSITORY, "langbite/resources/prompts_es_es.csv",
               "702aacc89d1829731b53dc906fc4bdeb419ae52c",
               "8ea0a1d21e434622d444d61eeea1dfecc2a16bab96872831e2cc0257110e9655"),
    PinnedFile("prompts_ca_es.csv", LANGBITE_REPOSITORY, "langbite/resources/prompts_ca_es.csv",
               "702aacc89d1829731b53dc906fc4bdeb419ae52c",
               "2660fd8b19bbf488c24fb05d64c11d6f630203deef8ce74e63b205b9de902d21"),
    PinnedFile("input_example.json", LANGBITE_REPOSITORY, "documentation/examples/input_example.json",
               "3749e1c6826eb2790537113c9c1eb92f0c8e9c8c",
               "9f03b5a8e7f5ec4b751aa2f040fcca6c82518d110428d8c23f67e0510bc6f78d"),
)
LANGBITE_LANGUAGES: dict[str, str] = {"en_us": "en", "es_es": "es", "ca_es": "ca"}


class TemplateError(ValueError):
    """A bad template file: the message names the file, row and field of every problem."""


class TemplateRow(BaseModel):
    """One row of a template file, checked field by field."""

    model_config = ConfigDict(extra="ignore")

    prompt_id: str
    concern: str
    input_type: str
    reflection_type: str
    task_prefix: str
    prompt: str
    output_formatting: str
    oracle: str
    oracle_prediction: str

    @field_validator("prompt_id", "concern", "input_type", "reflection_type", "prompt", "oracle",
                     "oracle_prediction")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty")
        return value


def placeholders(text: str) -> list[str]:
    """The distinct placeholders of a template, in order of first appearance ({AGE1}, {AGE2}, ...)."""
    return list(dict.fromkeys(match.group(0) for match in PLACEHOLDER.finditer(text)))


def markup(placeholder: str) -> str:
    """{AGE2} → AGE."""
    match = PLACEHOLDER.fullmatch(placeholder)
    return match.group(1) if match else placeholder.strip("{}")


def read_template_file(path: Path, language: str, *, variant: str = "original", via: str = "human",
                       strict: bool = True) -> tuple[pd.DataFrame, list[dict]]:
    """One LangBiTe-format file (tab-separated; columns taken by position, as LangBiTe does) as
    template rows, with the problems found. `strict`: an unknown oracle type, JSON that does not
    parse, a field its operation needs missing or of the wrong kind, or an unknown operation is an
    error (the project's library); otherwise the problem is reported as a quirk, and the row is left
    out, except for an unknown operation, which LangBiTe reads and fails on only when the template is
    evaluated (kept: judged unprocessable)."""
    try:
        raw = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, quoting=3, encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TemplateError(f"{path}: not UTF-8 text ({err})") from None
    except (pd.errors.ParserError, OSError) as err:
        raise TemplateError(f"{path}: cannot be read as a tab-separated template file: {err}") from None
    if raw.shape[1] < len(FILE_COLUMNS):
        raise TemplateError(f"{path}: {counted(raw.shape[1], 'column')}; a template file has at least {len(FILE_COLUMNS)}: "
                            f"{FILE_COLUMNS}")
    table = raw.iloc[:, :len(FILE_COLUMNS)].set_axis(FILE_COLUMNS, axis=1)
    extra = raw.iloc[:, len(FILE_COLUMNS)] if variant == "paraphrase" and raw.shape[1] > len(FILE_COLUMNS) else None
    errors, quirks, rows = [], [], []
    for position, record in enumerate(table.to_dict(orient="records")):
        where = f"{path}: row {position + 2}"
        record = {k: v.replace("\r", "") for k, v in record.items()}
        try:
            row = TemplateRow(**record)
        except ValidationError as err:
            errors += [f"{where}, field {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in err.errors()]
            continue
        try:
            prediction = parse_prediction(row.oracle, row.oracle_prediction)
            if prediction["operation"] not in OPERATIONS:
                raise OracleError(f"unknown operation {prediction['operation']!r}; known: {list(OPERATIONS)}")
        except OracleError as err:
            field = "oracle" if "oracle type" in str(err) else "oracle_prediction"
            (errors if strict else quirks).append(f"{where}, field {field!r}: {err}")
            if strict or "unknown operation" not in str(err):  # LangBiTe fails on those only when judging
                continue
        concern = row.concern.strip().lower()
        suffix = f"~{extra.iloc[position]}" if extra is not None else ""
        rows.append({
            "template_id": f"{row.prompt_id}/{language}{suffix}", "base_id": row.prompt_id,
            "concern": CONCERN_SPELLINGS.get(concern, concern), "input_type": row.input_type.strip().lower(),
            "reflection_type": row.reflection_type.strip().lower(), "task_prefix": row.task_prefix.strip(),
            "prompt": row.prompt, "output_formatting": row.output_formatting, "oracle": row.oracle,
            "oracle_prediction": row.oracle_prediction, "language": language, "variant": variant,
            "via": extra.iloc[position] if extra is not None else via, "file": str(path), "row": position + 2,
        })
    if errors:
        shown = "\n  ".join(errors[:50])
        raise TemplateError(f"{counted(len(errors), 'problem')} in the template file:\n  {shown}")
    out = pd.DataFrame(rows, columns=[*TEMPLATE_COLUMNS, "file", "row"])
    duplicated = out["template_id"].duplicated()
    if duplicated.any():
        raise TemplateError(f"{path}: row {int(out.loc[duplicated, 'row'].iloc[0])}, field 'prompt_id': "
                            f"{out.loc[duplicated, 'base_id'].iloc[0]!r} appears twice")
    return out, [{"file": str(path), "problem": q} for q in quirks]


def read_communities(path: Path, *, language_names: dict[str, str] | None = None) -> dict[str, dict[str, list[str]]]:
    """markup → language → community literals, from the project's communities.json
    ({"placeholders": {MARKUP: {lang: [...]}}}) or LangBiTe's input_example.json (its requirements'
    `markup` and `communities`; language keys such as en_us mapped by `language_names`)."""
    try:
        content = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise TemplateError(f"{path}: not a readable JSON file of communities: {err}") from None
    names = language_names or {}
    out: dict[str, dict[str, list[str]]] = {}
    if "requirements" in content:
        entries = {r["markup"].upper(): r.get("communities", {}) for r in content["requirements"]}
    else:
        entries = content.get("placeholders", {})
    for name, by_language in entries.items():
        lists = {names.get(k, k): list(v) for k, v in by_language.items() if isinstance(v, list)}
        out[name] = lists
    return out


def data_quirks(templates: pd.DataFrame, communities: dict[str, dict[str, list[str]]]) -> pd.DataFrame:
    """Per template, what behaves differently from what its text suggests (docs/langbite.md §5): a
    placeholder with no community list (stays in the prompt verbatim), a markup name written without
    braces, an `equal` oracle on a template with placeholders (only the first instance is judged).
    Columns: template_id, language, quirk."""
    rows = []
    for row in templates.itertuples(index=False):
        for placeholder in placeholders(row.prompt):
            if not communities.get(markup(placeholder), {}).get(row.language):
                rows.append((row.template_id, row.language, f"{placeholder} has no community list in {row.language}: "
                             "it stays in the prompt as written"))
        for braced in re.findall(r"\{[^{}]*\}", row.prompt):
            if not PLACEHOLDER.fullmatch(braced):
                rows.append((row.template_id, row.language, f"{braced} is not a placeholder (not upper-case ASCII): "
                             "it stays in the prompt as written"))
        for name in communities:
            if re.search(rf"(?<![{{\w]){name}(?![\w}}])", row.prompt):
                rows.append((row.template_id, row.language, f"the markup {name} is written without braces: it is "
                             "not filled"))
        operation = json.loads(row.oracle_prediction).get("operation")
        if operation in ("equal", "different", "notIncludesAny") and placeholders(row.prompt):
            rows.append((row.template_id, row.language, f"`{operation}` judges only the first of the template's "
                         "instances"))
    return pd.DataFrame(rows, columns=["template_id", "language", "quirk"])


def check_communities(templates: pd.DataFrame, communities: dict[str, dict[str, list[str]]]) -> None:
    """The project's library must fill every placeholder: a missing community list is an error."""
    problems = [f"{row.file}: row {row.row}, field 'prompt': {placeholder} has no community list in {row.language}"
                for row in templates.itertuples(index=False) for placeholder in placeholders(row.prompt)
                if not communities.get(markup(placeholder), {}).get(row.language)]
    if problems:
        raise TemplateError(f"{counted(len(problems), 'placeholder')} without communities:\n  " + "\n  ".join(problems[:50]))


def read_project_library(languages: Iterable[str], folder: Path = PROJECT_LIBRARY, *,
                         paraphrases: bool = True) -> tuple[pd.DataFrame, dict]:
    """The project's templates in `languages` (English always), its English rewordings, and its
    communities; every row validated (a bad one is an error naming file, row and field)."""
    languages = list(dict.fromkeys(["en", *languages]))
    frames = []
    for language in languages:
        path = folder / f"templates_{language}.tsv"
        if not path.exists():
            raise TemplateError(f"{path}: the project's template library has no file for {language!r}")
        frames.append(read_template_file(path, language, variant="original" if language == "en" else "translation")[0])
    if paraphrases and (folder / "paraphrases_en.tsv").exists():
        frames.append(read_template_file(folder / "paraphrases_en.tsv", "en", variant="paraphrase")[0])
    templates = pd.concat(frames, ignore_index=True)
    communities = read_communities(folder / "communities.json")
    check_communities(templates, communities)
    return templates, communities


def langbite_folder(source: str | Path) -> Path:
    """LangBiTe's files: "download" (pinned commits, sha256-checked, into the cache), or a folder."""
    if str(source) == "download":
        try:
            return fetch(list(LANGBITE_FILES), cache_dir() / "langbite",
                         alternative="Or set `template_library` to a folder holding these files "
                                     "(e.g. $BIASAUDIT_DATA_DIR/langbite).")
        except DownloadError as err:
            raise TemplateError(f"LangBiTe's template library: {err}") from None
    folder = Path(source)
    if not (folder / "prompts_en_us.csv").exists():
        raise TemplateError(f"{folder}: no prompts_en_us.csv there; give a folder of LangBiTe's files or 'download'")
    return folder


def find_langbite() -> Path | None:
    """LangBiTe's files already on this machine, without any download: the download cache when every
    pinned file there checks out, else a mirror's langbite/ folder ($BIASAUDIT_DATA_DIR); None if
    neither (then "download" fetches them)."""
    cached = cache_dir() / "langbite"
    if all(verified(f, cached) for f in LANGBITE_FILES):
        return cached
    mirror = resolve_data_dir(None)
    if mirror is not None and (mirror / "langbite" / "prompts_en_us.csv").exists():
        return mirror / "langbite"
    return None


def read_langbite_library(source: str | Path, languages: Iterable[str], *,
                          extra_communities: dict[str, dict[str, list[str]]] | None = None
                          ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """LangBiTe's templates in `languages` (en, es, ca), its example communities (from
    input_example.json) plus `extra_communities` for markups it has no list for (PRONOUN), and the
    data quirks found, reported per template (the run goes on)."""
    folder = langbite_folder(source)
    wanted = {"en", *languages}
    frames, quirks = [], []
    for key, language in LANGBITE_LANGUAGES.items():
        if language not in wanted:
            continue
        table, problems = read_template_file(folder / f"prompts_{key}.csv", language,
                                             variant="original" if language == "en" else "translation",
                                             strict=False)
        frames.append(table)
        quirks += problems
    templates = pd.concat(frames, ignore_index=True)
    communities = read_communities(folder / "input_example.json", language_names=LANGBITE_LANGUAGES)
    for name, lists in (extra_communities or {}).items():
        for language, values in lists.items():
            if not communities.get(name, {}).get(language):
                communities.setdefault(name, {})[language] = list(values)
    found = data_quirks(templates, communities)
    listed = pd.DataFrame(quirks, columns=["file", "problem"])
    return templates, communities, found if listed.empty else pd.concat(
        [found, listed.rename(columns={"problem": "quirk"}).assign(template_id="", language="")], ignore_index=True)


def sample_templates(templates: pd.DataFrame, per_concern: int, seed: int) -> pd.DataFrame:
    """At most `per_concern` base templates of each concern (a seeded sample, the same base
    templates in every language and variant); 0 keeps every template."""
    if per_concern <= 0:
        return templates
    chosen = []
    originals = templates.loc[templates["variant"] == "original"]
    for concern, group in originals.groupby("concern", sort=True):
        bases = np.sort(group["base_id"].unique())
        rng = np.random.default_rng([seed, zlib.crc32(f"templates/{concern}".encode())])
        chosen += list(rng.choice(bases, size=min(per_concern, len(bases)), replace=False))
    return templates.loc[templates["base_id"].isin(chosen)].reset_index(drop=True)


def instances(templates: pd.DataFrame, communities: dict[str, dict[str, list[str]]], *,
              max_instances: int | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per template × instance: the template's placeholders filled with every
    k-permutation of distinct communities (docs/langbite.md §1.2), or a seeded sample of `max_instances`
    of them (at least two for a same-value template, whose test compares the groups' answers). The
    sample takes the same positions for a base template in every language and variant (community
    lists are aligned across languages), so languages are compared on the same instances.

    Columns: template_id, instance (0, 1, ...), fillers (the communities used, joined by " | "),
    text (the filled template), n_instances (all k-permutations before sampling).
    """
    rows = []
    for row in templates.itertuples(index=False):
        slots = [p for p in placeholders(row.prompt) if communities.get(markup(p), {}).get(row.language)]
        pools = {markup(p): communities[markup(p)][row.language] for p in slots}
        if len({markup(p) for p in slots}) > 1:
            raise TemplateError(f"{row.template_id}: placeholders of several markups ({slots}); a template "
                                "uses one markup")
        pool = next(iter(pools.values()), [])
        fillings = list(itertools.permutations(range(len(pool)), len(slots))) if slots else [()]
        total = len(fillings)
        cap = None if max_instances is None else max(max_instances, 2 if row.oracle == "same value" else 1)
        if cap is not None and total > cap:
            rng = np.random.default_rng([seed, zlib.crc32(str(row.base_id).encode())])
            fillings = [fillings[i] for i in sorted(rng.choice(total, size=cap, replace=False))]
        for number, chosen in enumerate(fillings):
            text = row.prompt
            for placeholder, index in zip(slots, chosen):
                text = text.replace(placeholder, pool[index])
            rows.append({"template_id": row.template_id, "instance": number,
                         "fillers": " | ".join(pool[i] for i in chosen), "text": text, "n_instances": total})
    return pd.DataFrame(rows, columns=["template_id", "instance", "fillers", "text", "n_instances"])


def assemble(instance: str, task_prefix: str, output_formatting: str, language: str,
             note: Literal["own", "english"] = "own") -> str:
    """The text sent to the model (docs/langbite.md §1.3). An empty task prefix means none (LangBiTe read
    with pandas 3 turns it into the text "nan": here it is simply absent). `note`: "own", the project's
    note in the template's language; "english", LangBiTe's exact English note in every language."""
    formatting = output_formatting.strip()
    if not task_prefix.strip():
        return f"{instance} {formatting}".strip()
    sentence = LANGBITE_QUOTE_NOTE if note == "english" else QUOTE_NOTES.get(language, QUOTE_NOTES["en"])
    return f'{task_prefix.strip()} {sentence} """{instance}""". {formatting}'.strip()


def prompts(templates: pd.DataFrame, filled: pd.DataFrame, note: Literal["own", "english"] = "own") -> pd.DataFrame:
    """`filled` (from `instances`) with the text each instance sends to a model (`prompt_text`)."""
    merged = filled.merge(templates[["template_id", "task_prefix", "output_formatting", "language"]],
                          on="template_id", validate="many_to_one")
    merged["prompt_text"] = [assemble(i, t, f, lang, note) for i, t, f, lang in
                             merged[["text", "task_prefix", "output_formatting", "language"]].itertuples(index=False)]
    return merged.drop(columns=["task_prefix", "output_formatting", "language"])


def write_langbite_file(templates: pd.DataFrame, path: Path) -> Path:
    """Templates of one language as a LangBiTe-format file (tab-separated, CRLF, columns by position),
    so that LangBiTe itself can read a machine-translated library."""
    table = templates.rename(columns={"base_id": "prompt_id"})[FILE_COLUMNS].astype(str)
    bad = table.map(lambda v: "\t" in v or "\n" in v or "\r" in v).to_numpy()
    if bad.any():
        raise TemplateError(f"{path}: a field holds a tab or a line break, which LangBiTe's format cannot carry")
    lines = ["\t".join(FILE_COLUMNS), *("\t".join(values) for values in table.itertuples(index=False))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("\r\n".join(lines).encode("utf-8"))  # CRLF, no newline after the last row
    return path
