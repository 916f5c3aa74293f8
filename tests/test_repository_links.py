"""Nothing in the repository points outside it: every document a file names (``*.md``, ``*.txt``),
every Markdown link and every relative path resolves to a file of this checkout, and no file
names an absolute path on the machine it was written on. A reader of a fresh clone finds
everything it mentions (the rules included: docs/rules/)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
DOC_NAME = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)*[\w.-]+(?:/[\w.-]+)*\.(?:md|txt))\b")
UP_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")
MACHINE_PATH = re.compile(r"(?<![\w.:/-])/(?:work|home|Users)/[\w.-]+")
# Names that are not documents: file-name patterns in code and generated files' names.
NOT_DOCS = {"FILE.md", "requirements.txt"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def text_of(path: Path) -> str | None:
    if path.suffix in (".lock", ".png", ".jpg", ".gz") or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def inside(target: Path) -> bool:
    try:
        target.resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True


def problems() -> list[str]:
    files = tracked()
    names = {p.name for p in files}
    found: list[str] = []
    for path in files:
        if path == Path(__file__).resolve():
            continue  # this file quotes what the scan catches (test_the_scan_finds_what_it_looks_for)
        text = text_of(path)
        if text is None:
            continue
        rel = path.relative_to(ROOT)
        for n, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{n}"
            for m in MACHINE_PATH.finditer(line):
                found.append(f"{where}: an absolute path of some machine: {m.group(0)}")
            for m in UP_PATH.finditer(line):
                if not inside(path.parent / m.group(1)):
                    found.append(f"{where}: a path that leaves the repository: {m.group(1)}")
            if path.suffix == ".md":
                for m in MD_LINK.finditer(line):
                    target = m.group(1).split("#", 1)[0]
                    if not target or re.match(r"[a-z]+:", target):
                        continue
                    t = (path.parent / target) if not target.startswith("/") else ROOT / target.lstrip("/")
                    if not inside(t) or not t.exists():
                        found.append(f"{where}: a link to nothing in the repository: {m.group(1)}")
            for m in DOC_NAME.finditer(line):
                doc = m.group(1)
                if doc in NOT_DOCS:
                    continue
                candidates = [path.parent / doc, ROOT / doc]
                if any(inside(c) and c.exists() for c in candidates):
                    continue
                if "/" not in doc and doc in names:
                    continue  # a file named by its name alone (README.md beside the code it describes)
                found.append(f"{where}: names a document the repository does not hold: {doc}")
    return found


def test_nothing_points_outside_the_repository() -> None:
    found = problems()
    assert not found, "\n".join(found[:60]) + (f"\n... and {len(found) - 60} more" if len(found) > 60 else "")


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The patterns catch the ways a file points outside (so that a clean scan means something)."""
    line = (
        "See ../shared/RULES.md, RULES.md section 2, the seed hearts.txt, /work/main/x and [x](../../y.md)."
    )
    assert UP_PATH.search(line).group(1) == "../shared/RULES.md"
    assert {m.group(1) for m in DOC_NAME.finditer(line)} >= {"../shared/RULES.md", "RULES.md", "hearts.txt"}
    assert MACHINE_PATH.search(line).group(0) == "/work/main"
    assert MD_LINK.search(line).group(1) == "../../y.md"
    assert not inside(ROOT / "../shared/RULES.md")
