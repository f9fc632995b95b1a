"""The book's released-study part: the chapters run a second time, on the paper's released scores,
when those are on this machine (or the params name a folder or ask for the download).

One part per run, not a run column in each table: the two runs differ in models (two small
offline models against the paper's 7–10B models), items (the project's bank against the paper's
StereoSet/BBQ/handcrafted set) and settings (the study's permutation counts), so their rows never
pair up, and each chapter reads the same on both. The part's first page puts the one comparison
that does pair up, the verdict per language, side by side.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd
import yaml

from biasaudit.book.chapters import verdict
from biasaudit.core.paths import project_path
from biasaudit.data import release_files
from biasaudit.data.languages import language_label
from biasaudit.data.release_files import (
    ReleasedDataError,
    fetch_released,
    released_cache,
    resolve_released_source,
)
from biasaudit.data.downloads import verified
from biasaudit.data.released import find_released, released_models_in
from biasaudit.run.params import BOOK_KEYS, RunParams, read_params, validate_params

RELEASED = "book/released/"
RELEASED_PARAMS = "params/released.yml"
# Chapters the part leaves out, and why (its first page says so).
NOT_IN_PART: dict[str, str] = {
    "01_translate": "the release holds the paper's scores, not its translation texts, so there is nothing to judge",
    "30_template_tests": "template tests put new questions to chat models; they read no item scores",
    "31_template_translation": "translators are compared on templates, and the release has no model to score "
                               "machine-translated items with",
    "40_reliability": "the fault sweep is about the program, not about any run's scores",
}
GET_THEM = ("run `make released` (it downloads the ten models' item and noise-floor scores and the label fix from "
            "the paper's repository at pinned commits, sha256-checked, into `~/.cache/biasaudit`; about 1 MB a model) and "
            "then `make book`. Offline, put the files in a folder and set `released_study:` in the params to it.")


# `auto` tries the download once per build: a short wait for a server that does not answer, no retry.
AUTO_DOWNLOAD_TIMEOUT = 10.0


@dataclass(frozen=True)
class PartSource:
    """Where the part reads the released scores from (None: no part), and how they got there, in one
    line for the build's output and the part's first page."""

    folder: Path | None
    how: str
    params_file: str = "params/released.yml"


def released_source(params: RunParams) -> PartSource:
    """The folder the part reads, and how it was found or fetched.

    "auto" uses the download cache when it holds every pinned file of the release; otherwise it tries
    the pinned, sha256-checked download into the cache once (short timeout, no retry) and, when
    that fails (offline), falls back to whatever released scores are already on this machine (a
    partly filled cache, `$BIASAUDIT_DATA_DIR/released`), else builds no part and says why: the
    build goes on either way. A folder or "download" must work (a missing folder or a failed
    download stops the run before any chapter); "off" and a main run that itself reads the
    released scores build no part.
    """
    part = _released_source(params)
    return PartSource(part.folder, part.how, params.released_params)


def _released_source(params: RunParams) -> PartSource:
    setting = params.released_study
    if setting == "off":
        return PartSource(None, "released_study: off in the params, so no released part was built")
    if params.released_scores:
        return PartSource(None, "the main run reads the released scores itself, so there is no separate part")
    if setting != "auto":
        folder = resolve_released_source(setting)
        fetched = "downloaded (pinned, sha256-checked) into" if setting == "download" else "read from"
        return PartSource(folder, f"{_models_phrase(folder)} {fetched} {folder}")
    cache = released_cache()
    if all(verified(file, cache) for file in release_files.released_files()):
        return PartSource(cache, f"{_models_phrase(cache)} found in the download cache {cache}")
    try:
        folder = fetch_released(timeout=AUTO_DOWNLOAD_TIMEOUT)
    except ReleasedDataError as err:
        reason = download_failure(str(err))
        if len(released_models_in(cache)) == len(release_files.RELEASED_MODELS):
            return PartSource(cache, f"{_models_phrase(cache)} found in the download cache {cache}; the release's other "
                                     f"files that are not there could not be downloaded: {reason}")
        found = find_released()
        if found is None:
            return PartSource(None, f"not built: the released scores are not on this machine, and {reason}")
        return PartSource(found, f"{_models_phrase(found)} read from {found}; the rest could not be downloaded: "
                                 f"{reason}")
    return PartSource(folder, f"{_models_phrase(folder)} downloaded from {release_files.RELEASED_REPOSITORY} at commit "
                              f"{release_files.RESULTS_COMMIT[:12]} (sha256-checked) into {folder}")


def _models_phrase(folder: Path) -> str:
    n = len(released_models_in(folder))
    return f"the released scores of {n} of the study's {len(release_files.RELEASED_MODELS)} models"


# What a failed connection says (urllib, socket), as opposed to a server that answered with an error.
NO_NETWORK = re.compile(r"urlopen error|Name or service not known|Temporary failure in name resolution|timed out|"
                        r"Connection refused|Network is unreachable|No route to host", re.I)


def download_failure(message: str) -> str:
    """Why the download failed, in words for the page: no network as one plain clause, else the cause the
    download error names (a checksum, an HTTP status), not a raw exception."""
    first = message.splitlines()[0] if message else ""
    match = re.search(r"file\(s\) \((.*)\)\.?$", first)
    cause = (match.group(1) if match else first).strip()
    if NO_NETWORK.search(cause):
        return (f"this machine could not reach {release_files.RELEASED_REPOSITORY} on GitHub to download them (no "
                "network connection)")
    return f"the download from {release_files.RELEASED_REPOSITORY} failed: {cause}"


def part_params(source: Path, params_file: str | Path = RELEASED_PARAMS) -> RunParams:
    """The part's params file (params/released.yml unless the main params' `released_params` names
    another) with its scores read from `source`."""
    values = yaml.safe_load(project_path(params_file).read_text(encoding="utf-8"))
    values = {key: value for key, value in values.items() if key not in BOOK_KEYS}
    return validate_params({**values, "released_scores": str(source)}, f"{params_file} (released study)")


def part_values(params: RunParams, params_file: str | Path = RELEASED_PARAMS) -> dict:
    """What the part passes to papermill: the keys its params file sets, and the folder."""
    given = [key for key in yaml.safe_load(project_path(params_file).read_text(encoding="utf-8"))
             if key not in BOOK_KEYS]
    return {key: getattr(params, key) for key in dict.fromkeys([*given, "released_scores"])}


def part_chapters(names: list[str]) -> list[str]:
    return [name for name in names if name not in NOT_IN_PART]


def clear_part(folder: Path) -> None:
    """Remove the pages of an earlier build, so a part that cannot be built now shows nothing stale."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


# A chapter's Exercises section, up to the next heading: its exercises and solutions (labelled once, on the
# main run's page) are about the main run.
EXERCISES = re.compile(r"^### Exercises[ \t]*\n.*?(?=^#{1,6} |\Z)", re.M | re.S)


def mark_as_released(path: Path, name: str) -> None:
    """Title the page as the released study's, say so under the title, point links to chapters the
    part leaves out at the main part's pages, and leave the exercises to the main run's page."""
    notebook = nbformat.read(path, as_version=4)
    first = next(i for i, cell in enumerate(notebook.cells)
                 if cell.cell_type == "markdown" and cell.source.startswith("# "))
    heading, _, rest = notebook.cells[first].source.partition("\n")
    title = heading[2:].strip()
    note = (f":::{{note}}\nThis page is *{title}* run on the paper's released scores. The same chapter on this "
            f"build's main run is [here](../analyses/{name}); this part's parameters and its verdict side by side with "
            "the main run's are on [its first page](index).\n:::\n")
    notebook.cells[first].source = f"# {title} (released study)\n\n{note}{rest}"
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = EXERCISES.sub(f"### Exercises\n\nThe exercises and their solutions are on [the main run's page]"
                                        f"(../analyses/{name}).\n\n", cell.source)
            for left_out in NOT_IN_PART:
                cell.source = cell.source.replace(f"]({left_out})", f"](../analyses/{left_out})")
    nbformat.write(notebook, path)


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    return header + "\n".join("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False))


def verdicts_side_by_side(main: RunParams, released: RunParams) -> pd.DataFrame:
    """Language × (this run's verdict, the released study's verdict, the paper's conclusion), the
    verdicts from chapter 22's own tables."""

    def column(params: RunParams, label: str) -> pd.Series:
        languages = verdict.report(params).tables["languages"]
        return languages.set_index("language")["verdict"].rename(label)

    columns = [column(main, "this build's main run"), column(released, "the released study")]
    both = pd.concat(columns, axis=1).fillna("not in this run").rename_axis("language").reset_index()
    both["the paper's conclusion"] = [verdict.PAPER_CLAIM if code in verdict.PAPER_EXCEEDS else verdict.NO_CLAIM
                                      for code in both["language"]]
    return both.assign(language=both["language"].map(language_label))


def comparison_text(models: list[str]) -> str:
    """How far the released study's verdicts can be read against the paper's conclusion: fully with all ten
    models, partially (naming the models at hand) with fewer."""
    missing = [m for m in release_files.RELEASED_MODELS if m not in models]
    head = ("The paper's conclusion: for Hindi, Korean and Swahili the drop clearly exceeds what rewording English "
            "produces; it makes no such claim for the other languages.")
    if not missing:
        return (f"{head} The part has all ten of the paper's models, so its verdicts answer the same question on the "
                "same scores; [its verdict page](22_verdict) says where they differ from the paper's, and why.")
    return (f"{head} The part has {len(models)} of the paper's ten models ({', '.join(models)}), so the comparison is "
            f"partial: the paper's conclusion rests on all ten. To add the rest, {GET_THEM}")


def shown_paths(text: str) -> str:
    """A sentence with its folders in code font, the home folder written ~ (a page shows where the files came
    from on the reader's own machine, not as prose)."""
    home = str(Path.home())
    return re.sub(r"(?<![`\w])(/[^\s,;`]+[^\s,;.`])", lambda m: "`" + m.group(1).replace(home, "~", 1) + "`", text)


def index_page(main_params_path: str | Path, part: PartSource, chapters: list[str]) -> str:
    """The part's first page: what it is, where its scores came from and how they were fetched, its
    parameters, and the verdict side by side with the main run's; or, with no part, why and how to
    get one."""
    main = read_params(main_params_path)
    text = "# The released study\n\n"
    if main.released_scores:
        return text + (f"This build's main run (`{Path(main_params_path).as_posix()}`) already reads the paper's "
                       "released scores, so its chapters are the released study; this part repeats nothing. Start at "
                       "[the verdict](../analyses/22_verdict).\n")
    source = part.folder
    if source is None:
        return text + (f"This build: {shown_paths(part.how)}. So this part of the book holds no chapters, and no page of this "
                       f"build shows results from the released study. To add it, {GET_THEM}\n")
    params = part_params(source, part.params_file)
    models = released_models_in(source)
    side = verdicts_side_by_side(main, params)
    rows = markdown_table(pd.DataFrame(
        [(f"`{k}`", f"`{v!r}`") for k, v in part_values(params, part.params_file).items()],
        columns=["parameter", "value"]))
    listed = "\n".join(f"- []({name})" for name in chapters)
    left_out = "\n".join(f"- [](../analyses/{name}): {why}" for name, why in NOT_IN_PART.items())
    return text + f"""The chapters of this part run on the item scores the paper "Lost in Translation" released:
{len(models)} of the study's ten models ({', '.join(models)}). This build: {shown_paths(part.how)}. The two label errors of the raw
files are fixed on import (chapter 20 shows what they do). Every chapter reads the same as in the main part; the
numbers are this build's own analyses of the released scores, not figures copied from the paper.

A part per run rather than a run column in each table: the two runs share no model and no item (two small
offline models on the project's own bank against the paper's 7–10B models on StereoSet, BBQ and its own
items), so their rows never pair up. The one comparison that does is the verdict per language:

{markdown_table(side)}

The rule behind each verdict is on [the verdict page](22_verdict). {comparison_text(models)}

## Parameters

The part runs with `{Path(part.params_file).as_posix()}`, its scores read from the folder above:

{rows}

## Chapters

{listed}

Left out of this part:

{left_out}
"""


def start_text(built: bool) -> str:
    """The front page's first advice, for what this build holds: the released study where it was built, the
    worked example otherwise (with how to add the released part)."""
    if built:
        return ("**Start with [the released study](released/index)**: every results chapter rerun on the item "
                "scores the paper released for its ten 7–11B models, whose first page gives the verdict per language "
                "(real shift, beyond the typical floor but not clearly, too little evidence, or within noise) side by "
                "side with this build's and with the paper's own conclusion. The rest of the book is **the worked "
                "example**: the default run, two small models on this project's own items, computed on your machine, "
                "with every chapter rerunnable with other parameters.\n")
    return ("**Start with the worked example**, [the language drops](analyses/10_language_drops) of this build's "
            "run (two small models on this project's own items, computed on your machine), and end at "
            "[its verdict](analyses/22_verdict) per language. This build has no released study: the paper's released "
            "scores of its ten 7–11B models were not on this machine. Run `make released` on a machine that is "
            "online, then `make book`, to add that part; [its first page](released/index) says why it was not "
            "built.\n")


def write_index(folder: Path, main_params_path: str | Path, part: PartSource, chapters: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.md").write_text(index_page(main_params_path, part, chapters), encoding="utf-8")

