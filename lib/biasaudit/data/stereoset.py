"""StereoSet intrasentence items, read from a local mirror or the Hugging Face hub.

Each StereoSet intrasentence item is a template with one BLANK and three filled-in sentences
(stereotype, anti-stereotype, unrelated). The audit scores continuations given a context, so
every item becomes: context = the sentence text before BLANK (taken from the sentences, which
may differ in case from the template), continuation = the rest of each sentence, from the
fill word to the end.

Gold labels are mapped by name. Integer labels follow the Hugging Face ClassLabel order
0 = anti-stereotype, 1 = stereotype, 2 = unrelated; string labels (the original files) are
first encoded to those integers by name, so every reader goes through the same decoding
step, and `stereoset_label_map=True` breaks that step the same way on every reader.

The error type, the data-folder lookup, the seeded sample and the stage table come from
`biasaudit.data.public`, shared with `biasaudit.data.bbq`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from biasaudit.core.options import DEFAULT_SEED
from biasaudit.data.item_table import ITEM_COLUMNS, validate_items
from biasaudit.data.public import (
    DATA_DIR_VARIABLE,
    SourceDataError,
    check_per_category,
    empty_items,
    jsonl_entries,
    read_text,
    resolve_data_dir,
    seeded_sample,
    stage_table,
    where,
)

HUB_DATASET: str = "McGill-NLP/stereoset"
HUB_CONFIG: str = "intrasentence"
HUB_SPLIT: str = "validation"
# Mirror files, in order of preference: the HF rows keep the integer labels the hub serves
# (the form the label-map error breaks); the jsonl and the original dev.json use strings.
MIRROR_FILES: tuple[str, ...] = (
    "stereoset_hf_by_label.json",
    "intrasentence_dev.reconstructed.jsonl",
    "dev.json",
)

# Hugging Face ClassLabel order of `gold_label`: the position is the integer code.
HF_LABEL_NAMES: tuple[str, str, str] = ("anti-stereotype", "stereotype", "unrelated")
# The common silent bug: reading code 0 as the stereotype (and so 1 as the anti-stereotype).
MISREAD_LABEL_NAMES: tuple[str, str, str] = ("stereotype", "anti-stereotype", "unrelated")
ROLE_OF_LABEL: dict[str, str] = {
    "stereotype": "stereotyped",
    "anti-stereotype": "anti_stereotyped",
    "unrelated": "third",
}
DIMENSION_OF_BIAS_TYPE: dict[str, str] = {
    "gender": "gender",
    "profession": "profession",
    "race": "race",
    "religion": "religion",
}
BLANK: str = "BLANK"

EXCLUDED_NO_BLANK = "no BLANK in the context"
EXCLUDED_TWO_BLANKS = "two or more BLANKs in the context"
EXCLUDED_INSIDE_WORD = "BLANK inside a word (letters right before it)"
EXCLUDED_NOT_MATCHING = "a sentence does not start with the context's text before BLANK"
EXCLUDED_CONTEXTS_DIFFER = "the three sentences differ before BLANK"
EXCLUDED_EMPTY_CONTINUATION = "a continuation is empty"
HANDLED_WORD_ENDING = "BLANK carries a word ending (e.g. BLANKed): the ending stays with the fill word"
HANDLED_AFTER_PUNCTUATION = "BLANK follows punctuation with no space: the scorer adds one"


@dataclass(frozen=True)
class StereoSetSentence:
    """One filled-in sentence and its gold label as a Hugging Face integer code."""

    text: str
    code: int
    row: str  # where it was read, for error messages


@dataclass(frozen=True)
class StereoSetRecord:
    """One intrasentence item as read, before it is turned into context + continuations."""

    item_id: str
    target: str
    bias_type: str
    template: str
    sentences: tuple[StereoSetSentence, ...]
    origin: str
    row: str


def _require_text(record: Any, field: str, origin: str, row: str | int) -> str:
    """A required string field, or a SourceDataError naming where it is missing."""
    if not isinstance(record, dict):
        raise SourceDataError(f"{where(origin, row, field)}: the row is a {type(record).__name__}, expected a JSON object")
    if field not in record or record[field] is None:
        raise SourceDataError(f"{where(origin, row, field)}: missing; every row needs it")
    value = record[field]
    if not isinstance(value, str):
        raise SourceDataError(f"{where(origin, row, field)}: expected text, got {type(value).__name__} {value!r}")
    return value


def _code_of_int(value: Any, origin: str, row: str | int, field: str) -> int:
    """An integer gold label checked against the three ClassLabel codes."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < len(HF_LABEL_NAMES):
        raise SourceDataError(
            f"{where(origin, row, field)}: unknown label {value!r}; expected an integer code "
            f"0..2 ({', '.join(f'{i} = {n}' for i, n in enumerate(HF_LABEL_NAMES))})"
        )
    return int(value)


def _code_of_name(value: Any, origin: str, row: str | int, field: str) -> int:
    """A string gold label encoded to its Hugging Face integer code, by name."""
    if not isinstance(value, str) or value not in HF_LABEL_NAMES:
        raise SourceDataError(
            f"{where(origin, row, field)}: unknown label {value!r}; expected one of {list(HF_LABEL_NAMES)}"
        )
    return HF_LABEL_NAMES.index(value)


def _check_three_labels(sentences: list[StereoSetSentence], origin: str, row: str, field: str) -> None:
    """Every item has exactly one sentence per gold label; anything else is a broken file."""
    codes = sorted(s.code for s in sentences)
    if codes != list(range(len(HF_LABEL_NAMES))):
        found = [HF_LABEL_NAMES[c] for c in codes]
        raise SourceDataError(
            f"{where(origin, row, field)}: expected one sentence per label {list(HF_LABEL_NAMES)}, found {found}"
        )


def read_hf_rows_json(path: str | Path) -> list[StereoSetRecord]:
    """Read the mirror's Hugging Face rows: {label name: [{context, sentence, bias_type, label, id, target}]}.

    The file holds intersentence and intrasentence rows together; the intrasentence ones are
    those whose context has a BLANK. The integer `label` is the value used (the list key is
    only checked against it), because the integer is what the hub serves.
    """
    path = Path(path)
    origin = str(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SourceDataError(
            f"{where(origin, 'top level', '<document>')}: not a JSON document ({err}); expected the HF rows "
            f"keyed by label name {list(HF_LABEL_NAMES)}"
        ) from None
    if not isinstance(document, dict) or not document:
        raise SourceDataError(
            f"{where(origin, 'top level', '<document>')}: expected a JSON object keyed by label name "
            f"{list(HF_LABEL_NAMES)}, got {type(document).__name__}"
        )
    grouped: dict[str, list[tuple[dict[str, Any], StereoSetSentence]]] = {}
    for key, entries in document.items():
        if key not in HF_LABEL_NAMES:
            raise SourceDataError(
                f"{where(origin, 'top level', key)}: unknown label {key!r}; expected keys {list(HF_LABEL_NAMES)}"
            )
        if not isinstance(entries, list):
            raise SourceDataError(f"{where(origin, 'top level', key)}: expected a list of rows, got {type(entries).__name__}")
        for index, entry in enumerate(entries):
            row = f"{key}[{index}]"
            template = _require_text(entry, "context", origin, row)
            sentence = _require_text(entry, "sentence", origin, row)
            item_id = _require_text(entry, "id", origin, row)
            _require_text(entry, "bias_type", origin, row)
            _require_text(entry, "target", origin, row)
            if "label" not in entry:
                raise SourceDataError(f"{where(origin, row, 'label')}: missing; every row needs it")
            code = _code_of_int(entry["label"], origin, row, "label")
            if HF_LABEL_NAMES[code] != key:
                raise SourceDataError(
                    f"{where(origin, row, 'label')}: label {code} ({HF_LABEL_NAMES[code]}) sits in the list "
                    f"{key!r}; the file is inconsistent"
                )
            if BLANK not in template:
                continue  # an intersentence row
            grouped.setdefault(item_id, []).append((entry, StereoSetSentence(sentence, code, row)))
    records = []
    for item_id, members in grouped.items():
        first_entry, first = members[0]
        for entry, sentence in members[1:]:
            for field in ("context", "bias_type", "target"):
                if entry[field] != first_entry[field]:
                    raise SourceDataError(
                        f"{where(origin, sentence.row, field)}: {entry[field]!r} differs from {first_entry[field]!r} "
                        f"in row {first.row} of the same item {item_id!r}"
                    )
        sentences = [s for _, s in members]
        _check_three_labels(sentences, origin, first.row, "label")
        records.append(
            StereoSetRecord(
                item_id=item_id,
                target=first_entry["target"],
                bias_type=first_entry["bias_type"],
                template=first_entry["context"],
                sentences=tuple(sentences),
                origin=origin,
                row=first.row,
            )
        )
    return records


def _record_from_original(entry: Any, origin: str, row: str | int) -> StereoSetRecord:
    """One item in the original layout: {id, target, bias_type, context, sentences: [{sentence, gold_label}]}."""
    item_id = _require_text(entry, "id", origin, row)
    target = _require_text(entry, "target", origin, row)
    bias_type = _require_text(entry, "bias_type", origin, row)
    template = _require_text(entry, "context", origin, row)
    raw_sentences = entry.get("sentences")
    if not isinstance(raw_sentences, list):
        problem = "missing" if raw_sentences is None else f"expected a list, got {type(raw_sentences).__name__}"
        raise SourceDataError(f"{where(origin, row, 'sentences')}: {problem}")
    sentences = []
    for index, raw in enumerate(raw_sentences):
        field = f"sentences[{index}]"
        if not isinstance(raw, dict):
            raise SourceDataError(f"{where(origin, row, field)}: expected an object with sentence and gold_label")
        text = raw.get("sentence")
        if not isinstance(text, str):
            problem = "missing" if text is None else f"expected text, got {type(text).__name__}"
            raise SourceDataError(f"{where(origin, row, field + '.sentence')}: {problem}")
        if "gold_label" not in raw:
            raise SourceDataError(f"{where(origin, row, field + '.gold_label')}: missing; every sentence needs it")
        code = _code_of_name(raw["gold_label"], origin, row, field + ".gold_label")
        sentences.append(StereoSetSentence(text, code, str(row)))
    _check_three_labels(sentences, origin, str(row), "sentences")
    return StereoSetRecord(item_id, target, bias_type, template, tuple(sentences), origin, str(row))


def read_original_file(path: str | Path) -> list[StereoSetRecord]:
    """Read string-label StereoSet: a jsonl with one intrasentence item a line, or the original dev.json.

    Rows of a jsonl are numbered by line (1 = first line); rows of dev.json by position in
    data.intrasentence (0 = first).
    """
    path = Path(path)
    origin = str(path)
    if path.suffix == ".jsonl":
        expected = "one item per line with id, target, bias_type, context, sentences"
        return [_record_from_original(entry, origin, number) for number, entry in jsonl_entries(path, expected)]
    try:
        document = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise SourceDataError(f"{where(origin, 'top level', '<document>')}: not a JSON document ({err})") from None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("intrasentence"), list):
        raise SourceDataError(
            f"{where(origin, 'top level', 'data.intrasentence')}: missing; expected the original StereoSet "
            "layout {\"data\": {\"intrasentence\": [...]}}"
        )
    return [_record_from_original(entry, origin, index) for index, entry in enumerate(data["intrasentence"])]


def _gold_label_names(dataset: Any) -> tuple[str, ...] | None:
    """The ClassLabel names of sentences.gold_label in a hub dataset, where its features say so."""
    features = getattr(dataset, "features", None)
    if features is None:
        return None
    try:
        sentences = features["sentences"]
    except (KeyError, TypeError):
        return None
    inner = getattr(sentences, "feature", sentences)  # datasets < 4 wraps the dict in Sequence
    gold = inner.get("gold_label") if isinstance(inner, dict) else None
    gold = getattr(gold, "feature", gold)  # datasets >= 4 wraps the ClassLabel in List
    names = getattr(gold, "names", None)
    return tuple(names) if names else None


def read_hub_rows(dataset: Iterable[dict[str, Any]], origin: str) -> list[StereoSetRecord]:
    """Turn hub rows ({id, target, bias_type, context, sentences: {sentence: [...], gold_label: [...]}}) into records.

    Integer labels are decoded with the dataset's own ClassLabel names when it has them
    (they must be the three StereoSet labels), else with the documented HF order.
    """
    names = _gold_label_names(dataset)
    if names is not None and sorted(names) != sorted(HF_LABEL_NAMES):
        raise SourceDataError(
            f"{where(origin, 'features', 'sentences.gold_label')}: ClassLabel names {list(names)} are not "
            f"the StereoSet labels {list(HF_LABEL_NAMES)}"
        )
    label_names = names or HF_LABEL_NAMES
    records = []
    for index, row in enumerate(dataset):
        item_id = _require_text(row, "id", origin, index)
        target = _require_text(row, "target", origin, index)
        bias_type = _require_text(row, "bias_type", origin, index)
        template = _require_text(row, "context", origin, index)
        block = row.get("sentences")
        if not isinstance(block, dict) or not isinstance(block.get("sentence"), list) or not isinstance(
            block.get("gold_label"), list
        ):
            raise SourceDataError(
                f"{where(origin, index, 'sentences')}: expected {{sentence: [...], gold_label: [...]}}, got {block!r:.80}"
            )
        if len(block["sentence"]) != len(block["gold_label"]):
            raise SourceDataError(f"{where(origin, index, 'sentences.gold_label')}: one label per sentence expected")
        sentences = []
        for position, (text, label) in enumerate(zip(block["sentence"], block["gold_label"])):
            field = f"sentences.gold_label[{position}]"
            if isinstance(label, str):
                code = _code_of_name(label, origin, index, field)
            else:
                code = _code_of_int(label, origin, index, field)
                code = HF_LABEL_NAMES.index(label_names[code])  # by name, whatever the dataset's order
            if not isinstance(text, str):
                raise SourceDataError(f"{where(origin, index, f'sentences.sentence[{position}]')}: expected text")
            sentences.append(StereoSetSentence(text, code, str(index)))
        _check_three_labels(sentences, origin, str(index), "sentences.gold_label")
        records.append(StereoSetRecord(item_id, target, bias_type, template, tuple(sentences), origin, str(index)))
    return records


def _load_from_hub() -> list[StereoSetRecord]:
    """StereoSet intrasentence from the hub through `datasets` (imported only here: it is heavy)."""
    origin = f"hub {HUB_DATASET} ({HUB_CONFIG}, {HUB_SPLIT})"
    try:
        import datasets
    except ImportError:
        raise SourceDataError(
            f"{origin}: the `datasets` package is not installed; install it (pip install datasets) or set "
            f"{DATA_DIR_VARIABLE} to a mirror folder holding stereoset/ (layout in docs/data.md)"
        ) from None
    try:
        dataset = datasets.load_dataset(HUB_DATASET, HUB_CONFIG, split=HUB_SPLIT)
    except Exception as err:  # offline, hub errors and format changes all end here
        raise SourceDataError(
            f"{origin}: could not load ({type(err).__name__}: {err}). Offline? Set {DATA_DIR_VARIABLE} or pass "
            "data_dir= to a mirror folder holding stereoset/ (layout in docs/data.md)"
        ) from err
    return read_hub_rows(dataset, origin)


def read_stereoset_records(data_dir: str | Path | None = None) -> tuple[list[StereoSetRecord], str]:
    """Read the intrasentence items from the mirror (preferred file first) or the hub; also say from where."""
    folder = resolve_data_dir(data_dir)
    if folder is None:
        records = _load_from_hub()
        return records, f"hub {HUB_DATASET}"
    for name in MIRROR_FILES:
        path = folder / "stereoset" / name
        if path.is_file():
            reader = read_hf_rows_json if name == MIRROR_FILES[0] else read_original_file
            return reader(path), str(path)
    raise SourceDataError(
        f"{folder / 'stereoset'}: none of {list(MIRROR_FILES)} found; point data_dir/{DATA_DIR_VARIABLE} at a "
        "mirror folder holding stereoset/, or leave both unset to use the hub"
    )


def split_at_blank(
    record: StereoSetRecord, *, stereoset_label_map: bool = False
) -> tuple[dict[str, str] | None, str | None, str | None]:
    """Context + three continuations of one item: (fields, exclusion reason, handling note).

    The context is the first sentence's text before BLANK (all three must agree on it,
    ignoring case, with the template); each continuation runs from the fill word to the end.
    Exactly one of fields / exclusion reason is None.
    """
    template = record.template
    count = template.count(BLANK)
    if count == 0:
        return None, EXCLUDED_NO_BLANK, None
    if count > 1:
        return None, EXCLUDED_TWO_BLANKS, None
    start = template.index(BLANK)
    before = template[:start]
    after = template[start + len(BLANK):]
    if before and before[-1].isalnum():
        return None, EXCLUDED_INSIDE_WORD, None
    note = None
    if after[:1].isalpha():
        note = HANDLED_WORD_ENDING
    elif before and not before[-1].isspace():
        note = HANDLED_AFTER_PUNCTUATION
    heads = []
    for sentence in record.sentences:
        head = sentence.text[: len(before)]
        if len(sentence.text) < len(before) or head.casefold() != before.casefold():
            return None, EXCLUDED_NOT_MATCHING, None
        heads.append(head)
    if len(set(heads)) > 1:
        return None, EXCLUDED_CONTEXTS_DIFFER, None
    names = MISREAD_LABEL_NAMES if stereoset_label_map else HF_LABEL_NAMES
    fields = {"context": heads[0].strip()}
    for sentence in record.sentences:
        continuation = sentence.text[len(before):].strip()
        if not continuation:
            return None, EXCLUDED_EMPTY_CONTINUATION, None
        fields[ROLE_OF_LABEL[names[sentence.code]]] = continuation
    return fields, None, note


def stereoset_items(
    records: list[StereoSetRecord], *, stereoset_label_map: bool = False
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Items (contract columns, every usable item) and the stage rows read / excluded / handled / recovered."""
    rows: list[dict[str, Any]] = []
    read: Counter[str] = Counter()
    excluded: Counter[tuple[str, str]] = Counter()
    handled: Counter[tuple[str, str]] = Counter()
    seen: dict[str, str] = {}
    for record in records:
        if record.item_id in seen:
            raise SourceDataError(
                f"{where(record.origin, record.row, 'id')}: duplicate item id {record.item_id!r} "
                f"(first in row {seen[record.item_id]})"
            )
        seen[record.item_id] = record.row
        category = record.bias_type.strip()
        if not category:
            raise SourceDataError(f"{where(record.origin, record.row, 'bias_type')}: empty")
        read[category] += 1
        fields, reason, note = split_at_blank(record, stereoset_label_map=stereoset_label_map)
        if fields is None:
            excluded[(category, reason)] += 1
            continue
        if note is not None:
            handled[(category, note)] += 1
        rows.append(
            {
                "item_id": f"ss-{record.item_id}/en",
                "base_id": f"ss-{record.item_id}",
                "source": "stereoset",
                "dimension": DIMENSION_OF_BIAS_TYPE.get(category, category),
                "category": category,
                "language": "en",
                "variant": "original",
                "via": "human",
                **fields,
                "third_kind": "unrelated",
            }
        )
    items = pd.DataFrame(rows, columns=ITEM_COLUMNS) if rows else empty_items()
    stages: list[dict[str, Any]] = []
    for category in sorted(read):
        stages.append({"source": "stereoset", "category": category, "stage": "read", "n": read[category], "reason": ""})
        for (cat, reason), n in sorted(excluded.items()):
            if cat == category:
                stages.append({"source": "stereoset", "category": category, "stage": "excluded", "n": n, "reason": reason})
        for (cat, reason), n in sorted(handled.items()):
            if cat == category:
                stages.append({"source": "stereoset", "category": category, "stage": "handled", "n": n, "reason": reason})
        recovered = int((items["category"] == category).sum())
        stages.append({"source": "stereoset", "category": category, "stage": "recovered", "n": recovered, "reason": ""})
    return items, stages


def load_stereoset(
    data_dir: str | Path | None = None,
    *,
    per_category: int | None = 50,
    seed: int = DEFAULT_SEED,
    stereoset_label_map: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """StereoSet intrasentence as English original items, plus the count of items at each stage.

    Reads `data_dir` (or $BIASAUDIT_DATA_DIR)/stereoset/ — the HF rows JSON if present, else
    the string-label jsonl or dev.json — or, with neither set, the hub through `datasets`.
    `per_category` items are sampled per bias type with `seed` (None keeps all).
    `stereoset_label_map=True` reproduces the common bug of reading integer label 0 as the
    stereotype: stereotyped and anti-stereotyped continuations swap, the items stay the same.

    Returns (items, stages); stages has one row per (category, stage[, reason]) with stages
    read, excluded (with reason), handled (kept, with the note why it needed care),
    recovered (= read minus excluded) and sampled.
    """
    check_per_category(per_category)
    records, origin = read_stereoset_records(data_dir)
    items, stages = stereoset_items(records, stereoset_label_map=stereoset_label_map)
    items = items.sort_values(["category", "base_id"], kind="stable").reset_index(drop=True)
    sampled = seeded_sample(items, per_category, seed)
    for category in sorted({row["category"] for row in stages}):
        n = int((sampled["category"] == category).sum())
        stages.append({"source": "stereoset", "category": category, "stage": "sampled", "n": n, "reason": ""})
    order = {"read": 0, "excluded": 1, "handled": 2, "recovered": 3, "sampled": 4}
    stages.sort(key=lambda r: (r["category"], order[r["stage"]]))
    table = stage_table(stages)
    table.attrs["origin"] = origin
    return validate_items(sampled, origin=origin, first_row=0), table
