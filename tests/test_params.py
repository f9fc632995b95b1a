"""Params files and notebook parameters are validated before anything runs; every error names the
file (or notebook) and the key, and says what was expected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from biasaudit.core.options import StudyOptions
from biasaudit.run.params import ParamsError, RunParams, read_params, validate_params

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, key, expected", [
    ("languages: es\n", "languages", "valid list"),  # a string where a list belongs: once ran English only
    ("langauges: [es]\n", "langauges", "not a parameter"),
    ("alpha: '0.1'\n", "alpha", "valid number"),
    ("alpha: 1.5\n", "alpha", "less than 1"),
    ("models: [smollm-135m]\n", "models", "offline model"),
    ("languages: [es, xx]\n", "languages", "'xx' is not a language code"),
    ("languages: [es, es]\n", "languages", "appears twice"),
    ("item_banks: [data/items/nope.csv]\n", "item_banks", "no such item file"),
    ("data_dir: /no/such/folder\n", "data_dir", "no such folder"),
    ("released_scores: /no/such/folder\n", "released_scores", "no such folder"),
    ("n_permutations: 0\n", "n_permutations", "greater than or equal to 1"),
    ("aggregate: median\n", "aggregate", "'mean' or 'sum'"),
    ("include_rewordings: 'yes'\n", "include_rewordings", "valid boolean"),
    ("run_name: my run\n", "run_name", "pattern"),
    ("executor: dask\n", "executor", "'local' or 'ray'"),
    ("engine: llamacpp\n", "engine", "'transformers', 'vllm' or 'completions'"),
    ("engine: completions\n", "engine_url", "needs the server's base URL"),
    ("engine_url: localhost:8000\n", "engine_url", "pattern"),
    ("ray_gpus_per_actor: -1\n", "ray_gpus_per_actor", "greater than or equal to 0"),
    ("shard_items: 0\n", "shard_items", "greater than or equal to 1"),
])
def test_a_bad_value_names_the_file_the_key_and_what_was_expected(tmp_path, text, key, expected):
    path = write(tmp_path, text)
    with pytest.raises(ParamsError) as caught:
        read_params(path)
    message = str(caught.value)
    assert str(path) in message and f"key {key!r}" in message and expected in message


def test_a_missing_file_and_bad_yaml_are_named(tmp_path):
    with pytest.raises(ParamsError, match="no such params file"):
        read_params(tmp_path / "missing.yml")
    with pytest.raises(ParamsError, match="not valid YAML"):
        read_params(write(tmp_path, "languages: [es\n"))
    with pytest.raises(ParamsError, match="mapping"):
        read_params(write(tmp_path, "- es\n- fr\n"))


def test_every_problem_is_reported_at_once(tmp_path):
    with pytest.raises(ParamsError, match="3 problem") as caught:
        read_params(write(tmp_path, "languages: es\nseed: -1\nmodles: []\n"))
    assert all(k in str(caught.value) for k in ("'languages'", "'seed'", "'modles'"))


def test_scoring_needs_models_unless_the_run_reads_released_scores(tmp_path):
    with pytest.raises(ParamsError, match="key 'models': empty"):
        read_params(write(tmp_path, "models: []\n")).require_models(str(tmp_path / "run.yml"))
    read_params(write(tmp_path, "models: []\nreleased_scores: download\n")).require_models()


def test_options_and_namespace():
    params = validate_params({"alpha": 0.01, "n_bootstrap": 100}, "test")
    assert params.options == StudyOptions(alpha=0.01, n_bootstrap=100)
    namespace = {"alpha": 0.01, "models": [], "chapter": object(), "report": None}  # other names are ignored
    assert RunParams.from_namespace(namespace).model_filter is None
    with pytest.raises(ParamsError, match="the notebook's parameters: 1 problem"):
        RunParams.from_namespace({"languages": "es"})


def test_make_book_with_a_missing_params_file_says_so():
    result = subprocess.run([sys.executable, "-m", "biasaudit.book.run_book", "--params", "params/missing.yml"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
    assert "missing.yml: no such params file" in result.stderr and "Traceback" not in result.stderr


def test_run_params_is_its_sections_and_each_key_belongs_to_one():
    from biasaudit.run.params import SECTIONS
    owners: dict[str, list[str]] = {}
    for section in SECTIONS:
        for key in section.model_fields:
            owners.setdefault(key, []).append(section.__name__)
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}
    assert set(owners) == set(RunParams.model_fields)
    for section in SECTIONS:  # a check of a section is not shadowed by another's of the same name
        mine = section.__pydantic_decorators__.field_validators
        theirs = RunParams.__pydantic_decorators__.field_validators
        assert {name: theirs[name].info.fields for name in mine} == {name: d.info.fields for name, d in mine.items()}


@pytest.mark.parametrize("text, key", [
    ("translators: [smollm-135m]\n", "translators"),  # a check in the chapter-31 section
    ("rescore_languages: [xx]\n", "rescore_languages"),  # in the single-chapters section
    ("pivots: [es, es]\n", "pivots"),  # in the translation section
])
def test_every_sections_checks_run_in_the_whole(tmp_path, text, key):
    with pytest.raises(ParamsError, match=f"key '{key}'"):
        read_params(write(tmp_path, text))


def test_every_parameter_says_what_it_means(tmp_path):
    """The parameters page's "what it means" column is the schema's field descriptions: one for every key."""
    from biasaudit.book.run_book import write_parameters_page

    missing = [name for name, field in RunParams.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"parameters without a description: {missing}"
    write_parameters_page("params/default.yml", tmp_path)
    page = (tmp_path / "parameters.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == len(RunParams.model_fields) and all(line.count(" | ") == 3 for line in rows)
    assert "| `alpha` | `0.05` | set in the file | false-discovery rate for calling a shift reliable |" in page
    assert "| `level` | `0.95` | default | level of every interval |" in page
