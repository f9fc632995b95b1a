"""Web fonts for the scripts the book shows, cut down to the characters its pages use.

The pages show items in Latin, Arabic, Devanagari, Chinese and Korean script. A reader's machine
may have no font for some of them and show boxes, so the build ships its own: each font below
comes from a PyPI package (all under the SIL Open Font License, whose notice every subset keeps),
is subsetted to the characters that occur in this build's pages (tens of KB instead of 1–18 MB),
and is written as WOFF2 with a stylesheet that puts the fonts first in the page's font stack. A
subset is a modified font under that licence and must not keep a reserved font name, so each is
renamed after its CSS family ("Audit Sans", ...); its copyright and licence notices stay.
Charts are SVG images, which cannot use the page's fonts, so each chart gets the Latin font it
needs embedded.
"""

from __future__ import annotations

import base64
import importlib.resources
import io
import re
from dataclasses import dataclass
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

Ranges = tuple[tuple[int, int], ...]

ARABIC: Ranges = ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF))
DEVANAGARI: Ranges = ((0x0900, 0x097F), (0xA8E0, 0xA8FF), (0x1CD0, 0x1CFF))
HANGUL: Ranges = ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF))
# Han, kana and CJK punctuation and full-width forms (Hangul's compatibility jamo excepted).
HAN: Ranges = ((0x2E80, 0x2FFF), (0x3000, 0x312F), (0x3190, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
               (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x20000, 0x2FA1F))
# Kept with every subset of a shaped script: the joiners steer which letter forms join, and
# Devanagari shaping shows a stray vowel sign on a dotted circle.
JOINERS = "\u200c\u200d"


@dataclass(frozen=True)
class BookFont:
    """One font file of the book: its CSS family and weight, where it comes from, what it serves."""

    family: str
    weight: str  # a CSS font-weight: "100 900" for a variable font
    package: str
    path: str  # inside the package
    ranges: Ranges  # the code points it serves; () = every character no other font serves
    always: str = ""
    style: str = "normal"

    @property
    def file_name(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.family} {self.weight} {self.style}".lower()).strip("-") + ".woff2"


SOURCE_SANS = "files/SourceSansPro-{}.otf"
BOOK_FONTS: tuple[BookFont, ...] = (
    # Source Sans Pro: Latin, Greek, and the symbols and punctuation of every page.
    BookFont("Audit Sans", "400", "font_source_sans_pro", SOURCE_SANS.format("Regular"), ()),
    BookFont("Audit Sans", "700", "font_source_sans_pro", SOURCE_SANS.format("Bold"), ()),
    BookFont("Audit Sans", "400", "font_source_sans_pro", SOURCE_SANS.format("It"), (), style="italic"),
    BookFont("Audit Sans", "700", "font_source_sans_pro", SOURCE_SANS.format("BoldIt"), (), style="italic"),
    BookFont("Audit Arabic", "100 900", "justmytype_intl_rtl",
             "fonts/ofl/notosansarabic/NotoSansArabic[wdth,wght].ttf", ARABIC, JOINERS + "\u0640"),
    BookFont("Audit Devanagari", "400", "devanagari_fonts", "fonts/Shobhika-1.05/Shobhika-Regular.otf", DEVANAGARI,
             JOINERS + "\u25cc"),
    BookFont("Audit Devanagari", "700", "devanagari_fonts", "fonts/Shobhika-1.05/Shobhika-Bold.otf", DEVANAGARI,
             JOINERS + "\u25cc"),
    BookFont("Audit Hangul", "100 900", "justmytype_intl_cjk", "fonts/ofl/notosanskr/NotoSansKR[wght].ttf", HANGUL),
    # Simplified Chinese forms (a CJK font draws Latin quotes full-width, so it serves Han only).
    BookFont("Audit Han", "100 900", "justmytype_intl_cjk", "fonts/ofl/notosanssc/NotoSansSC[wght].ttf", HAN),
)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(font.family for font in BOOK_FONTS))
TEXT_FONT = "Audit Sans"


def font_source(font: BookFont) -> Path:
    """The full font file in its installed package."""
    try:
        path = Path(str(importlib.resources.files(font.package) / font.path))
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"the book's {font.family} font comes from the PyPI package "
                                  f"{font.package.replace('_', '-')}: run `make venv`") from None
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the {font.family} font is not in its package (version changed?)")
    return path


def _in(ranges: Ranges, char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in ranges)


def served(font: BookFont, chars: set[str], cmap: set[int]) -> list[str]:
    """The characters of `chars` this font draws: those in its ranges (for the fallback font, in no
    other font's ranges) that it has a glyph for."""
    others = [f.ranges for f in BOOK_FONTS if f.ranges and f.family != font.family]
    mine = sorted(c for c in chars if (_in(font.ranges, c) if font.ranges else not any(_in(r, c) for r in others))
                  and ord(c) in cmap)
    return sorted(set(mine) | set(font.always)) if mine and font.always else mine


def _rename(font: TTFont, family: str, style: str, weight: str) -> None:
    """Name the subset after its CSS family (the licence's reserved names stay with the original)."""
    subfamily = {("400", "normal"): "Regular", ("700", "normal"): "Bold", ("400", "italic"): "Italic",
                 ("700", "italic"): "Bold Italic"}.get((weight, style), "Regular")
    names = font["name"]
    for record in list(names.names):
        if record.nameID in (1, 3, 4, 6, 16, 17, 21, 22, 25):
            names.removeNames(nameID=record.nameID)
    full = f"{family} {subfamily}"
    for name_id, value in ((1, family), (2, subfamily), (3, f"biasaudit: {full}"), (4, full),
                           (6, full.replace(" ", "-"))):
        names.setName(value, name_id, 3, 1, 0x409)
        names.setName(value, name_id, 1, 0, 0)


def _subset(source: Path, chars: list[str], font_spec: BookFont) -> bytes:
    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]  # Arabic joining and Devanagari conjuncts live in the layout tables
    options.name_IDs = ["*"]  # keeps the copyright and licence notices (name IDs 0, 13, 14)
    options.name_languages = ["*"]
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    _rename(font, font_spec.family, font_spec.style, font_spec.weight)
    out = io.BytesIO()
    subset.save_font(font, out, options)
    return out.getvalue()


def write_fonts(chars: set[str], folder: Path) -> list[dict]:
    """Subset every book font to the characters it serves among `chars` into `folder`; a font
    that serves none is left out. Returns one row per file written (family, weight, file, chars, bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for font in BOOK_FONTS:
        source = font_source(font)
        cmap = set(TTFont(str(source), lazy=True).getBestCmap())
        mine = served(font, chars, cmap)
        if not mine:
            continue
        data = _subset(source, mine, font)
        (folder / font.file_name).write_bytes(data)
        rows.append({"family": font.family, "weight": font.weight, "style": font.style, "file": font.file_name,
                     "chars": len(mine), "bytes": len(data)})
    return rows


def font_face(family: str, weight: str, url: str, style: str = "normal") -> str:
    return (f'@font-face {{ font-family: "{family}"; src: url("{url}") format("woff2"); font-weight: {weight}; '
            f"font-style: {style}; font-display: swap; }}")


def stylesheet(rows: list[dict], fonts_url: str = "fonts") -> str:
    """@font-face rules for the files written, and the theme's font stack with them first (each
    character falls through to the first family that has it)."""
    faces = "\n".join(font_face(r["family"], r["weight"], f"{fonts_url}/{r['file']}", r["style"]) for r in rows)
    stack = ", ".join(f'"{family}"' for family in FAMILIES if any(r["family"] == family for r in rows))
    stack = f"{stack}, var(--pst-font-family-base-system)" if stack else "var(--pst-font-family-base-system)"
    return ("/* Written by biasaudit.book.fonts when the book is built: the book's own fonts, subsetted to its pages. */\n"
            f"{faces}\nhtml {{ --pst-font-family-base: {stack}; --pst-font-family-heading: {stack}; }}\n")


def page_characters(html_dir: Path) -> set[str]:
    """Every character of every page (markup is ASCII, so this is the text's characters and a few more)."""
    chars: set[str] = set()
    for page in html_dir.rglob("*.html"):
        chars |= set(page.read_text(encoding="utf-8"))
    return {c for c in chars if c.isprintable() or c in JOINERS}


def embed_in_svg(svg: str, text_font: bytes) -> str:
    """An SVG chart with the text font embedded and its generic family replaced by it."""
    uri = "data:font/woff2;base64," + base64.b64encode(text_font).decode("ascii")
    style = f"<defs><style>{font_face(TEXT_FONT, '400', uri)}</style></defs>"
    svg = re.sub(r'font-family="sans-serif"', f'font-family="{TEXT_FONT}, sans-serif"', svg)
    return re.sub(r"(<svg\b[^>]*>)", lambda m: m.group(1) + style, svg, count=1)


def embed_in_charts(image_dir: Path) -> int:
    """Embed the Latin text font, subsetted to the characters all charts use, in every SVG chart
    that names the generic sans-serif family; returns how many charts were changed."""
    charts = [p for p in image_dir.glob("*.svg") if 'font-family="sans-serif"' in p.read_text(encoding="utf-8")]
    if not charts:
        return 0
    chars = set().union(*(set(p.read_text(encoding="utf-8")) for p in charts))
    text = BOOK_FONTS[0]  # the regular Latin face
    source = font_source(text)
    mine = served(text, {c for c in chars if c.isprintable()}, set(TTFont(str(source), lazy=True).getBestCmap()))
    data = _subset(source, mine, text)
    for path in charts:
        path.write_text(embed_in_svg(path.read_text(encoding="utf-8"), data), encoding="utf-8")
    return len(charts)
