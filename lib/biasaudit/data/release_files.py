"""Where the paper's released scores live, pinned: the repository, the commits, the files of each
of the ten models (sha256-checked), the download into the cache, and the error that says what
to fetch when there is no network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from biasaudit.core.paths import cache_dir, project_path
from biasaudit.data.downloads import DownloadError, PinnedFile, fetch

# sha256 of the files whose content this project has checked against the paper's published
# numbers (tests/test_released.py reproduces its per-cell results from them). The other models' files are verified against the hash recorded when they
# were first downloaded (trust on first use, with a warning); add their hashes here once known.
KNOWN_SHA256: dict[str, str] = {
    "label_fix.json": "911344c04f393cb64a3001cd307ac9b8ae68360eecc88b2349c911004ef0b6bd",
    "llama3.1-8b_checkpoint.csv": "e9b0f8ffe42ca570a1e6ed9a57cad6d8d5f1ac0c3776c7b580a2a109475bdf30",
    "llama3.1-8b_noise_floor.csv": "2d89533b3f5f0f19c138b68f37a0680b5d9b082dcda2998c13a24e49f6b1b649",
    "cell_tests.csv": "d857af49ff233e01866b53d3c9b60dddcb2f461d95350a25d59dd9f144e09f00",
    "floor_tests.csv": "195b6c3dcdc531ab78a8c9ee122bf9850f3ecd8ef1f52700300a79e0344a5f0d",
    "spike_in_null.csv": "e7d9a1fd7970906917a8517c3a08f26e420d3cfb399cc6e3f9381298592a331c",
}


# --------------------------------------------------------------------------------------------
# Where the released files live, pinned
# --------------------------------------------------------------------------------------------

RELEASED_REPOSITORY: str = "HarshKumar3014/MultiLLMs"
RESULTS_COMMIT: str = "84281019c5969724248429e3cc6d20269ea9e32e"  # results/v2 and results/reanalysis
LABEL_FIX_COMMIT: str = "fb6233c1559426e346bd71d7a04334aad5e711a4"  # data/label_fix.json
RELEASED_MODELS: tuple[str, ...] = (
    "aya-23-8b", "aya-expanse-8b", "bloomz-7b", "gemma2-9b", "llama3.1-8b",
    "mistral-7b", "olmo2-7b", "qwen2.5-7b", "solar-10.7b", "yi-1.5-9b",
)


class ReleasedDataError(RuntimeError):
    """The released files are missing, unreadable, or not what they should be."""


def read_release_json(path: str | Path, kind: type, what: str):
    """A JSON file of the release, which must hold a `kind` (dict or list); a ReleasedDataError names the file
    and what it should be otherwise."""
    path = Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReleasedDataError(f"{path}: not a readable {path.name}: {err}") from err
    if not isinstance(content, kind):
        raise ReleasedDataError(f"{path}: expected {what}, got {type(content).__name__}")
    return content


def released_file(name: str, path: str, commit: str) -> PinnedFile:
    """One file of the paper's release at its pin (sha256 from KNOWN_SHA256 when known)."""
    return PinnedFile(name, RELEASED_REPOSITORY, path, commit, KNOWN_SHA256.get(name))


# The release's other files the book reads, beside each model's scores: (name, path under
# MultilingualBiasAudit/, commit). The result files hold the paper's own published numbers (the released
# part shows them beside this run's); the inputs hold what the paper's tables rest on (`data.release_inputs`).
# None has a known sha256: each is trusted on its first download, as the other models' scores are.
RELEASE_INPUTS: tuple[tuple[str, str, str], ...] = (
    ("validation_results.json", "data/validation_results.json", "2cef8ea47da434c6583f6799b6f45965ef9a123a"),
    ("contrast_judgment_full.csv", "data/contrast_judgment_full.csv", "355aca29c57814a82b7051eec3986b37a3dc6972"),
    ("token_counts.csv", "results/reanalysis/token_counts.csv", "1ae703013a4b854d9aa0f478dc7ac5e9b32ba584"),
)
# The paper's items themselves (`data.release_items`: the item bank `item_banks: [paper]`): every item version's
# texts, and the English rewordings behind the noise floors.
PAPER_ITEMS: tuple[tuple[str, str, str], ...] = (
    ("prompts.json", "data/prompts.json", "2cef8ea47da434c6583f6799b6f45965ef9a123a"),
    ("noise_floor_paraphrases.json", "data/noise_floor_paraphrases.json", "d08d460e547d712c05986b4cace52d868e35705a"),
)
PAPER_RESULTS: tuple[tuple[str, str, str], ...] = (
    ("cell_tests.csv", "results/reanalysis/cell_tests.csv", RESULTS_COMMIT),
    ("floor_tests.csv", "results/reanalysis/floor_tests.csv", RESULTS_COMMIT),
    ("bootstrap_dfg_minus_floor.csv", "results/reanalysis/bootstrap_dfg_minus_floor.csv", RESULTS_COMMIT),
    ("spike_in_null.csv", "results/reanalysis/spike_in_null.csv", RESULTS_COMMIT),
    ("spike_in_null_200.csv", "results/reanalysis/spike_in_null_200.csv", "19ed3cd149a710bd4816a6b5d4dfba03c7370290"),
    ("paper_numbers.json", "results/reanalysis/paper_numbers.json", "19ed3cd149a710bd4816a6b5d4dfba03c7370290"),
    ("robustness_checks.json", "results/reanalysis/robustness_checks.json", "19ed3cd149a710bd4816a6b5d4dfba03c7370290"),
    ("translation_quality.json", "results/reanalysis/translation_quality.json",
     "15ba4228060bcf9aee5f95e98437bed3ebc09af5"),
    ("pipeline_ablation.csv", "results/reanalysis/pipeline_ablation.csv", "fd4fac7171dc31ba50d89ca4465e1a7aa42bb981"),
    ("review3_checks.json", "results/reanalysis/review3_checks.json", "c4342a8a473c73b9f48eaf1fae2cef7ac435bb6b"),
    ("association_and_dimensions.json", "results/reanalysis/association_and_dimensions.json",
     "15ba4228060bcf9aee5f95e98437bed3ebc09af5"),
    ("review2_checks.json", "results/reanalysis/review2_checks.json", "1ae703013a4b854d9aa0f478dc7ac5e9b32ba584"),
    ("review_runs.json", "results/reanalysis/review_runs.json", "509680d7b5b59ea07d32422df5e6551d1f041872"),
)


# Each model's scores of the within-language rewordings (the paper's Table 15: its Hindi and Spanish translations
# reworded in the same language; rows with condition "rw_target"), from the paper's later runs: three models'
# files in results/v2/within_language_runs/ @15ba422, the other seven's in results/v2/review_runs/ @509680d,
# each named <model>.csv there and <model>_within_language.csv here.
WITHIN_LANGUAGE_SUFFIX = "_within_language.csv"
WITHIN_LANGUAGE_RUNS: dict[str, tuple[str, str]] = dict.fromkeys(
    ("bloomz-7b", "llama3.1-8b", "mistral-7b"), ("within_language_runs", "15ba4228060bcf9aee5f95e98437bed3ebc09af5"))
REVIEW_RUNS: tuple[str, str] = ("review_runs", "509680d7b5b59ea07d32422df5e6551d1f041872")


def released_files(models: Iterable[str] | None = None, *, with_paper_results: bool = True) -> list[PinnedFile]:
    """The files `fetch_released` downloads: per model the item and noise-floor scores, its LLM rewordings'
    scores and its within-language rewordings' scores, then label_fix.json, the inputs beside the scores
    (`RELEASE_INPUTS`), the paper's items (`PAPER_ITEMS`) and (optionally) the paper's own results
    (`PAPER_RESULTS`), all at pinned commits."""
    chosen = list(RELEASED_MODELS if models is None else models)
    unknown = [m for m in chosen if m not in RELEASED_MODELS]
    if unknown:
        raise ValueError(f"unknown released model(s) {unknown}; the release has {list(RELEASED_MODELS)}")
    base = "MultilingualBiasAudit/"
    files = []
    for model in chosen:
        files.append(released_file(f"{model}_checkpoint.csv", f"{base}results/v2/{model}_checkpoint.csv",
                                   RESULTS_COMMIT))
        files.append(released_file(f"{model}_noise_floor.csv",
                                   f"{base}results/v2/noise_floor/{model}_noise_floor.csv", RESULTS_COMMIT))
        files.append(released_file(f"{model}_noise_floor_llm.csv",
                                   f"{base}results/v2/noise_floor/{model}_noise_floor_llm.csv", RESULTS_COMMIT))
        runs, commit = WITHIN_LANGUAGE_RUNS.get(model, REVIEW_RUNS)
        files.append(released_file(f"{model}{WITHIN_LANGUAGE_SUFFIX}", f"{base}results/v2/{runs}/{model}.csv", commit))
    files.append(released_file("label_fix.json", f"{base}data/label_fix.json", LABEL_FIX_COMMIT))
    files += [released_file(name, base + path, commit) for name, path, commit in (*RELEASE_INPUTS, *PAPER_ITEMS)]
    if with_paper_results:
        files += [released_file(name, base + path, commit) for name, path, commit in PAPER_RESULTS]
    return files


def release_file(folder: str | Path, name: str) -> Path | None:
    """A file of the release in a folder of released files: flat (the cache, a data folder's released/) or
    in the repository's own layout (data/, results/reanalysis/, results/v2/noise_floor/); None if absent."""
    folder = Path(folder)
    folder = folder if folder.is_dir() else folder.parent
    for root in (folder, folder / "MultilingualBiasAudit"):
        for sub in ("", "data", "results/reanalysis", "results/v2/noise_floor", "noise_floor"):
            candidate = root / sub / name
            if candidate.is_file():
                return candidate
    return None


def released_cache() -> Path:
    """cache_dir()/released/<commit>: where downloads go (BIASAUDIT_CACHE_DIR moves the cache)."""
    return cache_dir() / "released" / RESULTS_COMMIT[:12]


def fetch_released(
    models: Iterable[str] | None = None,
    *,
    folder: str | Path | None = None,
    with_paper_results: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download the released files over HTTPS from raw GitHub at the pinned commits into
    `folder` (default `released_cache()`), verify each one's sha256, and return the folder
    (`biasaudit.data.downloads.fetch`: files already there and verified are not downloaded again).
    Without network access this raises ReleasedDataError saying which files to download and where.
    """
    folder = Path(folder) if folder is not None else released_cache()
    alternative = ("Or put them in any folder and pass that folder instead of 'download' (parameter\n"
                   "`released_scores`, or `biasaudit.data.release_import.import_released(run, folder)`); the folder\n"
                   "$BIASAUDIT_DATA_DIR/released is used by the tests.")
    try:
        return fetch(released_files(models, with_paper_results=with_paper_results), folder, timeout=timeout,
                     alternative=alternative)
    except DownloadError as err:
        raise ReleasedDataError(f"the paper's released scores: {err}") from None


def paper_item_files() -> list[PinnedFile]:
    """What the paper's item bank needs: the items, their rewordings and the label fix, at their pins."""
    base = "MultilingualBiasAudit/"
    return [released_file(name, base + path, commit) for name, path, commit in PAPER_ITEMS] + [
        released_file("label_fix.json", f"{base}data/label_fix.json", LABEL_FIX_COMMIT)]


def fetch_paper_items(*, folder: str | Path | None = None, timeout: float = 60.0) -> Path:
    """Download the paper's item bank (`paper_item_files`) into `folder` (default the cache), as
    `fetch_released` does the scores; offline, a ReleasedDataError says what to fetch and where."""
    folder = Path(folder) if folder is not None else released_cache()
    alternative = ("Or put prompts.json and label_fix.json (noise_floor_paraphrases.json too, for the rewordings) in\n"
                   "$BIASAUDIT_DATA_DIR/released, or in the folder the params' `released_scores` names.")
    try:
        return fetch(paper_item_files(), folder, timeout=timeout, alternative=alternative)
    except DownloadError as err:
        raise ReleasedDataError(f"the paper's items: {err}") from None


def resolve_released_source(source: str | Path, models: Iterable[str] | None = None) -> Path:
    """'download' (the cache, downloading what is missing) or a local folder or file."""
    if str(source) == "download":
        return fetch_released(models)
    path = project_path(source)
    if not path.exists():
        raise ReleasedDataError(
            f"{path}: no such file or folder. Give a folder holding the paper's released files "
            f"(<model>_checkpoint.csv, <model>_noise_floor.csv, label_fix.json) or 'download'."
        )
    return path
