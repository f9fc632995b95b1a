"""The book's released-study part: where it reads from, how its pages are marked, and what its first
page says with and without the released scores. (The part itself runs and renders in
tests/test_notebooks.py wherever the released scores are at hand.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from biasaudit import released_study as part
from biasaudit.params import RunParams
from biasaudit.released import ReleasedDataError, find_released, released_cache, released_models_in

FIXTURES = Path(__file__).parent / "fixtures" / "released"


@pytest.fixture
def no_released(monkeypatch, tmp_path):
    """A machine with nothing cached and no mirror folder."""
    monkeypatch.setenv("BIASAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BIASAUDIT_DATA_DIR", raising=False)
    return tmp_path


def test_a_folder_counts_models_with_both_files_and_the_label_fix(tmp_path):
    # tiny-b has an item file but no noise-floor file, so it cannot be analysed like a run.
    assert released_models_in(FIXTURES) == ["tiny-a"]
    shutil.copytree(FIXTURES, tmp_path / "no_fix")
    (tmp_path / "no_fix" / "label_fix.json").unlink()
    assert released_models_in(tmp_path / "no_fix") == []
    assert released_models_in(tmp_path / "missing") == []


def test_auto_finds_the_mirror_then_prefers_the_cache(no_released, monkeypatch):
    assert find_released() is None
    assert part.released_source(RunParams()) is None
    mirror = no_released / "mirror"
    shutil.copytree(FIXTURES, mirror / "released")
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(mirror))
    assert part.released_source(RunParams()) == mirror / "released"
    cache = released_cache()
    shutil.copytree(FIXTURES, cache)
    assert part.released_source(RunParams()) == cache


def test_off_a_released_main_run_and_a_missing_folder(no_released, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(no_released))
    shutil.copytree(FIXTURES, no_released / "released")
    assert part.released_source(RunParams(released_study="off")) is None
    assert part.released_source(RunParams(released_scores=str(FIXTURES))) is None, "the main run is the study"
    assert part.released_source(RunParams(released_study=str(FIXTURES))) == FIXTURES
    with pytest.raises(ReleasedDataError, match="nowhere"):
        part.released_source(RunParams(released_study=str(no_released / "nowhere")))


def test_part_params_are_the_study_file_reading_the_folder():
    params = part.part_params(FIXTURES)
    assert params.released_scores == str(FIXTURES) and params.run_name == "released"
    assert params.n_permutations == 20_000 and params.models == []
    values = part.part_values(params)
    assert list(values)[0] == "run_name" and values["released_scores"] == str(FIXTURES)
    assert "released_study" not in values


def test_part_chapters_leave_out_translation_and_template_tests():
    names = ["00_items", "01_translate", "02_score", "10_language_drops", "30_template_tests"]
    assert part.part_chapters(names) == ["00_items", "02_score", "10_language_drops"]


def test_a_released_page_is_titled_noted_and_links_left_out_chapters_to_the_main_part(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("# The verdict: which languages shift?\n\nSome text."),
        nbformat.v4.new_markdown_cell("See [the drops](10_language_drops) and [the templates](30_template_tests)."),
    ])
    path = tmp_path / "22_verdict.ipynb"
    nbformat.write(notebook, path)
    part.mark_as_released(path, "22_verdict")
    cells = nbformat.read(path, as_version=4).cells
    heading, note, text = cells[1].source.split("\n\n")
    assert heading == "# The verdict: which languages shift? (released study)" and text.endswith("Some text.")
    assert note.startswith(":::{note}") and "](../analyses/22_verdict)" in note
    assert cells[2].source == "See [the drops](10_language_drops) and [the templates](../analyses/30_template_tests)."


def test_first_page_without_the_scores_says_how_to_get_them(no_released, tmp_path):
    params_file = tmp_path / "p.yml"
    params_file.write_text("run_name: x\n")
    page = part.index_page(params_file, None, [])
    assert page.startswith("# The released study\n") and "make released" in page and "|" not in page
    params_file.write_text("released_study: \"off\"\n")
    assert "`released_study: off`" in part.index_page(params_file, None, [])
    params_file.write_text(f"released_scores: {FIXTURES}\n")
    assert "already reads the paper's released scores" in part.index_page(params_file, None, [])


def test_clearing_removes_pages_of_an_earlier_build(tmp_path):
    folder = tmp_path / "released"
    folder.mkdir()
    (folder / "10_language_drops.ipynb").write_text("{}")
    part.clear_part(folder)
    assert folder.is_dir() and not list(folder.iterdir())
