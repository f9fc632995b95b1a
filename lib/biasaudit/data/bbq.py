"""BBQ ambiguous items, with roles taken from the answer metadata, read from a mirror or the hub.

A BBQ example is a passage, a question and three answers: two people (or groups) and an
"unknown" answer. In an ambiguous context the passage does not say who, so a model's
preference between the two people is bias. Which answer is the stereotyped continuation
depends on the metadata and on the question: for a negative question ("Who was forgetful?")
it is the answer naming a stereotyped group; for a non-negative one ("Who was not
forgetful?") it is the other person's answer. Answer order carries no meaning in BBQ.

Roles are recovered from `answer_info` (each answer's [text, group]) and
`additional_metadata.stereotyped_groups`, after normalising both sides (see
`normalise_group`). An example where no answer, or both, match the stereotyped groups is
excluded and counted.

`bbq_roles_by_order=True` reproduces a common pipeline error instead: the unknown answer is
found by its wording, from a short list (`SHORT_UNKNOWN_WORDINGS`); the other two answers
take the roles in answer order (first = stereotyped, second = anti-stereotyped), whatever the
metadata and the question polarity. When no answer is on the short list, the roles are pure
position: ans0 = stereotyped, ans1 = anti-stereotyped, ans2 = third, so an unknown answer in
position 0 or 1 is scored as if it named a group. The same items are kept as without the
error (exclusions still come from the metadata), so an ablation compares like with like.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from biasaudit.core.options import DEFAULT_SEED
from biasaudit.data.item_table import ITEM_COLUMNS, validate_items
from biasaudit.data.public import (
    DATA_DIR_VARIABLE,
    SourceDataError,
    check_per_category,
    empty_items,
    jsonl_entries,
    resolve_data_dir,
    seeded_sample,
    stage_table,
    where,
)

HUB_DATASET: str = "Elfsong/BBQ"  # parquet copy of nyu-mll/BBQ; one split per category, lower-case names
DEFAULT_CATEGORIES: tuple[str, ...] = ("Age", "Gender_identity", "Nationality", "Race_ethnicity", "Religion")
DIMENSION_OF_CATEGORY: dict[str, str] = {
    "Age": "age",
    "Gender_identity": "gender",
    "Nationality": "nationality",
    "Race_ethnicity": "race",
    "Religion": "religion",
    "Disability_status": "disability",
    "Physical_appearance": "appearance",
    "Sexual_orientation": "sexual_orientation",
    "SES": "ses",
}
# Categories whose answer_info group is a region, so the answer text (the nationality) is matched.
MATCH_ANSWER_TEXT: frozenset[str] = frozenset({"Nationality"})
# The error's incomplete list (BBQ uses ten wordings, see the mirror): casefolded exact matches.
SHORT_UNKNOWN_WORDINGS: tuple[str, ...] = ("unknown", "cannot be determined", "not enough information")
GENDER_WORDS: dict[str, str] = {"man": "m", "boy": "m", "woman": "f", "girl": "f"}
POLARITIES: frozenset[str] = frozenset({"neg", "nonneg"})
CONDITIONS: frozenset[str] = frozenset({"ambig", "disambig"})
ANSWERS: tuple[str, str, str] = ("ans0", "ans1", "ans2")

EXCLUDED_NO_UNKNOWN = "no answer is marked unknown in answer_info"
EXCLUDED_SEVERAL_UNKNOWN = "several answers are marked unknown in answer_info"
EXCLUDED_NO_GROUPS = "no stereotyped_groups in additional_metadata"
EXCLUDED_NO_MATCH = "no answer matches the stereotyped groups"
EXCLUDED_TWO_MATCHES = "both answers match the stereotyped groups"


class MissingCategoryWarning(UserWarning):
    """A requested BBQ category is not in the mirror or the hub copy; the run goes on without it."""


def normalise_group(label: Any) -> str:
    """A group label in the form in which answer groups and stereotyped groups are compared.

    Rules, in order: strip a gender prefix "M-"/"F-" (Race_ethnicity groups such as "F-Black");
    casefold and drop spaces ("low SES" = "lowSES"); man/boy -> m, woman/girl -> f (the M/F
    of stereotyped_groups); anything starting with "trans" -> trans ("trans_F", "Transgender
    women"; "nonTrans" stays itself). Matching is exact afterwards: "old" never matches
    "nonOld" and "African" never matches "African American". A missing label gives "".
    """
    if not isinstance(label, str):
        return ""
    text = label.strip()
    if text[:2] in ("M-", "F-"):
        text = text[2:]
    text = "".join(text.casefold().split())
    text = GENDER_WORDS.get(text, text)
    if text.startswith("trans"):
        return "trans"
    return text


def _answer_info(record: dict[str, Any], origin: str, row: int) -> list[tuple[str, str]]:
    """[(text, group)] for ans0..ans2 from answer_info, checked."""
    info = record["answer_info"]
    pairs = []
    for answer in ANSWERS:
        value = info.get(answer)
        if not isinstance(value, (list, tuple)) or len(value) < 2 or not all(isinstance(v, str) for v in value[:2]):
            raise SourceDataError(
                f"{where(origin, row, f'answer_info.{answer}')}: expected [answer text, group], got {value!r}"
            )
        pairs.append((value[0], value[1]))
    return pairs


def check_record(record: Any, category: str, origin: str, row: int) -> None:
    """Raise SourceDataError naming file, row and field when a BBQ example is not in the expected shape."""
    if not isinstance(record, dict):
        raise SourceDataError(f"{where(origin, row, '<line>')}: expected a JSON object, got {type(record).__name__}")
    for field in ("example_id", "question_polarity", "context_condition", "category", "answer_info",
                  "additional_metadata", "context", "question", *ANSWERS):
        if record.get(field) is None:
            raise SourceDataError(f"{where(origin, row, field)}: missing; every BBQ example needs it")
    for field in ("context", "question", "category", *ANSWERS):
        if not isinstance(record[field], str):
            raise SourceDataError(f"{where(origin, row, field)}: expected text, got {record[field]!r}")
        if not record[field].strip():
            raise SourceDataError(f"{where(origin, row, field)}: empty")
    example_id = record["example_id"]
    if isinstance(example_id, bool) or not isinstance(example_id, (int, str)) or not str(example_id).strip().isdigit():
        raise SourceDataError(f"{where(origin, row, 'example_id')}: expected a whole number, got {example_id!r}")
    if record["question_polarity"] not in POLARITIES:
        raise SourceDataError(
            f"{where(origin, row, 'question_polarity')}: unknown value {record['question_polarity']!r}; "
            f"expected one of {sorted(POLARITIES)}"
        )
    if record["context_condition"] not in CONDITIONS:
        raise SourceDataError(
            f"{where(origin, row, 'context_condition')}: unknown value {record['context_condition']!r}; "
            f"expected one of {sorted(CONDITIONS)}"
        )
    if record["category"].casefold() != category.casefold():
        raise SourceDataError(
            f"{where(origin, row, 'category')}: {record['category']!r} in the file for {category!r}; wrong file?"
        )
    if not isinstance(record["answer_info"], dict):
        raise SourceDataError(f"{where(origin, row, 'answer_info')}: expected an object with ans0..ans2")
    _answer_info(record, origin, row)
    metadata = record["additional_metadata"]
    if not isinstance(metadata, dict):
        raise SourceDataError(f"{where(origin, row, 'additional_metadata')}: expected an object")
    groups = metadata.get("stereotyped_groups")
    if groups is None or not isinstance(groups, (list, tuple)) or not all(isinstance(g, str) for g in groups):
        raise SourceDataError(
            f"{where(origin, row, 'additional_metadata.stereotyped_groups')}: expected a list of group names, got {groups!r}"
        )


def read_bbq_jsonl(path: str | Path, category: str) -> list[tuple[int, dict[str, Any]]]:
    """Every example of one BBQ category file as (line number, record), each checked."""
    path = Path(path)
    records = jsonl_entries(path, "one BBQ example per line")
    for number, record in records:
        check_record(record, category, str(path), number)
    return records


def recover_roles(record: dict[str, Any], category: str) -> tuple[dict[str, str] | None, str | None]:
    """Which answer is stereotyped / anti-stereotyped / unknown, from metadata and question polarity.

    Returns (answer key per role, None) or (None, exclusion reason).
    """
    pairs = _answer_info(record, "<record>", 0)
    unknown = [k for k, (_, group) in enumerate(pairs) if group.strip().casefold() == "unknown"]
    if not unknown:
        return None, EXCLUDED_NO_UNKNOWN
    if len(unknown) > 1:
        return None, EXCLUDED_SEVERAL_UNKNOWN
    stereotyped_groups = {normalise_group(g) for g in record["additional_metadata"]["stereotyped_groups"]} - {""}
    if not stereotyped_groups:
        return None, EXCLUDED_NO_GROUPS
    people = [k for k in range(3) if k != unknown[0]]
    use_text = category in MATCH_ANSWER_TEXT
    matches = [k for k in people if normalise_group(pairs[k][0] if use_text else pairs[k][1]) in stereotyped_groups]
    if not matches:
        return None, EXCLUDED_NO_MATCH
    if len(matches) > 1:
        return None, EXCLUDED_TWO_MATCHES
    target = matches[0]
    other = people[0] if people[1] == target else people[1]
    if record["question_polarity"] == "neg":
        stereotyped, anti = target, other
    else:
        stereotyped, anti = other, target
    return {"stereotyped": ANSWERS[stereotyped], "anti_stereotyped": ANSWERS[anti], "third": ANSWERS[unknown[0]]}, None


def roles_from_order(record: dict[str, Any]) -> dict[str, str]:
    """The error: unknown found by a short wording list, the other two answers by position (see module doc)."""
    listed = [k for k, answer in enumerate(ANSWERS) if record[answer].strip().casefold() in SHORT_UNKNOWN_WORDINGS]
    third = listed[0] if listed else 2
    first, second = [k for k in range(3) if k != third]
    return {"stereotyped": ANSWERS[first], "anti_stereotyped": ANSWERS[second], "third": ANSWERS[third]}


def bbq_items(
    records: Iterable[tuple[int, dict[str, Any]]], category: str, origin: str, *, bbq_roles_by_order: bool = False
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Items of one category (ambiguous, roles recovered) and its stage rows read / ambiguous / excluded / recovered."""
    rows = []
    read = 0
    ambiguous = 0
    excluded: Counter[str] = Counter()
    seen: dict[str, int] = {}
    dimension = DIMENSION_OF_CATEGORY[category]
    for row, record in records:
        read += 1
        example_id = str(record["example_id"]).strip()
        if example_id in seen:
            raise SourceDataError(
                f"{where(origin, row, 'example_id')}: duplicate example_id {example_id} (first in row {seen[example_id]})"
            )
        seen[example_id] = row
        if record["context_condition"] != "ambig":
            continue
        ambiguous += 1
        roles, reason = recover_roles(record, category)
        if roles is None:
            excluded[reason] += 1
            continue
        if bbq_roles_by_order:
            roles = roles_from_order(record)
        base_id = f"bbq-{category}-{example_id}"
        rows.append(
            {
                "item_id": f"{base_id}/en",
                "base_id": base_id,
                "source": "bbq",
                "dimension": dimension,
                "category": category,
                "language": "en",
                "variant": "original",
                "via": "human",
                "context": f"{record['context'].strip()} {record['question'].strip()}".strip(),
                **{role: record[answer].strip() for role, answer in roles.items()},
                "third_kind": "unknown",
            }
        )
    items = pd.DataFrame(rows, columns=ITEM_COLUMNS) if rows else empty_items()
    stages = [
        {"source": "bbq", "category": category, "stage": "read", "n": read, "reason": ""},
        {"source": "bbq", "category": category, "stage": "ambiguous", "n": ambiguous, "reason": ""},
        *(
            {"source": "bbq", "category": category, "stage": "excluded", "n": n, "reason": reason}
            for reason, n in sorted(excluded.items())
        ),
        {"source": "bbq", "category": category, "stage": "recovered", "n": len(items), "reason": ""},
    ]
    return items, stages


def _hub_splits() -> Any:
    """The hub copy of BBQ as a DatasetDict (one split per category), through `datasets`."""
    origin = f"hub {HUB_DATASET}"
    try:
        import datasets
    except ImportError:
        raise SourceDataError(
            f"{origin}: the `datasets` package is not installed; install it (pip install datasets) or set "
            f"{DATA_DIR_VARIABLE} to a mirror folder holding bbq/<Category>.jsonl (layout in docs/data.md)"
        ) from None
    try:
        return datasets.load_dataset(HUB_DATASET)
    except Exception as err:  # offline, hub errors and format changes all end here
        raise SourceDataError(
            f"{origin}: could not load ({type(err).__name__}: {err}). Offline? Set {DATA_DIR_VARIABLE} or pass "
            "data_dir= to a mirror folder holding bbq/<Category>.jsonl (layout in docs/data.md)"
        ) from err


def _hub_records(split: Iterable[dict[str, Any]], category: str, origin: str) -> list[tuple[int, dict[str, Any]]]:
    """Hub rows as (row index, record), checked like mirror lines."""
    records = []
    for index, record in enumerate(split):
        check_record(record, category, origin, index)
        records.append((index, record))
    return records


def load_bbq(
    data_dir: str | Path | None = None,
    *,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    per_category: int | None = 30,
    seed: int = DEFAULT_SEED,
    bbq_roles_by_order: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """BBQ ambiguous examples as English original items, plus the count of items at each stage.

    Reads `data_dir` (or $BIASAUDIT_DATA_DIR)/bbq/<Category>.jsonl, or with neither set the
    hub copy `Elfsong/BBQ` through `datasets`. A category with no file (or split) is reported
    as stage `missing` and with a MissingCategoryWarning; the others load as usual.
    The context is passage + " " + question; continuations are the answers' texts, third is
    the unknown answer (third_kind `unknown`). `per_category` items with recovered roles are
    sampled per category with `seed` (None keeps all). `bbq_roles_by_order=True` switches on the
    answer-order error described in the module docstring.

    Returns (items, stages); stages has rows read (all examples), ambiguous, excluded (with
    reason), recovered (= ambiguous minus excluded), sampled, or missing (with where it was
    looked for).
    """
    check_per_category(per_category)
    categories = [categories] if isinstance(categories, str) else list(categories)
    unknown = [c for c in categories if c not in DIMENSION_OF_CATEGORY]
    if unknown:
        raise ValueError(f"unknown BBQ category name(s) {unknown}; known: {sorted(DIMENSION_OF_CATEGORY)}")
    folder = resolve_data_dir(data_dir)
    hub = _hub_splits() if folder is None else None
    frames = []
    stages: list[dict[str, Any]] = []
    for category in dict.fromkeys(categories):
        if folder is not None:
            path = folder / "bbq" / f"{category}.jsonl"
            origin = str(path)
            records = read_bbq_jsonl(path, category) if path.is_file() else None
            missing_reason = f"no file {path}"
        else:
            split = category.lower()
            origin = f"hub {HUB_DATASET} split {split!r}"
            records = _hub_records(hub[split], category, origin) if split in hub else None
            missing_reason = f"no split {split!r} in hub {HUB_DATASET}"
        if records is None:
            warnings.warn(
                f"BBQ category {category!r} is missing ({missing_reason}); it is left out and counted as 'missing' in stages",
                MissingCategoryWarning,
                stacklevel=2,
            )
            stages.append({"source": "bbq", "category": category, "stage": "missing", "n": 0, "reason": missing_reason})
            continue
        items, category_stages = bbq_items(records, category, origin, bbq_roles_by_order=bbq_roles_by_order)
        sampled = seeded_sample(items, per_category, seed)
        frames.append(sampled)
        stages.extend(category_stages)
        stages.append({"source": "bbq", "category": category, "stage": "sampled", "n": len(sampled), "reason": ""})
    frames = [f for f in frames if not f.empty]
    items = pd.concat(frames, ignore_index=True) if frames else empty_items()
    origin = f"{folder / 'bbq'}" if folder is not None else f"hub {HUB_DATASET}"
    table = stage_table(stages)
    table.attrs["origin"] = origin
    return validate_items(items, origin=origin, first_row=0), table
