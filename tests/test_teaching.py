"""The pages a teacher starts from: the glossary defines every term a page links, every term is linked
from some page, and the intro leads to the glossary and the teaching page, whose links all land."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r"\{term\}`([^`<]*?)(?:\s*<([^>]+)>)?`")


def glossary_terms() -> list[str]:
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\{glossary\}\n(.*?)```", text, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line and not line.startswith(" ")]


def linked_terms() -> dict[str, list[str]]:
    """term -> the pages (notebooks and book/*.md) that link it with {term}."""
    pages = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "book").glob("*.md")}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        pages[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    found: dict[str, list[str]] = {}
    for name, text in pages.items():
        for shown, target in ROLE.findall(text):
            found.setdefault((target or shown).strip(), []).append(name)
    return found


def test_every_linked_term_is_in_the_glossary_and_every_term_is_linked():
    terms, linked = glossary_terms(), linked_terms()
    assert len(terms) >= 30 and len(set(terms)) == len(terms), "one entry per term"
    for needed in ("q-value", "Benjamini–Hochberg", "sign-flip test", "Wilson interval", "chrF", "BLEU", "noise floor",
                   "carry-over slope", "CLCI", "power", "verdict"):
        assert needed in terms, needed
    assert set(linked) - set(terms) == set(), "a {term} role names no glossary entry"
    assert set(terms) - set(linked) == set(), "a glossary term no page links"
    assert len(linked["noise floor"]) >= 5, "a term is linked on each page that uses it, not once in the book"


def test_the_intro_leads_to_the_glossary_and_the_teaching_page():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert "](glossary)" in intro and "](teaching)" in intro
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "book/glossary" in files and "book/teaching" in files


def test_the_teaching_page_links_pages_that_exist_and_plans_fit_their_time():
    text = (ROOT / "book" / "teaching.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if target.startswith("analyses/"):
            assert (ROOT / "notebooks" / f"{target.removeprefix('analyses/')}.ipynb").exists(), target
        elif target != "released/index":
            assert (ROOT / "book" / f"{target}.md").exists(), target
    plans = re.findall(r"## A (\d+)[- ](minute|hour) session\n(.*?)(?=\n## |\Z)", text, re.S)
    assert len(plans) == 2
    for length, unit, plan in plans:
        ends = [int(end) for end in re.findall(r"^\| \d+–(\d+) \|", plan, re.M)]
        assert ends and ends == sorted(ends) and ends[-1] == int(length) * (60 if unit == "hour" else 1), (length, ends)


# Words the book uses in more than one sense link to the glossary only in the sense the entry defines. Each
# rule reads the text just before a link (or the sentence around it) for a sign of another sense; a rule is
# an approximation of reading the sentence, so each names the senses it knows.
OTHER_SENSES: dict[str, re.Pattern] = {
    # the template tests' pass drop has the opposite sign
    "drop": re.compile(r"pass\W*$", re.I),
    # a template's Passed / Failed is the template verdict, not the language verdict
    "verdict": re.compile(r"(Failed|Passed|template)\W*$"),
    # a token-count gap, a gap in a program: not the cross-lingual gap
    "gap": re.compile(r"(token-count|token|bug or a)\s*$", re.I),
    # a chart's squares, a notebook's cells
    "cell": re.compile(r"(darker|lighter|notebook|Each|heatmap)\W*$"),
}
CELL_SENSE = re.compile(r"×|test|Benjamini|reliable|q-value|model and language|route")


def test_a_word_with_several_senses_links_only_in_the_glossarys_sense():
    pages = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "book").glob("*.md")}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        pages[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    wrong = []
    for name, text in pages.items():
        for match in ROLE.finditer(text):
            term = (match.group(2) or match.group(1)).strip()
            before = text[max(0, match.start() - 40):match.start()]
            sentence = text[max(0, match.start() - 200):match.end() + 200]
            if term in OTHER_SENSES and OTHER_SENSES[term].search(before):
                wrong.append(f"{name}: …{before}{match.group(0)}")
            if term == "cell" and not CELL_SENSE.search(sentence):
                wrong.append(f"{name}: {match.group(0)} with no test or model × language near it")
    assert not wrong, "\n".join(wrong)
    # the senses kept apart have entries of their own
    assert {"pass drop", "template verdict"} <= set(glossary_terms())
