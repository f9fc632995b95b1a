"""The book's released-study part: where it reads from, how its pages are marked, and what its first
page says with and without the released scores. (The part itself runs and renders in
tests/test_notebooks.py wherever the released scores are at hand.)"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
from pathlib import Path

import nbformat
import pytest
from biasaudit.book import released_part as part
from biasaudit.data import downloads, release_files
from biasaudit.data.release_files import ReleasedDataError, released_cache
from biasaudit.data.released import released_models_in
from biasaudit.run.params import RunParams

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


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """The paper's repository served on 127.0.0.1 with one model, tiny-a, every file pinned by its
    sha256: `released_study: auto` downloads from it as it would from GitHub."""
    root = tmp_path / "repository"
    monkeypatch.setattr(release_files, "RELEASED_MODELS", ("tiny-a",))
    pins = {}
    for pinned in release_files.released_files():
        target = root / pinned.path
        target.parent.mkdir(parents=True, exist_ok=True)
        source = FIXTURES / pinned.name
        # The paper's own per-cell results are not among the fixtures: any small file stands in for them.
        target.write_bytes(source.read_bytes() if source.exists() else b"model,language\n")
        pins[pinned.name] = hashlib.sha256(target.read_bytes()).hexdigest()
    monkeypatch.setattr(release_files, "KNOWN_SHA256", pins)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    serve_from(monkeypatch, f"http://127.0.0.1:{server.server_address[1]}")
    yield root
    server.shutdown()


def serve_from(monkeypatch, base: str) -> None:
    monkeypatch.setattr(downloads.PinnedFile, "url", property(lambda f: f"{base}/{f.path}"))


def test_auto_downloads_the_scores_when_they_are_not_cached(no_released, repository):
    part_source = part.released_source(RunParams())
    assert part_source.folder == released_cache() and released_models_in(released_cache()) == ["tiny-a"]
    assert "1 of the study's 1 models downloaded from HarshKumar3014/MultiLLMs" in part_source.how
    assert "sha256-checked" in part_source.how


def test_auto_reads_a_full_cache_without_asking_the_network(no_released, repository, monkeypatch):
    part.released_source(RunParams())
    serve_from(monkeypatch, "http://127.0.0.1:9")  # nothing listens there: any download would fail
    again = part.released_source(RunParams())
    assert again.folder == released_cache() and "found in the download cache" in again.how


def test_auto_offline_says_why_and_the_build_goes_on(no_released, monkeypatch):
    serve_from(monkeypatch, "http://127.0.0.1:9")
    part_source = part.released_source(RunParams())
    assert part_source.folder is None
    assert part_source.how == ("not built: the released scores are not on this machine, and this machine could not "
                               "reach HarshKumar3014/MultiLLMs on GitHub to download them (no network connection)")
    page = part.index_page(write_params(no_released, "run_name: x\n"), part_source, [])
    assert part_source.how in page and "make released" in page


def test_auto_offline_falls_back_to_the_mirror(no_released, monkeypatch):
    serve_from(monkeypatch, "http://127.0.0.1:9")
    mirror = no_released / "mirror"
    shutil.copytree(FIXTURES, mirror / "released")
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(mirror))
    part_source = part.released_source(RunParams())
    assert part_source.folder == mirror / "released"
    assert "1 of the study's 10 models read from" in part_source.how and "the rest could not be downloaded" in part_source.how


def test_a_corrupt_download_is_not_kept(no_released, repository):
    checkpoint = next(repository.rglob("tiny-a_checkpoint.csv"))
    checkpoint.write_text(checkpoint.read_text().replace("0.", "1.", 1))
    part_source = part.released_source(RunParams())
    assert part_source.folder is None and "does not match the pinned" in part_source.how
    assert not (released_cache() / "tiny-a_checkpoint.csv").exists()


def test_off_a_released_main_run_and_a_missing_folder(no_released, monkeypatch):
    monkeypatch.setenv("BIASAUDIT_DATA_DIR", str(no_released))
    shutil.copytree(FIXTURES, no_released / "released")
    assert part.released_source(RunParams(released_study="off")).folder is None
    assert part.released_source(RunParams(released_scores=str(FIXTURES))).folder is None, "the main run is the study"
    assert part.released_source(RunParams(released_study=str(FIXTURES))).folder == FIXTURES
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
        nbformat.v4.new_markdown_cell("## Summary\n\nDone.\n\n### Exercises\n\n:::{exercise} 1\n:label: ex-22-1\n"
                                      ":nonumber:\n\nRerun.\n:::\n\n:::{solution} ex-22-1\n:class: dropdown\n\n"
                                      "{glue:text}`ex1_summary_text`\n:::\n\n### What's next?\n\nMore."),
    ])
    path = tmp_path / "22_verdict.ipynb"
    nbformat.write(notebook, path)
    part.mark_as_released(path, "22_verdict")
    cells = nbformat.read(path, as_version=4).cells
    heading, note, text = cells[1].source.split("\n\n")
    assert heading == "# The verdict: which languages shift? (released study)" and text.endswith("Some text.")
    assert note.startswith(":::{note}") and "](../analyses/22_verdict)" in note
    assert cells[2].source == "See [the drops](10_language_drops) and [the templates](../analyses/30_template_tests)."
    # the exercises (labelled once, on the main page; their solutions quote the main run) point there instead
    assert cells[3].source == ("## Summary\n\nDone.\n\n### Exercises\n\nThe exercises and their solutions are on "
                               "[the main run's page](../analyses/22_verdict).\n\n### What's next?\n\nMore.")


def write_params(folder: Path, text: str) -> Path:
    path = folder / "p.yml"
    path.write_text(text)
    return path


def test_first_page_without_the_scores_says_how_to_get_them(no_released, tmp_path):
    off = part.released_source(RunParams(released_study="off"))
    page = part.index_page(write_params(tmp_path, "run_name: x\n"), off, [])
    assert page.startswith("# The released study\n") and "make released" in page and "|" not in page
    assert "released_study: off" in page
    main_is_released = write_params(tmp_path, f"released_scores: {FIXTURES}\n")
    assert "already reads the paper's released scores" in part.index_page(main_is_released, off, [])


def test_clearing_removes_pages_of_an_earlier_build(tmp_path):
    folder = tmp_path / "released"
    folder.mkdir()
    (folder / "10_language_drops.ipynb").write_text("{}")
    part.clear_part(folder)
    assert folder.is_dir() and not list(folder.iterdir())


def test_the_first_page_compares_with_the_paper_fully_only_with_all_ten_models():
    ten = part.comparison_text(list(release_files.RELEASED_MODELS))
    assert "The part has all ten of the paper's models, so its verdicts answer the same question" in ten
    assert "partial" not in ten and "make released" not in ten
    two = part.comparison_text(["gemma2-9b", "llama3.1-8b"])
    assert ("The part has 2 of the paper's ten models (gemma2-9b, llama3.1-8b), so the comparison is partial: the "
            "paper's conclusion rests on all ten.") in two and "make released" in two
    assert two.startswith("The paper's conclusion: for Hindi, Korean and Swahili the drop clearly exceeds")


def test_a_failed_download_is_said_in_words_not_as_a_raw_error():
    offline = part.download_failure("could not download 3 file(s) (<urlopen error [Errno -2] Name or service not known>)")
    assert offline.startswith("this machine could not reach HarshKumar3014/MultiLLMs on GitHub") and "urlopen" not in offline
    assert part.download_failure("could not download 1 file(s) (HTTP Error 404: Not Found)") == (
        "the download from HarshKumar3014/MultiLLMs failed: HTTP Error 404: Not Found")


def test_the_front_page_starts_where_this_build_has_something_to_show():
    built, not_built = part.start_text(True), part.start_text(False)
    assert built.startswith("**Start with [the released study](released/index)**")
    assert not_built.startswith("**Start with the worked example**") and "make released" in not_built
    assert "[the released study]" not in not_built, "no link to an empty part as the place to start"
