"""docs/design.md's worked examples are the code as it is: every fenced block it says is in a file
appears there verbatim, so the page cannot drift from the code it teaches."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"


def quoted_blocks() -> list[tuple[str, str]]:
    """(file the text names just before the block, block) for each python/yaml block."""
    text = DESIGN.read_text()
    out = []
    for match in re.finditer(r"```(python|yaml)\n(.*?)```", text, re.S):
        before = text[:match.start()]
        files = re.findall(r"`((?:infercheck|suites)/[\w/.-]+\.(?:py|yaml))`", before)
        out.append((files[-1], match.group(2)))
    return out


def test_design_doc_exists_and_is_cited():
    assert DESIGN.is_file()
    assert "docs/design.md" in (ROOT / "README.md").read_text()
    cited = [p for p in (ROOT / "infercheck").rglob("*.py") if "docs/design.md" in p.read_text()]
    assert len(cited) >= 5


def test_worked_examples_match_the_code():
    blocks = quoted_blocks()
    assert len(blocks) >= 2
    for file, block in blocks:
        assert block.strip() in (ROOT / file).read_text(), f"docs/design.md quotes {file}, which no longer holds:\n{block}"


def test_no_code_cites_a_design_file_outside_the_repository():
    for path in [*(ROOT / "infercheck").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]:
        assert "DESIGN.md" not in path.read_text(), path
