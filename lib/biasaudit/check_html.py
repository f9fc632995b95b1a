"""Fail when the rendered book loads any script or stylesheet from outside the build.

The book must work offline: charts are SVG, MathJax is served from _static. Usage:
`python -m biasaudit.check_html _build/html`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REMOTE = re.compile(r"""<(script|link)\b[^>]*\b(src|href)\s*=\s*["'](https?:)?//[^"']+["']""", re.IGNORECASE)


def remote_assets(html_dir: Path) -> list[str]:
    """'file: tag' for every <script src> or <link href> pointing off-site (links in text are fine)."""
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        for match in REMOTE.finditer(page.read_text(encoding="utf-8", errors="replace")):
            tag = match.group(0)
            if match.group(1).lower() == "link" and not re.search(r"rel\s*=\s*[\"']?(stylesheet|preload|modulepreload)", tag):
                continue
            found.append(f"{page.relative_to(html_dir)}: {tag}")
    return found


def main(argv: list[str]) -> int:
    html_dir = Path(argv[0] if argv else "_build/html")
    if not html_dir.is_dir():
        print(f"{html_dir}: no rendered book here; run `make book` first", file=sys.stderr)
        return 2
    found = remote_assets(html_dir)
    for line in found:
        print(f"remote asset: {line}", file=sys.stderr)
    print(f"{html_dir}: {len(found)} remote script/stylesheet reference(s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
