"""The report's Hearts and The Court figures, and the static page, over a lake of games the engines
really played (public records as the projector publishes them, landed by court_analytics.Lake).

The figures' numbers are checked against the Parquet files read with pyarrow and counted here in
Python (not with the report's SQL); The Court's targets come from the engine's own table. The page
is parsed with html.parser: no script at all and nothing fetched; every bar writes its value and
interval beside it; the game filter is radio buttons and CSS rules over the figures' and rows'
``data-game``; and real Chromium (headless, JavaScript off) lays the page out with a kind chosen:
the other games' figures take no room.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from court_analytics.lake import Lake
from court_cli.analytics import FIGURE_GAME, HEARTS_BINS, QUERIES, render, run_queries, wilson

Rewrite = Callable[[Any], Any]


def engine_game(
    game: str,
    game_id: str,
    options: dict[str, Any],
    seed: int,
    seats: list[str],
    rewrite: Rewrite | None = None,
) -> tuple[list[tuple[bytes, dict[str, str]]], dict[str, Any]]:
    """A game the engine plays to its end with random legal actions, as its public records (the
    lake's input) and its GameEnded data. ``rewrite``: applied to every engine event first."""
    from court_contract import records as krec
    from court_games.registry import get_game
    from court_proto.court.rules.v1 import actions_pb2
    from court_rules.games import start_game

    module = get_game(game)
    state, opening = start_game(module, module.options_from_dict(options), seed)
    rng = random.Random(seed)
    t0 = 1_790_000_000 + seed * 7_000
    out: list[tuple[bytes, dict[str, str]]] = []

    def add(rec: Any) -> None:
        out.append(
            (
                krec.redact(rec).SerializeToString(),
                {"Nats-Msg-Id": krec.msg_id(game_id, rec.seq), "Court-Seq": str(rec.seq)},
            )
        )

    fix = rewrite or (lambda e: e)
    add(
        krec.created_record(
            game,
            game_id,
            t0 * 1000,
            seats=seats,
            options=options,
            seed=seed,
            by="lobby",
            request_id="r",
            events=[fix(e) for e in opening],
            to_act=list(module.to_act(state)),
            finished=False,
        )
    )
    seq, ended = 0, None
    while not module.is_terminal(state):
        seat = module.to_act(state)[0]
        state, evs = module.apply(state, seat, rng.choice(module.legal_actions(state, seat)))
        evs = [fix(e) for e in evs]
        seq += 1
        ended = next((e.data for e in evs if e.type == "GameEnded"), ended)
        add(
            krec.move_record(
                game,
                game_id,
                seq,
                (t0 + seq) * 1000,
                seat=seat,
                action=actions_pb2.Action(),
                action_type="play",
                by="x",
                request_id=f"m{seq}",
                events=evs,
                to_act=list(module.to_act(state)),
                seats=seats,
                finished=module.is_terminal(state),
            )
        )
    assert ended is not None
    return out, ended


def moon_first_hand() -> Rewrite:
    """Turns a game's first HandEnded into seat 3 shooting the moon (random play never does)."""
    from court_games.core import Event

    done = False

    def fix(e: Any) -> Any:
        nonlocal done
        if e.type != "HandEnded" or done:
            return e
        done = True
        return Event(e.type, {**e.data, "taken": [0, 0, 0, 26], "points": [26, 26, 26, 0], "moon": 3})

    return fix


def court_games() -> list[tuple[str, int]]:
    """(mode, seed) of The Court games: per mode with a target, two that reached it and three that
    did not (the first seeds that do, playing at random); three shared-deck games."""
    from court_games.the_court.engine import MODES

    picked = []
    for mode in MODES:
        if mode == "shared":
            picked += [(mode, s) for s in range(3)]
            continue
        won, lost = 0, 0
        for seed in range(3000):
            _, end = engine_game(
                "the_court", "x", {"mode": mode}, seed, ["p"] * (1 if mode == "solitaire" else 2)
            )
            if end["won"] and won < 2:
                won += 1
                picked.append((mode, seed))
            elif not end["won"] and lost < 3:
                lost += 1
                picked.append((mode, seed))
            if won == 2 and lost == 3:
                break
        assert (won, lost) == (2, 3), mode
    return picked


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("page") / "lake"
    lake = Lake(root)
    games: list[tuple[str, list[tuple[bytes, dict[str, str]]]]] = []
    for i in range(4):  # Hearts to 20 points: two or three hands a game; two games with a moon
        seats = [f"h{i}", "bot:random", "bot:heuristic", "bot:random"]
        recs, _ = engine_game(
            "hearts", f"h{i}", {"limit": 20}, 40 + i, seats, moon_first_hand() if i < 2 else None
        )
        games.append((f"h{i}", recs))
    for mode, seed in court_games():
        n = 1 if mode == "solitaire" else 2
        gid = f"c{mode.replace('_', '')}{seed}"
        games.append(
            (gid, engine_game("the_court", gid, {"mode": mode}, seed, [f"{gid}x{s}" for s in range(n)])[0])
        )
    for gid, recs in games:
        lake.stage_batch(recs)
        assert lake.try_finish(gid), gid
    return root


def rows_of(root: Path, table: str) -> list[dict[str, Any]]:
    """A lake table's rows, file by file with pyarrow, with the Hive partitions from the path."""
    out = []
    for f in sorted((root / table).rglob("*.parquet")):
        parts = dict(p.split("=", 1) for p in f.relative_to(root / table).parts[:-1])
        out += [{**r, **parts} for r in pq.read_table(f, partitioning=None).to_pylist()]
    return out


def test_hearts_points_per_hand_and_the_moon_rate(lake: Path) -> None:
    hands = [r for r in rows_of(lake, "events_HandEnded") if r["game"] == "hearts"]
    points = [p for r in hands for p in json.loads(r["p_points"])]
    moons = sum(1 for r in hands if r["p_moon"] is not None)
    assert len(hands) >= 8 and moons == 2 and len(points) == 4 * len(hands)
    want = Counter(next(a for a, b in HEARTS_BINS if a <= p <= b) for p in points)
    data = run_queries(lake)
    got = {r["points_from"]: r["player_hands"] for r in data["hearts_hand_points"]}
    assert got == dict(want) and sum(got.values()) == len(points)
    assert {(r["points_from"], r["points_to"]) for r in data["hearts_hand_points"]} <= set(HEARTS_BINS)
    assert got[26] >= 6 and got[0] >= 2  # the moons' three 26s each, and the shooters' 0s
    (row,) = data["hearts_points"]
    assert (row["hands"], row["moons"]) == (len(hands), moons)

    page = Page(render(data, lake, None))
    (bar,) = page.bars("hearts_points")
    lo, hi = wilson(moons, len(hands))
    assert bar["data-value"] == f"{moons / len(hands):.1%}" and bar["data-ci"] == f"{lo:.1%}..{hi:.1%}"
    assert f"{moons} of {len(hands)} hands" in bar["data-tip"]
    columns = page.bars("hearts_hand_points")
    assert [c["data-label"] for c in columns] == [str(a) if a == b else f"{a}-{b}" for a, b in HEARTS_BINS]
    assert [float(c["data-value"]) for c in columns] == [want.get(a, 0) for a, _ in HEARTS_BINS]


def test_the_court_scores_against_the_engines_target(lake: Path) -> None:
    from court_games.the_court.engine import TARGETS

    games = [r for r in rows_of(lake, "games") if r["game"] == "the_court"]
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for g in games:
        by_mode.setdefault(json.loads(g["options"]).get("mode", "solitaire"), []).append(
            json.loads(g["result"])
        )
    assert sorted(by_mode) == sorted(TARGETS)
    data = run_queries(lake)
    target = {r["mode"]: r for r in data["court_target"]}
    for mode, results in by_mode.items():
        row = target[mode]
        assert row["target"] == TARGETS[mode] and row["games"] == len(results)
        if TARGETS[mode] is None:
            assert row["reached"] is None  # no target: nothing to reach
            continue
        reached = sum(1 for r in results if sum(r["scores"]) >= TARGETS[mode])
        assert row["reached"] == reached == 2  # two winners and three others of each mode
    bins: dict[tuple[str, int], list[int]] = {}  # (mode, bin) -> the scores in it
    for mode, results in by_mode.items():
        for r in results:
            for score in r["scores"] if mode == "shared" else [sum(r["scores"])]:
                bins.setdefault((mode, score // 10 * 10), []).append(score)
    got = {(r["mode"], r["score_from"]): r for r in data["court_scores"]}
    assert {k: r["scores"] for k, r in got.items()} == {k: len(v) for k, v in bins.items()}
    assert {k: r["target"] for k, r in got.items()} == {k: TARGETS[k[0]] for k in bins}
    want = {
        k: None if TARGETS[k[0]] is None else sum(1 for s in v if s >= TARGETS[k[0]]) for k, v in bins.items()
    }
    assert {k: r["reached"] for k, r in got.items()} == want

    page = Page(render(data, lake, None))
    section = page.section("court_scores")
    markers = [t for t in section["texts"] if t.startswith("target ")]
    assert sorted(markers) == sorted(f"target {t}" for t in TARGETS.values() if t is not None)
    for mode, t in TARGETS.items():
        n = len(by_mode[mode]) * (2 if t is None else 1)
        caption = f"{mode}: {n} {'player scores' if t is None else 'games'}"
        assert any(
            x.startswith(caption + ("" if t is None else f", 2 reached {t}")) for x in section["texts"]
        )
    rates = {b["data-label"]: b for b in page.bars("court_target")}
    assert set(rates) == {f"{m} (target {t})" for m, t in TARGETS.items() if t is not None}
    assert all(b["data-value"] == f"{2 / 5:.1%}" for b in rates.values())
    # the title names the targets these games' results carry (the rules per mode), none written in
    (heading,) = [t for t in page.section("court_target")["texts"] if t.startswith("The Court: games")]
    named = ", ".join(f"{m} {t}" for m, t in sorted(TARGETS.items()) if t is not None)
    assert heading.endswith(f"targets in these games: {named}")
    from court_cli.analytics import QUERIES as Q

    assert not any(str(t) in Q["court_target"][0] for t in TARGETS.values() if t is not None)


class Page(HTMLParser):
    """The report page as the script sees it: elements with their attributes, by figure."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []  # (tag, attrs, figure)
        self.sections: dict[str, dict[str, Any]] = {}
        self.scripts: list[tuple[dict[str, str], str]] = []
        self.titles: list[tuple[dict[str, str], str]] = []  # (the bar's attrs, its <title>)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.figure: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section":
            self.figure = a.get("data-figure")
            self.sections[a.get("id", "")] = {"attrs": a, "texts": []}
        self.elements.append((tag, a, self.figure))
        if tag == "script":
            self.scripts.append((a, ""))
        self.stack.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass
        if tag == "section":
            self.figure = None

    def handle_data(self, data: str) -> None:
        if not self.stack:
            return
        tag, _ = self.stack[-1]
        if tag == "script":
            a, text = self.scripts[-1]
            self.scripts[-1] = (a, text + data)
        elif tag == "title" and (bar := self.bar_of()) is not None:
            self.titles.append((bar, data))
        elif self.figure and data.strip():
            self.sections[self.figure]["texts"].append(data.strip())

    def bar_of(self) -> dict[str, str] | None:
        """The innermost element of class ``bar`` the parser is in."""
        for _, a in reversed(self.stack):
            if "bar" in a.get("class", "").split():
                return a
        return None

    def section(self, name: str) -> dict[str, Any]:
        return self.sections[name]

    def of(
        self, figure: str | None = None, tag: str | None = None, cls: str | None = None
    ) -> list[dict[str, str]]:
        return [
            a
            for t, a, f in self.elements
            if (figure is None or f == figure)
            and (tag is None or t == tag)
            and (cls is None or cls in a.get("class", "").split())
        ]

    def bars(self, figure: str) -> list[dict[str, str]]:
        return self.of(figure, cls="bar")


def test_the_page_is_static_with_a_css_filter_and_every_figure_written_out(lake: Path) -> None:
    data = run_queries(lake)
    text = render(data, lake, None)
    page = Page(text)

    # no script of any kind, and nothing anywhere to fetch: the only URL is the SVG namespace
    assert page.scripts == [] and "<script" not in text.lower() and "javascript:" not in text.lower()
    for tag, a, _ in page.elements:
        assert not any(k.startswith("on") for k in a), (tag, a)  # no event handler attributes
        for k, v in a.items():
            if re.match(r"\s*(https?:)?//", v):
                assert (tag, k, v) == ("svg", "xmlns", "http://www.w3.org/2000/svg")

    # the filter: one radio button a game kind (and "all games", checked), each with its label, and
    # CSS hiding the other games' figures, rows and bars when one is checked
    radios = page.of(tag="input")
    labels = {a["for"]: a for a in page.of(tag="label")}
    assert [r["id"] for r in radios] == [f"show-{i}" for i in range(len(radios))]
    assert all(r["type"] == "radio" and r["name"] == "show" and r["id"] in labels for r in radios)
    assert "checked" in radios[0] and not any("checked" in r for r in radios[1:])
    kinds = re.findall(r'label for="show-\d+">([^<]+)<', text)
    assert kinds[0] == "all games"
    marked = {a["data-game"] for _, a, _ in page.elements if a.get("data-game")}
    assert marked == set(kinds[1:]) >= {"hearts", "the_court", "queens_court", "court_wars"}
    for i, k in enumerate(kinds[1:], start=1):
        assert (
            f'#show-{i}:checked~main section.figure:not([data-game=""]):not([data-game="{k}"]),'
            f'#show-{i}:checked~main section.figure [data-game]:not([data-game="{k}"]){{display:none}}'
        ) in text
    assert {a["data-game"] for a in page.bars("win_by_seat")} == {"hearts", "the_court"}

    # every query is a figure, marked with its game (or none: its rows and bars are marked instead)
    figures = {a["data-figure"]: a for a in page.of(tag="section", cls="figure")}
    assert list(figures) == list(QUERIES)
    for name, a in figures.items():
        assert a["id"] == name and a["data-game"] == FIGURE_GAME.get(name, "")
        if not a["data-game"]:
            rows = page.of(name, "tr")[1:]
            assert rows and all(r.get("data-game") in kinds[1:] for r in rows)
            assert all(b.get("data-game") in kinds[1:] for b in page.bars(name))

    # bars: a <title> tooltip, and beside the bar its value and interval as text (no readout needed)
    titles = {id(a): t for a, t in page.titles}
    bars = page.of(cls="bar")
    assert len(bars) > 40 and len(titles) == len(bars)
    for b in bars:
        assert titles[id(b)].startswith(f"{b['data-label']}: {b['data-value']}")
        if b["data-ci"]:
            assert f"(95% CI {b['data-ci']})" in titles[id(b)]
            shown = f"{b['data-value']} (95% CI {b['data-ci']})"
            assert any(
                shown == t for t in page.section(next(f for _, x, f in page.elements if x is b))["texts"]
            )
    assert all(b["data-ci"] for f in ("win_by_seat", "win_by_level", "court_target") for b in page.bars(f))

    # tables: the query's rows in its order
    for name in QUERIES:
        if name == "qc_rank_points" or not data[name]:
            continue
        assert len(page.of(name, "tbody")) == 1 and len(page.of(name, "tr")) == 1 + len(data[name])


def test_chromium_hides_the_other_games_when_a_kind_is_chosen(lake: Path, tmp_path: Path) -> None:
    """Real Chromium, headless, prints the page to PDF (the layout: the DOM is the same, the CSS
    decides what takes room): the page as written, and the same page with the Hearts radio checked.
    With Hearts chosen, the other games' figures take no room: fewer pages."""
    import shutil
    import subprocess

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.fail("Chromium is needed for this test (/usr/bin/chromium)")
    data = run_queries(lake)
    text = render(data, lake, None)
    kinds = re.findall(r'label for="show-(\d+)">([^<]+)<', text)
    hearts = next(i for i, k in kinds if k == "hearts")

    def pages(html_text: str, name: str) -> int:
        page = tmp_path / f"{name}.html"
        page.write_text(html_text)
        out = tmp_path / f"{name}.pdf"
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--user-data-dir={tmp_path / 'profile'}",
                f"--print-to-pdf={out}",
                "--no-pdf-header-footer",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
        return len(re.findall(rb"/Type\s*/Page\b(?!s)", out.read_bytes()))

    chosen = text.replace(' id="show-0" checked>', ' id="show-0">').replace(
        f' id="show-{hearts}">', f' id="show-{hearts}" checked>'
    )
    assert chosen != text
    every, only = pages(text, "all"), pages(chosen, "hearts")
    assert 0 < only < every, (only, every)
