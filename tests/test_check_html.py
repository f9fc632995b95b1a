"""The rendered book's checks: a table's narrowest layout worked by hand, the pages' defects found in
small pages written here (the real book is checked in Chromium by tests/test_notebooks.py)."""

from __future__ import annotations

import shutil

import pytest
from biasaudit.book import check_html, widths
from biasaudit.book.check_html import cut_chart_labels, estimated_wide_tables, remote_assets
from fontTools.ttLib import TTFont


def test_a_line_breaks_at_spaces_and_after_a_dash_between_letters_or_digits():
    assert widths.runs("drop (English − language)") == ["drop", "(English", "−", "language)"]
    # Chromium breaks "gemma3-|270m" and "aya-|expanse-|8b", never a minus sign before a number
    assert widths.runs("gemma3-270m aya-expanse-8b") == ["gemma3-", "270m", "aya-", "expanse-", "8b"]
    assert widths.runs("[-0.176, 0.247]") == ["[-0.176,", "0.247]"]
    # Han breaks between any two characters; Korean keeps its words (the cells say keep-all)
    assert widths.runs("护士说 nurse") == ["护", "士", "说", "nurse"]
    assert widths.runs("간호사가 말했다") == ["간호사가", "말했다"]


def test_text_is_measured_with_the_glyphs_of_the_book_font():
    # Source Sans Pro's own advance widths, read from its file (units per em: 1000)
    font = TTFont(str(widths.font_source(widths.BOOK_FONTS[0])), lazy=True)
    advance = {c: font["hmtx"][font.getBestCmap()[ord(c)]][0] / font["head"].unitsPerEm for c in "0.5"}
    assert widths.text_px("0.50", font_px=10) == pytest.approx(10 * (2 * advance["0"] + advance["."] + advance["5"]))
    assert widths.text_px("护士", font_px=10) == pytest.approx(20.0)  # a Han character is one em wide
    assert widths.text_px("language", bold=True) > widths.text_px("language")


def test_a_column_is_as_wide_as_its_widest_unbreakable_run_plus_padding():
    header, rows = ["m", "drop (English − language)"], [["gemma3-270m", "0.049"], ["smollm2-135m", "-0.013"]]
    first, second = widths.column_widths(header, rows)
    # the runs are "gemma3-", "270m", "smollm2-", "135m": the first two letters of each name are its widest run
    assert first == pytest.approx(max(widths.text_px("gemma3-"), widths.text_px("smollm2-")) + widths.CELL_PADDING_PX)
    assert second == pytest.approx(widths.text_px("language)", bold=True) + widths.CELL_PADDING_PX)
    assert widths.table_px([first, second]) == pytest.approx(first + second + 3 * widths.BORDER_SPACING_PX)


def test_a_table_too_wide_for_the_text_column_is_named_by_the_estimate(tmp_path):
    header = "".join(f"<th>columnname{i}</th>" for i in range(12))  # 12 × about 90 px
    (tmp_path / "wide.html").write_text(f"<html><body><table><tr>{header}</tr></table></body></html>")
    narrow = "".join(f"<th>col{i}</th>" for i in range(4))
    (tmp_path / "narrow.html").write_text(f"<html><body><p>a</p><table><tr>{narrow}</tr></table></body></html>")
    found = estimated_wide_tables(tmp_path)
    assert len(found) == 1 and found[0].startswith("wide.html: table 1 (columnname0, columnname1")
    assert f"of the {widths.TEXT_COLUMN_PX:.0f} px text column" in found[0]


def test_code_in_a_table_is_counted_in_monospace(tmp_path):
    word = "il" * 60  # narrow letters: about 430 px in the sans serif, about 860 in monospace
    (tmp_path / "page.html").write_text(f"<table><tr><td><code>{word}</code></td></tr></table>")
    (tmp_path / "plain.html").write_text(f"<table><tr><td>{word}</td></tr></table>")
    assert [line.split(":")[0] for line in estimated_wide_tables(tmp_path)] == ["page.html"]


def test_a_chart_label_cut_short_is_named_with_its_page(tmp_path):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "a.svg").write_text('<svg><text x="1">beyond its floor, not reliable, low …</text></svg>')
    (tmp_path / "_images" / "b.svg").write_text('<svg><text x="1">whole label</text></svg>')
    (tmp_path / "_images" / "stale.svg").write_text('<svg><text>no page shows this …</text></svg>')
    (tmp_path / "page.html").write_text('<img src="_images/a.svg" alt="x"><img src="_images/b.svg" alt="y">'
                                        '<svg><text>an inline one …</text></svg>')
    assert cut_chart_labels(tmp_path) == [
        "page.html: a chart label cut short: 'an inline one …'",
        "page.html (chart a.svg): a chart label cut short: 'beyond its floor, not reliable, low …'"]


def test_sphinx_pages_and_redirects_are_not_the_books(tmp_path):
    for name in ("search.html", "genindex.html", "page.html"):
        (tmp_path / name).write_text("<p>x</p>")
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    assert [p.name for p in check_html.book_pages(tmp_path)] == ["page.html"]


PAGE = """<html><head><link rel="stylesheet" href="{css}"></head><body><div class="bd-main">
<article class="bd-article" style="width: 688px; padding: 0">
<table><tr>{cells}</tr></table>
<img src="{image}" alt="{alt}">
<details><summary>solution</summary><table><tr>{hidden}</tr></table></details>
</article></div></body></html>"""


@pytest.fixture
def browser():
    found = check_html.find_chromium()
    if found is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    return found


def test_the_browser_finds_what_a_reader_would_see_cut_off_or_undescribed(tmp_path, browser):
    (tmp_path / "chart.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="900" height="50"></svg>')
    (tmp_path / "small.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="300" height="50"></svg>')
    wide = "".join(f"<td>unbreakablecontent{i}</td>" for i in range(8))
    (tmp_path / "bad.html").write_text(PAGE.format(css="x.css", cells=wide, image="chart.svg", alt="chart.svg",
                                                   hidden=wide))
    (tmp_path / "good.html").write_text(PAGE.format(css="x.css", cells="<td>a</td>", image="small.svg",
                                                    alt="Bars of the drop per language", hidden="<td>b</td>"))
    layout = check_html.browser_layout(tmp_path, browser)
    assert layout.column_px == 688
    bad = [d for d in layout.defects if d.startswith("bad.html")]
    assert not [d for d in layout.defects if d.startswith("good.html")], layout.defects
    assert any("table 1 (" in d and "px wide in a 688 px text column" in d for d in bad), bad
    assert any("table 2 (" in d for d in bad), "a table in a folded solution is opened and measured"
    assert any("chart.svg is drawn 900 px wide and shrunk to fit" in d for d in bad), bad
    assert any('has no description as alt text (alt="chart.svg")' in d for d in bad), bad


def test_the_command_fails_on_defects_and_passes_a_clean_book(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(check_html, "find_chromium", lambda: None)  # the estimate: no browser needed here
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir()
    (tmp_path / "page.html").write_text("<table><tr><td>a</td></tr></table>")
    assert check_html.main([str(tmp_path)]) == 0
    assert "0 defect(s)" in capsys.readouterr().out
    (tmp_path / "page.html").write_text('<script src="https://cdn.example/x.js"></script>')
    assert check_html.main([str(tmp_path)]) == 1
    assert remote_assets(tmp_path) and "no Chromium on this machine" in capsys.readouterr().out


def _article(body: str) -> str:
    return f'<html><body><nav><p>2 model(s)</p></nav><article class="bd-article">{body}</article></body></html>'


@pytest.mark.parametrize("prose, what", [
    ("<p>Scoring 1,664 item version(s) for 2 model(s) took 3 s.</p>", "a plural left unresolved"),
    ("<p>anti-stereotyped one child at home.; third a broken garden fence..</p>", "doubled or stray punctuation"),
    ("<p>The drop is 0.05 and the floor is .</p>", "a space before a full stop or comma"),
    ("<p>The largest fall is in Swahili: nan below English.</p>", "a missing value shown as text"),
    ("<p>The answer is {glue:text}`x` here.</p>", "markup that was never rendered"),
    ("<p>“No sé” begins with **no**.</p>", "markup that was never rendered"),
    ("<p>Written under /root/.cache/biasaudit/models.</p>", "a path of the machine that built the book"),
    ("<p>(At 0.9: At the fixed threshold of 0.9, 10 pass.)</p>", "a sentence glued from two"),
    ("<p>The gaps do not move: The gap ranges from 0.04 to 0.05.</p>", "a sentence glued from two"),
    ("<p>The same rows, once more for the record here. The same rows, once more for the record here.</p>",
     "a sentence twice in one paragraph"),
    ("<p>Before.</p><p></p>", "1 empty paragraph"),
])
def test_each_broken_sentence_is_named(prose, what):
    from biasaudit.book.check_text import page_defects

    found = page_defects(_article(prose))
    assert len(found) == 1 and found[0].startswith(what), found


def test_good_prose_data_and_what_is_not_prose_pass():
    from biasaudit.book.check_text import page_defects

    good = _article(
        "<p>None of the errors raises a warning, e.g., once the run is made; the null cells stay null.</p>"
        "<p>LangBiTe's loader turns an empty answer into the text “nan”; at 0.9 (a threshold: its default).</p>"
        "<p>Run <code>make book</code>. The formula <span class=\"math\">\\(p_{(s)}\\)</span> holds.</p>"
        '<table class="ba-data"><tr><td>the <b>mango</b> tree needed **watering** None</td></tr></table>'
        "<table><tr><td><p>Break</p></td><td><p></p></td></tr></table><pre>x = 1 ..</pre>")
    assert page_defects(good) == []


def test_a_languages_value_shown_with_two_intervals_on_two_pages_is_named(tmp_path):
    """Chapter 22 and chapter 16 once showed Hindi's drop 0.0552 with two different bootstrap intervals."""
    from biasaudit.book.check_text import disagreeing_intervals

    part = tmp_path / "book" / "analyses"
    part.mkdir(parents=True)
    row = "<tr><td>{}</td><td>381</td><td>{}</td></tr>"
    pages = {
        "22_verdict": row.format("Hindi (hi)", "0.0552 [0.0155, 0.0944]") + row.format("Korean (ko)", "0.2260 [0.1775, 0.2745]"),
        # the same language and value, with another interval: flagged
        "16_faithful": row.format("hi", "0.0552 [0.0167, 0.0933]") + row.format("ko", "0.2260 [0.1775, 0.2745]"),
        # another language with an equal value, and a row naming two languages: not compared
        "10_language_drops": row.format("sw", "0.0552 [0.0100, 0.0999]")
        + "<tr><td>hi</td><td>ko</td><td>0.2260 [0.1000, 0.3000]</td></tr>",
    }
    for name, rows in pages.items():  # (prose is not read: a sentence may name several languages)
        (part / f"{name}.html").write_text(_article(f"<table>{rows}</table><p>Korean (ko): 0.2260 [0.2000, 0.2500].</p>"))
    found = disagreeing_intervals(sorted(part.glob("*.html")), tmp_path)
    assert found == ["one number, two intervals: hi 0.0552 is shown as [0.0167, 0.0933] "
                     "(book/analyses/16_faithful.html) and as [0.0155, 0.0944] (book/analyses/22_verdict.html)"]
    # another part of the book (another run) is compared only with itself
    other = tmp_path / "book" / "released"
    other.mkdir()
    (other / "22_verdict.html").write_text(_article("<table>" + row.format("ko", "0.2260 [0.1111, 0.3333]") + "</table>"))
    assert len(disagreeing_intervals(sorted(tmp_path.glob("book/*/*.html")), tmp_path)) == 1
