"""``court analytics report`` over a lake written by court_analytics.Lake: the page's figures are
the documented queries' answers, and the page loads nothing from anywhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from court_analytics.lake import Lake
from court_cli.analytics import QUERIES, run_queries, wilson

from .conftest import COURT
from .test_lake import game_records


def make_lake(root: Path, moves: dict[str, int]) -> Lake:
    lake = Lake(root)
    for g, n in moves.items():
        lake.stage_batch([(body, headers) for _, body, headers in game_records(g, n)])
        assert lake.try_finish(g)
    return lake


def test_report_figures_are_the_queries_answers(tmp_path: Path) -> None:
    moves = {f"g{i:04d}": 3 + i for i in range(9)}  # the winner of a game of n moves is seat n % 3
    make_lake(tmp_path / "lake", moves)
    data = run_queries(tmp_path / "lake")
    assert data["length"] == [{"game": "hearts", "games": 9, "min": 3, "median": 7, "p90": 11, "max": 11}]
    wins = {r["seat"]: r["wins"] for r in data["win_by_seat"]}
    assert wins == {s: sum(1 for n in moves.values() if n % 3 == s) for s in range(3)}
    assert sum(r["games"] for r in data["games_per_hour"]) == 9
    assert wilson(0, 0) == (0.0, 0.0) and wilson(5, 10)[0] < 0.5 < wilson(5, 10)[1]
    out = tmp_path / "report.html"
    run = subprocess.run([COURT, "analytics", "report", "--lake", str(tmp_path / "lake"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(9 games)" in run.stdout
    page = out.read_text()
    for name, (_title, sql) in QUERIES.items():
        assert f'id="{name}"' in page and sql.strip().split("\n")[0][:30] in page.replace("&#x27;", "'")
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)  # self-contained: nothing to fetch
    assert "<script" not in page
    assert "<svg" in page


def test_report_since_and_a_missing_lake(tmp_path: Path) -> None:
    make_lake(tmp_path / "lake", {"g0001": 4})
    assert run_queries(tmp_path / "lake")["length"][0]["games"] == 1
    from datetime import UTC, datetime
    assert run_queries(tmp_path / "lake", datetime(2100, 1, 1, tzinfo=UTC))["length"] == []
    run = subprocess.run([COURT, "analytics", "report", "--lake", str(tmp_path / "nowhere"), "--out",
                          str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "no games table" in run.stdout
    run = subprocess.run([COURT, "analytics", "report", "--lake", str(tmp_path / "lake"), "--since", "yesterday"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "ISO date" in run.stdout + run.stderr


def test_docs_show_the_reports_queries() -> None:
    from court_cli.analytics import docs_markdown
    doc = Path(__file__).parents[2] / "docs" / "analytics.md"
    assert doc.read_text() == docs_markdown(), "regenerate it with court_cli.analytics.docs_markdown()"
