"""User pages (README.md and docs/, the design notes apart) say what is true now in the
user's terms: no issue or wave numbers, no paths outside the repository, no dates of
benchmark runs (dates inside code, as examples of what a call takes, are allowed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Pages about the project's own design (and docs/design/), kept apart from the user's
#: pages.
DESIGN = {"architecture.md", "testing.md"}
PAGES = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").rglob("*.md"))
                               if p.name not in DESIGN and "design" not in p.parts)]
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?\s+#?\d+", re.I),
    "a wave number": re.compile(r"\bwaves?\s+\d+", re.I),
    "a session": re.compile(r"\b(this|last|next) session\b", re.I),
    "a path outside the repository": re.compile(
        r"(\.\./)+(shared|\.library)\b|(?<![\w:/])/(work|root|home|Users)/"),
    "a date outside code": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "a figure of one machine": re.compile(
        r"\b(this|the) (2|two)-core\b|\bdevelopment machine\b|\bmeasured on this machine\b",
        re.I),
    "a history of fixes": re.compile(r"\bbefore (this|it) was fixed\b|\bused to return\b",
                                     re.I),
}


def prose(text: str) -> str:
    """``text`` without fenced blocks and inline code (where example values live).

    >>> prose("a `2026-01-01` b\\n```\\nissue 4\\n```\\nc")
    'a  b\\n\\nc'
    """
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_page_speaks_of_now(page: Path) -> None:
    text = prose(page.read_text())
    found = [f"{what}: {m.group(0)!r} (line {text[:m.start()].count(chr(10)) + 1} of the "
             "prose)" for what, pattern in FORBIDDEN.items() for m in pattern.finditer(text)]
    assert not found, f"{page.relative_to(ROOT)}: " + "; ".join(found)


def test_the_check_finds_what_it_forbids() -> None:
    bad = ("Fixed in issue 53 during wave 4, see ../shared/seeds/x.pdf and /work/main; "
           "measured on 2026-11-27 on this 2-core machine; before this was fixed it failed.")
    assert {what for what, p in FORBIDDEN.items() if p.search(prose(bad))} == \
        set(FORBIDDEN) - {"a session"}
