"""``court analytics report``: DuckDB over the lake court-analytics writes, one self-contained HTML page.

Every figure is one SQL query in ``QUERIES`` (also in docs/analytics.md), run over views named
after the lake's tables (``games``, ``moves``, ``events_<Type>``), each
``read_parquet('<lake>/<table>/**/*.parquet', hive_partitioning = true, union_by_name = true)``,
filtered to games started at or after ``--since``. The page is static HTML with no script: plots
are inline SVG (bars and histograms, each bar with its <title> tooltip and its value and 95%
interval written beside it), the filter by game kind is radio buttons and CSS, and nothing is
fetched, so the page opens offline. People are shown by display name, looked up through the lobby's
public ``GetAccount`` when the report is made (``--names``); the lake holds player ids only.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

# Views derived from the lake's tables, made after them (documented with the queries).
# qc_round_points: each Queen's Court round's rank points per person seat, from the public
# RoundEnded (winners, starter) and the game's seats, by docs/rules/queens_court.md ("Rank points",
# "Bots and rank points (ours)"): every person who did not win pays 100; the people among the
# winners share what the people paid, rounding down, the remainder to the first of them clockwise
# after the starter; a round nobody won moves nothing; bots hold no points (so when only bots won,
# what the people paid leaves play). Online games only (GameCreated.online: the lobby started them
# and registered them with the ranking service); local play moves no points. These are exactly the
# ranking service's `round` ledger entries.
VIEWS: dict[str, str] = {
    "qc_round_points": """
WITH r AS (
  SELECT e.game_id, CAST(e.p_round AS BIGINT) AS round, CAST(e.p_starter AS BIGINT) AS starter,
         CAST(e.p_winners AS BIGINT[]) AS winners, g.seats, len(g.seats) AS n
  FROM events_RoundEnded e JOIN games g USING (game_id) WHERE e.game = 'queens_court' AND g.online
), p AS (
  SELECT *, list_filter(range(n), lambda s: NOT starts_with(seats[s + 1], 'bot:')) AS people FROM r
), q AS (
  SELECT *, list_filter(people, lambda s: NOT list_contains(winners, s)) AS losers,
         list_filter(people, lambda s: list_contains(winners, s)) AS paid_to FROM p
), t AS (
  SELECT *, list_filter(list_transform(range(1, n + 1), lambda k: (starter + k) % n),
                        lambda s: list_contains(paid_to, s))[1] AS first, unnest(people) AS seat FROM q
)
SELECT game_id, round, seat, seats[seat + 1] AS player_id,
       CASE WHEN len(winners) = 0 THEN 0
            WHEN list_contains(losers, seat) THEN -100
            ELSE 100 * len(losers) // len(paid_to)
                 + CASE WHEN seat = first THEN 100 * len(losers) % len(paid_to) ELSE 0 END
       END AS points
FROM t""",
}

# name -> (title, SQL). The SQL reads the views above and below.
QUERIES: dict[str, tuple[str, str]] = {
    "games_per_hour": (
        "Games finished per hour, by game",
        """
SELECT strftime(date_trunc('hour', started_at), '%Y-%m-%d %H:00') AS hour, game, count(*) AS games
FROM games WHERE status = 'finished' GROUP BY ALL ORDER BY hour, game""",
    ),
    "games_by_status": (
        "Games by status (unfinished: quiet past the retention; resumed: continued as another game)",
        """
SELECT game, status, count(*) AS games, sum(moves) AS moves
FROM games GROUP BY ALL ORDER BY game, status""",
    ),
    "length": (
        "Game length (moves) of finished games, by game",
        """
SELECT game, count(*) AS games, min(moves) AS min, quantile_disc(moves, 0.5) AS median,
       quantile_disc(moves, 0.9) AS p90, max(moves) AS max
FROM games WHERE status = 'finished' GROUP BY game ORDER BY game""",
    ),
    "win_by_seat": (
        "Win rate by seat (first-player advantage), by game and table size",
        """
SELECT game, len(seats) AS players, s.seat, count(*) AS games,
       count(*) FILTER (WHERE list_contains(winners, s.seat)) AS wins
FROM games, (SELECT unnest(range(0, 8)) AS seat) s
WHERE s.seat < len(seats) AND status = 'finished' GROUP BY ALL ORDER BY game, players, s.seat""",
    ),
    "win_by_level": (
        "Win rate by bot level (people: the simulated or real players)",
        """
SELECT game, coalesce(bot_levels[s.seat + 1], 'person') AS level, count(*) AS seats,
       count(*) FILTER (WHERE list_contains(winners, s.seat)) AS wins
FROM games, (SELECT unnest(range(0, 8)) AS seat) s
WHERE s.seat < len(seats) AND status = 'finished' GROUP BY ALL ORDER BY game, level""",
    ),
    "hearts_points": (
        "Hearts: points per hand and shoot-the-moon frequency (the bar: moons per hand, 95% CI)",
        """
SELECT count(*) AS hands, avg(list_sum(CAST(p_points AS BIGINT[]))) AS points_per_hand,
       count(*) FILTER (WHERE p_moon IS NOT NULL) AS moons
FROM events_HandEnded WHERE game = 'hearts'""",
    ),
    "hearts_hand_points": (
        "Hearts: points per hand per player (0, 1..25 in bins of 5, 26 for the moon's other seats)",
        """
WITH p AS (
  SELECT unnest(CAST(p_points AS BIGINT[])) AS points FROM events_HandEnded WHERE game = 'hearts'
)
SELECT CASE WHEN points IN (0, 26) THEN points ELSE (points - 1) // 5 * 5 + 1 END AS points_from,
       CASE WHEN points IN (0, 26) THEN points ELSE (points - 1) // 5 * 5 + 5 END AS points_to,
       count(*) AS player_hands
FROM p GROUP BY ALL ORDER BY points_from""",
    ),
    "qc_rounds": (
        "Queen's Court: round wins by seat, and ties",
        """
SELECT CAST(w.seat AS BIGINT) AS seat, count(*) AS round_wins,
       count(*) FILTER (WHERE w.n > 1) AS shared_wins
FROM (SELECT unnest(CAST(p_winners AS BIGINT[])) AS seat, len(CAST(p_winners AS BIGINT[])) AS n
      FROM events_RoundEnded WHERE game = 'queens_court') w
GROUP BY seat ORDER BY seat""",
    ),
    "qc_rank_points": (
        "Queen's Court: rank points the rounds of online games moved, per game and person",
        """
SELECT game_id, player_id, count(*) AS rounds, sum(points) AS points,
       -sum(points) FILTER (WHERE points < 0) AS paid, sum(points) FILTER (WHERE points > 0) AS received
FROM qc_round_points GROUP BY ALL ORDER BY game_id, player_id""",
    ),
    "qc_rank_points_by_player": (
        "Queen's Court: net rank points from the rounds of online games, by person",
        """
SELECT player_id, count(DISTINCT game_id) AS games, sum(points) AS points
FROM qc_round_points GROUP BY player_id ORDER BY points DESC, player_id""",
    ),
    "cw_eliminations": (
        "Court Wars: eliminations by turn (the move they happened in, 20s)",
        """
SELECT CAST(floor(seq / 20) * 20 AS BIGINT) AS from_move, count(*) AS eliminations
FROM events_PlayerOut WHERE game = 'court_wars' GROUP BY ALL ORDER BY from_move""",
    ),
    "court_scores": (
        "The Court: scores against the target, by mode (bins of 10; co-op: the pair's combined "
        "score; shared deck: each player's, no target)",
        """
WITH g AS (
  SELECT coalesce(json_extract_string(options, '$.mode'), 'solitaire') AS mode,
         CAST(json_extract(result, '$.target') AS BIGINT) AS target,
         CAST(json_extract(result, '$.combined') AS BIGINT) AS combined,
         CAST(json_extract(result, '$.scores') AS BIGINT[]) AS scores
  FROM games WHERE game = 'the_court' AND status = 'finished'
), s AS (
  SELECT mode, target, unnest(CASE WHEN mode = 'shared' THEN scores ELSE [combined] END) AS score FROM g
)
SELECT mode, any_value(target) AS target, CAST(floor(score / 10) * 10 AS BIGINT) AS score_from,
       count(*) AS scores,
       CASE WHEN any_value(target) IS NOT NULL THEN count(*) FILTER (WHERE score >= target) END AS reached
FROM s GROUP BY mode, score_from ORDER BY mode, score_from""",
    ),
    "court_target": (
        "The Court: games that reached the target, by mode (each game's target as its rules set it, "
        "from its result; shared deck has none)",
        """
SELECT coalesce(json_extract_string(options, '$.mode'), 'solitaire') AS mode,
       any_value(CAST(json_extract(result, '$.target') AS BIGINT)) AS target, count(*) AS games,
       CASE WHEN any_value(json_extract(result, '$.target')) <> 'null'
            THEN count(*) FILTER (WHERE CAST(json_extract(result, '$.won') AS BOOLEAN)) END AS reached,
       quantile_disc(CAST(json_extract(result, '$.combined') AS BIGINT), 0.5) AS median_combined
FROM games WHERE game = 'the_court' AND status = 'finished' GROUP BY mode ORDER BY mode""",
    ),
}


def connect(lake: Path, since: datetime | None = None) -> Any:
    """A DuckDB connection with one view per table of the lake (games since ``since``)."""
    import duckdb

    db = duckdb.connect()
    floor = (since or datetime(1970, 1, 1, tzinfo=UTC)).isoformat()
    tables = (
        sorted(p.name for p in lake.iterdir() if p.is_dir() and not p.name.startswith("_"))
        if lake.is_dir()
        else []
    )
    if "games" not in tables:
        raise FileNotFoundError(
            f"no games table in {lake}: is court-analytics running, and has a game ended?"
        )
    for t in sorted(tables, key=lambda t: t != "games"):  # games first: the others filter on it
        src = f"read_parquet('{lake / t}/**/*.parquet', hive_partitioning = true, union_by_name = true)"
        if t == "games":
            # status: finished, unfinished or resumed (court_analytics.lake.Lake.close_out); files
            # written before it existed hold finished games only
            cols = {r[0] for r in db.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
            status = "" if "status" in cols else ", 'finished' AS status"
            # online (GameCreated.online): files written before it existed do not say; their games
            # count as local (NULL: no rank points counted)
            online = "" if "online" in cols else ", NULL::BOOLEAN AS online"
            db.execute(
                f"CREATE VIEW games AS SELECT *{status}{online} FROM {src} "
                f"WHERE started_at >= TIMESTAMPTZ '{floor}'"
            )
        else:
            db.execute(
                f'CREATE VIEW "{t}" AS SELECT * FROM {src} WHERE game_id IN (SELECT game_id FROM games)'
            )
    for t in ("events_HandEnded", "events_RoundEnded", "events_PlayerOut", "events_PlayerFinished"):
        if t not in tables:  # a lake without that game yet: an empty view with the columns the SQL reads
            db.execute(
                f'CREATE VIEW "{t}" AS SELECT NULL::VARCHAR AS game, NULL::VARCHAR AS game_id, '
                "NULL::BIGINT AS seq, NULL::VARCHAR AS p_points, NULL::VARCHAR AS p_moon, "
                "NULL::VARCHAR AS p_winners, NULL::BIGINT AS p_round, NULL::BIGINT AS p_starter, "
                "NULL::BIGINT AS p_score WHERE false"
            )
    for name, sql in VIEWS.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
    return db


def run_queries(lake: Path, since: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    db = connect(lake, since)
    out = {}
    for name, (_, sql) in QUERIES.items():
        rel = db.sql(sql)
        out[name] = [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]
    return out


def wilson(wins: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate."""
    if n == 0:
        return 0.0, 0.0
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# The figure a query belongs to, for the page's game filter: a figure of one game shows or hides as a
# whole; the others (rows with a ``game`` column) show or hide row by row and bar by bar.
FIGURE_GAME: dict[str, str] = {
    "hearts_points": "hearts",
    "hearts_hand_points": "hearts",
    "qc_rounds": "queens_court",
    "qc_rank_points": "queens_court",
    "qc_rank_points_by_player": "queens_court",
    "cw_eliminations": "court_wars",
    "court_scores": "the_court",
    "court_target": "the_court",
}


@dataclass
class Bar:
    """One bar: its label and value, and what its tooltip and the text beside it say. ``ci``: a 95%
    interval (on the bar's own scale); ``game``: the game kind the page's filter matches it to (None:
    every kind)."""

    label: str
    value: float
    tip: str = ""
    ci: tuple[float, float] | None = None
    game: str | None = None
    rate: bool = False

    def shown(self, v: float | None = None) -> str:
        v = self.value if v is None else v
        return f"{v:.1%}" if self.rate else f"{v:g}"

    def ci_text(self) -> str:
        """The interval as the page shows it ("" when the bar has none)."""
        return "" if self.ci is None else f"{self.shown(self.ci[0])}..{self.shown(self.ci[1])}"

    def beside(self) -> str:
        """The text written beside the bar: its value, and its interval when it has one."""
        return self.shown() + (f" (95% CI {self.ci_text()})" if self.ci is not None else "")

    def attrs(self) -> str:
        """Its figures as data attributes (for tools reading the page), and its game for the filter."""
        return (
            f'class="bar" data-label="{html.escape(self.label)}" data-value="{html.escape(self.shown())}" '
            f'data-ci="{html.escape(self.ci_text())}" data-tip="{html.escape(self.tip)}"'
            + ("" if self.game is None else f' data-game="{html.escape(self.game)}"')
        )

    def title(self) -> str:
        return html.escape(f"{self.label}: {self.beside()}{'; ' + self.tip if self.tip else ''}")


def _rate(label: str, wins: int, n: int, what: str, game: str | None = None) -> Bar:
    return Bar(label, wins / n if n else 0.0, f"{wins} of {n} {what}", wilson(wins, n), game, rate=True)


def _bars(items: list[Bar], *, rate: bool = False) -> str:
    """Horizontal bars, one small inline SVG a row (so a row the game filter hides takes no room):
    the label, the bar, a whisker for its interval, and its value and interval written beside it."""
    if not items:
        return "<p><em>no data yet</em></p>"
    top = 1.0 if rate else max(abs(b.value) for b in items) or 1.0
    w, label_w, row, text_w = 520, 220, 22, 230
    parts = ['<div class="bars">']
    for b in items:
        bw = max(1.0, abs(b.value) / top * w)
        colour = "#b5534a" if b.value < 0 else "#4a7ab5"  # negative amounts (points lost) in red
        parts.append(
            f'<div {b.attrs()}><svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{label_w + w + text_w}" height="{row}" role="img" aria-label="{b.title()}">'
            f"<title>{b.title()}</title>"
            f'<text x="{label_w - 6}" y="15" text-anchor="end" font-size="12">{html.escape(b.label)}</text>'
            f'<rect x="{label_w}" y="3" width="{bw:.1f}" height="{row - 6}" fill="{colour}"/>'
        )
        if b.ci is not None:
            lo, hi = b.ci
            parts.append(
                f'<line x1="{label_w + lo / top * w:.1f}" x2="{label_w + hi / top * w:.1f}" y1="{row / 2}" '
                f'y2="{row / 2}" stroke="#222" stroke-width="2"/>'
            )
        end = max(bw, (b.ci[1] / top * w) if b.ci is not None else 0.0)  # past the whisker too
        parts.append(
            f'<text x="{label_w + end + 6:.1f}" y="15" font-size="12">{html.escape(b.beside())}</text></svg></div>'
        )
    parts.append("</div>")
    return "".join(parts)


def _columns(items: list[Bar], *, marker: tuple[float, str] | None = None, caption: str = "") -> str:
    """A histogram as inline SVG: one column per bin, in order; ``marker``: (position in bins from
    the left edge, label), a dashed vertical line (the target)."""
    if not items:
        return "<p><em>no data yet</em></p>"
    top = max(b.value for b in items) or 1.0
    w, h, left, bottom = 760, 160, 40, 36
    cw = w / len(items)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" '
        f'width="{left + w + 20}" height="{h + bottom + 18}" role="img">'
    ]
    if caption:
        parts.append(f'<text x="{left}" y="12" font-size="12">{html.escape(caption)}</text>')
    for i, b in enumerate(items):
        bh = b.value / top * h
        x = left + i * cw
        parts.append(
            f"<g {b.attrs()}><title>{b.title()}</title>"
            f'<rect x="{x + 1:.1f}" y="{18 + h - bh:.1f}" width="{max(1.0, cw - 2):.1f}" height="{bh:.1f}" '
            f'fill="#4a7ab5"/><text x="{x + cw / 2:.1f}" y="{18 + h + 14}" text-anchor="middle" '
            f'font-size="10">{html.escape(b.label)}</text>'
            f'<text x="{x + cw / 2:.1f}" y="{18 + h - bh - 3:.1f}" text-anchor="middle" font-size="10">'
            f"{html.escape(b.shown()) if b.value else ''}</text></g>"
        )
    if marker is not None:
        pos, label = marker
        x = left + pos * cw
        parts.append(
            f'<g class="marker"><line x1="{x:.1f}" x2="{x:.1f}" y1="14" y2="{18 + h}" stroke="#b5534a" '
            f'stroke-width="2" stroke-dasharray="5,3"/><text x="{x + 4:.1f}" y="{18 + h + 30}" '
            f'font-size="12" fill="#b5534a">{html.escape(label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[dict[str, Any]]) -> str:
    """A table in the query's order; rows with a ``game`` column carry it for the game filter."""
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{html.escape(str(k))}</th>' for k in rows[0])
    body = "".join(
        (f'<tr data-game="{html.escape(str(r["game"]))}">' if "game" in r else "<tr>")
        + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r.values())
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


HEARTS_BINS = [(0, 0), (1, 5), (6, 10), (11, 15), (16, 20), (21, 25), (26, 26)]


def _court_plot(rows: list[dict[str, Any]]) -> str:
    """One histogram per mode, every bin of 10 from the lowest to the highest score (empty ones
    too, so the axis is linear), the target marked where it falls."""
    out = []
    for mode in sorted({r["mode"] for r in rows}):
        mine = {r["score_from"]: r for r in rows if r["mode"] == mode}
        target = next((r["target"] for r in mine.values() if r["target"] is not None), None)
        lo, hi = min(mine), max(mine)
        if target is not None:
            lo, hi = min(lo, target // 10 * 10), max(hi, target // 10 * 10)
        bins = list(range(lo, hi + 10, 10))
        n = sum(r["scores"] for r in mine.values())
        reached = sum(r["reached"] or 0 for r in mine.values())
        items = [
            Bar(
                f"{b}",
                mine[b]["scores"] if b in mine else 0,
                f"scores {b}..{b + 9}"
                + (f"; {mine[b]['reached'] if b in mine else 0} at or above {target}" if target else ""),
            )
            for b in bins
        ]
        caption = f"{mode}: {n} {'player scores' if target is None else 'games'}" + (
            f", {reached} reached {target} ({reached / n:.1%})" if target is not None and n else ""
        )
        marker = None if target is None else ((target - lo) / 10, f"target {target}")
        out.append(_columns(items, marker=marker, caption=caption))
    return "".join(out)


def _named(rows: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """Rows with a ``player`` column (the display name; the id where none was found) before
    ``player_id``."""
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for k, v in r.items():
            if k == "player_id":
                row["player"] = names.get(v, v)
            row[k] = v
        out.append(row)
    return out


def court_targets(rows: list[dict[str, Any]]) -> str:
    """The Court's targets by mode as the games' own results give them (the engine's rules per mode,
    docs/rules/the_court.md), e.g. "solitaire 56, free_gift 86"; "" when no game has one."""
    return ", ".join(f"{r['mode']} {r['target']}" for r in rows if r["target"] is not None)


def _figure(name: str, data: dict[str, list[dict[str, Any]]], names: dict[str, str] | None = None) -> str:
    rows = data[name]
    names = names or {}
    title, sql = QUERIES[name]
    if name in ("qc_rank_points", "qc_rank_points_by_player"):
        rows = _named(rows, names)
    if name == "court_target" and court_targets(rows):
        title += f"; targets in these games: {court_targets(rows)}"
    if name == "games_per_hour":
        plot = _bars([Bar(f"{r['hour']} {r['game']}", r["games"], "games", game=r["game"]) for r in rows])
    elif name == "length":
        plot = _bars(
            [
                Bar(r["game"], r["median"], f"median; p90 {r['p90']}, max {r['max']}", game=r["game"])
                for r in rows
            ]
        )
    elif name == "win_by_seat":
        plot = _bars(
            [
                _rate(
                    f"{r['game']} {r['players']}p seat {r['seat']}", r["wins"], r["games"], "games", r["game"]
                )
                for r in rows
            ],
            rate=True,
        )
    elif name == "win_by_level":
        plot = _bars(
            [_rate(f"{r['game']} {r['level']}", r["wins"], r["seats"], "seats", r["game"]) for r in rows],
            rate=True,
        )
    elif name == "qc_rounds":
        plot = _bars([Bar(f"seat {r['seat']}", r["round_wins"], f"{r['shared_wins']} shared") for r in rows])
    elif name == "games_by_status":
        plot = _bars(
            [
                Bar(f"{r['game']} {r['status']}", r["games"], f"games, {r['moves']} moves", game=r["game"])
                for r in rows
            ]
        )
    elif name == "hearts_points":
        plot = _bars(
            [_rate("moon shot", r["moons"], r["hands"], "hands") for r in rows if r["hands"]], rate=True
        )
    elif name == "hearts_hand_points":
        got = {r["points_from"]: r["player_hands"] for r in rows}
        total = sum(got.values())
        plot = (
            _columns(
                [
                    Bar(
                        str(a) if a == b else f"{a}-{b}",
                        got.get(a, 0),
                        f"of {total} player-hands ({got.get(a, 0) / total:.1%})",
                    )
                    for a, b in HEARTS_BINS
                ],
                caption="player-hands by the points scored in the hand",
            )
            if rows
            else _columns([])
        )
    elif name == "qc_rank_points":
        paid = sum(r["paid"] or 0 for r in rows)
        received = sum(r["received"] or 0 for r in rows)
        plot = (
            _bars(
                [
                    Bar("paid by the rounds' losers", paid, "rank points"),
                    Bar("received by the rounds' winners", received, "rank points"),
                    Bar("left play (only bots won)", paid - received, "rank points"),
                ]
            )
            + f'<p class="total">{len({r["game_id"] for r in rows})} games: {paid} rank points paid, '
            f"{received} received, {paid - received} left play.</p>"
            + (
                f"<details><summary>per game and person ({len(rows)} rows)</summary>{_table(rows)}</details>"
                if rows
                else ""
            )
        )
        rows = []  # the table is in the details above
    elif name == "qc_rank_points_by_player":
        plot = _bars(
            [Bar(r["player"], r["points"], f"{r['player_id']}, over {r['games']} games") for r in rows[:40]]
        )
    elif name == "cw_eliminations":
        plot = _bars([Bar(f"moves {r['from_move']}+", r["eliminations"], "eliminations") for r in rows])
    elif name == "court_scores":
        plot = _court_plot(rows) if rows else _columns([])
    elif name == "court_target":
        plot = _bars(
            [
                _rate(f"{r['mode']} (target {r['target']})", r["reached"], r["games"], "games")
                for r in rows
                if r["target"] is not None
            ],
            rate=True,
        )
    else:
        plot = ""
    game = FIGURE_GAME.get(name, "")
    return (
        f'<section class="figure" id="{name}" data-figure="{name}" data-game="{game}">'
        f"<h2>{html.escape(title)}</h2>{plot}"
        f"{_table(rows)}<details><summary>SQL</summary><pre>{html.escape(sql.strip())}</pre></details></section>"
    )


def _filter_css(kinds: list[str]) -> str:
    """The game filter without a script: one radio button a kind, before ``main``; when one is
    checked, figures of another game and other games' rows and bars hide, and its label is bold."""
    rules = []
    for i, k in enumerate(kinds, start=1):
        q = html.escape(k)
        rules.append(
            f'#show-{i}:checked~main section.figure:not([data-game=""]):not([data-game="{q}"]),'
            f'#show-{i}:checked~main section.figure [data-game]:not([data-game="{q}"]){{display:none}}'
            f'#show-{i}:checked~#controls label[for="show-{i}"]{{font-weight:bold}}'
            f'#show-{i}:focus-visible~#controls label[for="show-{i}"]{{outline:2px solid #222}}'
        )
    rules.append(
        '#show-0:checked~#controls label[for="show-0"]{font-weight:bold}'
        '#show-0:focus-visible~#controls label[for="show-0"]{outline:2px solid #222}'
    )
    return "".join(rules)


def render(
    data: dict[str, list[dict[str, Any]]],
    lake: Path,
    since: datetime | None,
    names: dict[str, str] | None = None,
    names_note: str = "",
) -> str:
    """The page: static HTML and CSS, no script. ``names``: display names by player id (the ids are
    shown where a name is missing); ``names_note``: where they came from, or why there are none."""
    games = sum(r["games"] for r in data["length"])
    kinds = sorted({r["game"] for r in data["games_by_status"]} | set(FIGURE_GAME.values()))
    style = (
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse;"
        "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}pre{background:#f4f4f4;"
        "padding:8px;overflow:auto}th{background:#f4f4f4}.bar svg{display:block}"
        "#controls{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ccc}"
        "#controls label{margin-right:1em;cursor:pointer}input.show{position:absolute;opacity:0}"
        + _filter_css(kinds)
    )
    radios = "".join(
        f'<input type="radio" class="show" name="show" id="show-{i}"{" checked" if i == 0 else ""}>'
        for i in range(len(kinds) + 1)
    )
    labels = '<label for="show-0">all games</label>' + "".join(
        f'<label for="show-{i}">{html.escape(k)}</label>' for i, k in enumerate(kinds, start=1)
    )
    body = "".join(_figure(n, data, names) for n in QUERIES)
    note = f" {html.escape(names_note)}" if names_note else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Court analytics</title><style>{style}</style>"
        f"</head><body><h1>Court analytics</h1><p>{games} games in {html.escape(str(lake))}"
        f"{' since ' + since.isoformat() if since else ''}; generated "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Every figure's SQL is beside it (docs/analytics.md)."
        f'{note}</p>{radios}<div id="controls">Show: {labels}</div><main>{body}</main></body></html>'
    )


NAMES_TIMEOUT = 10.0  # seconds the report waits for the lobby's answers, in all


async def lookup_names(
    ids: list[str], lobby_address: str, token: str, timeout: float = NAMES_TIMEOUT
) -> tuple[dict[str, str], str]:
    """Display names of ``ids`` through the lobby's public ``GetAccount`` (what lobbies and tables
    show), with the caller's token: ``(names, note)``; the note says where they came from, and
    which or why not. A lobby that is down, slow (past ``timeout`` in all) or refusing leaves the
    ids as they are, and the note says so: the report is written either way."""
    import asyncio

    import grpc
    from court_client import LobbyClient

    if not ids:
        return {}, ""
    names: dict[str, str] = {}
    missing: list[str] = []
    gate = asyncio.Semaphore(8)
    async with LobbyClient(lobby_address, token, retries=2, timeout=timeout) as lobby:

        async def one(pid: str) -> None:
            async with gate:
                try:
                    names[pid] = (await lobby.account(pid)).name
                except grpc.aio.AioRpcError as err:
                    if err.code() != grpc.StatusCode.NOT_FOUND:
                        raise
                    missing.append(pid)  # an account that is gone: its id stays

        try:
            await asyncio.wait_for(asyncio.gather(*(one(p) for p in ids)), timeout)
        except TimeoutError:
            return {}, (
                f"Player names were not looked up: the lobby at {lobby_address} did not answer within "
                f"{timeout:.0f} s; player ids are shown."
            )
        except grpc.aio.AioRpcError as err:
            return {}, (
                f"Player names were not looked up: the lobby at {lobby_address} answered "
                f"{err.code().name} ({(err.details() or '')[:120]}); player ids are shown."
            )
    gone = f"; {len(missing)} account(s) no longer exist, shown by id" if missing else ""
    return names, f"Player names from the lobby at {lobby_address} (GetAccount){gone}."


def report_names(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The player ids the page shows (the people of the rank point figures)."""
    return sorted(
        {r["player_id"] for r in data["qc_rank_points"]}
        | {r["player_id"] for r in data["qc_rank_points_by_player"]}
    )


def _since(text: str) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"--since takes an ISO date or time (2026-12-01, 2026-12-01T10:00), got {text[:40]!r}"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def report_command(
    since: Annotated[str, typer.Option(help="only games started at or after this ISO date/time (UTC)")] = "",
    out: Annotated[Path, typer.Option("--out", help="the HTML file to write")] = Path("report.html"),
    lake: Annotated[
        str, typer.Option(help="the lake folder (default: $COURT_ANALYTICS_LAKE or <state>/lake)")
    ] = "",
    names: Annotated[
        bool,
        typer.Option(
            help="show people by display name, looked up through the lobby (COURT_LOBBY_ADDR) as the "
            "signed-in user; --no-names: player ids"
        ),
    ] = True,
) -> None:
    """Run the documented queries over the analytics lake and write one self-contained HTML page."""
    from rich.console import Console
    from rich.text import Text

    console = Console()
    where = Path(
        lake
        or os.environ.get("COURT_ANALYTICS_LAKE")
        or Path(os.environ.get("COURT_STATE_DIR", ".state")) / "lake"
    )
    when = _since(since)
    try:
        data = run_queries(where, when)
    except FileNotFoundError as exc:
        console.print(Text(f"court: {exc}", style="bold red"))
        raise typer.Exit(1) from None
    found: dict[str, str] = {}
    note = "Players are shown by id (--no-names)." if not names else ""
    if names and report_names(data):
        found, note = _names_for(report_names(data))
    out.write_text(render(data, where, when, found, note))
    games = sum(r["games"] for r in data["length"])
    console.print(f"Wrote {out} ({games} games). {note}".rstrip(), highlight=False, soft_wrap=True)


def _names_for(ids: list[str]) -> tuple[dict[str, str], str]:
    """``lookup_names`` with the signed-in session of ``court login`` at the lobby's address."""
    import asyncio

    from .catalog import court_command
    from .session import Endpoints, SessionStore, config_dir

    endpoints = Endpoints.from_env()
    session = SessionStore(config_dir() / "session.json").load(endpoints.lobby) or {}
    if not session.get("token"):
        return {}, (
            f"Player names were not looked up: nobody is signed in at the lobby {endpoints.lobby} "
            f"(`{court_command()} login NAME`); player ids are shown."
        )
    return asyncio.run(lookup_names(ids, endpoints.lobby, session["token"]))


analytics_app = typer.Typer(no_args_is_help=True, help="The analytics lake: reports over the game records.")
analytics_app.command("report")(report_command)


DOC_HEAD = """# Analytics: the lake and the report

`court-analytics` (services/analytics) lands the public game records (`court.events.v2`; the
decoding lives in `court_analytics/records.py` alone) as Parquet under `COURT_ANALYTICS_LAKE`
(default `<state>/lake`; any pyarrow.fs URL such as `s3://bucket/lake`):

* `games/game=<game>/day=<YYYY-MM-DD>/...parquet`: one row per game: `game_id`, `status`,
  `options` (JSON), `online` (the record's `GameCreated.online`: the lobby started it online and
  registered it with the ranking service, so rank points move; false for local play; absent from
  files landed before the field existed, which the report counts as local), `seats` (player ids,
  `bot:<level>` for bots), `players`, `bot_levels` (null for
  people), `started_at`, `ended_at`, `last_move_at`, `moves`, `winners` (seats; Queen's Court's
  single `winner` as a one-element list), `result` (the GameEnded payload as JSON),
  `resumed_from`, `resumed_into`;
* `moves/...`: one row per move (seq >= 1): `game_id`, `seq`, `time`, `seat`, `action_type`,
  `events`, `event_types`;
* `events_<Type>/...`: one row per event of that type: `game_id`, `seq`, `index`, `time` and the
  payload's keys as `p_<key>` (lists and objects as JSON text).

The consumer takes records in batches: what its fetches bring in `COURT_ANALYTICS_LINGER` (default
0.5 s) from the first record, at most `COURT_ANALYTICS_BATCH` (256), is staged in one pass (one
staging file per game), then acknowledged (every ack, one flush). A crash between the writes and the
acks, or halfway through the acks, has the unacknowledged records delivered again; staging is keyed,
so they land once (a test kills the consumer at both points).

`game` and `day` (the game's creation day, UTC) are Hive partitions. Rows are unique on
(`game_id`, `seq`, `index`); a game's rows appear once it has ended (its records complete from seq
0 to GameEnded), with `status` `finished`. A game that never ends does not stay in `_staging/` for
ever: when none of its records arrived for `COURT_ANALYTICS_STAGING_RETENTION` (default 7 days) or,
once another game's `GameCreated` says it `resumed_from` it, for `COURT_ANALYTICS_RESUMED_AFTER`
(default 10 minutes), and the consumer has nothing undelivered, its complete moves from seq 0 land
with `status` `unfinished` or `resumed` (`resumed_into` names the new game), `ended_at`, `result`
and `winners` empty, `last_move_at` its last landed move. Records after a gap, or of a game whose
creation never arrived, land nowhere (`court_analytics_records_dropped_total{reason}`); records of
a closed game arriving later are dropped (`court_analytics_records_late_total`);
`court_analytics_games_closed_out_total{status}` and `court_analytics_staged_games` show it.
Figures about results (length, win rates) count finished games only.

## Reading the lake

DuckDB (what `court analytics report` runs):

```sql
CREATE VIEW games AS SELECT * FROM read_parquet('.state/lake/games/**/*.parquet',
    hive_partitioning = true, union_by_name = true);
```

Spark, the same tables:

```python
games = spark.read.option("mergeSchema", "true").parquet("s3a://bucket/lake/games")
games.createOrReplaceTempView("games")  # game and day come from the paths
```

## The report

`court analytics report [--since 2026-12-01] [--out report.html] [--lake PATH] [--no-names]` runs
each query below (views as above, `games` filtered by `--since`, the other tables to those games)
and draws it. The page is one static, self-contained file with no script and nothing fetched:
inline SVG, every bar with its value and 95% interval written beside it and a `<title>` tooltip;
each figure's rows as a table, in the query's order; a filter by game kind at the top made of radio
buttons and CSS (figures of another game hide; in the figures over every game, the other games'
rows and bars). Rates carry 95% Wilson intervals.

People appear by display name: the lake holds player ids only (the public records carry no
names), so the report looks each id up through the lobby's public `GetAccount` (the name lobbies,
tables and leaderboards show), at `COURT_LOBBY_ADDR` (else the running stack's) with the session of
`court login`. When nobody is signed in, or the lobby is down, refuses, or does not answer within
10 s in all, the page is written with the ids and says why under its heading; an account that no
longer exists keeps its id. `--no-names` asks nothing.

The Court's targets are each game's own (the engine's `target` and `won` in its result, set by the
rules per mode: docs/rules/the_court.md, "Targets"); the target figure's title names those found
in the games shown. The shared deck has none, so its rows show each player's score and no share
reached.
"""


DOC_VIEWS = """
## Derived views

Made after the table views, and read by the queries below.

`qc_round_points`: one row per Queen's Court round and person seat (`game_id`, `round`, `seat`,
`player_id`, `points`), from the public `RoundEnded` (`winners`, `starter`) and the game's seats, by
docs/rules/queens_court.md ("Rank points", "Bots and rank points (ours)"): every person who did not
win the round pays 100; the people among the winners share what the people paid (rounded down, the
remainder to the first of them clockwise after the starter); a round nobody won moves nothing; bots
hold no points, so when only bots won, what the people paid leaves play. Online games only
(`games.online`): local play moves no rank points, so its rounds are not counted. These are exactly
the ranking service's `round` ledger entries (a test plays online and local games through the
lobby, bots, rules and ranking and checks it, per game and person and in total). Not in the game
records, so not in the report: the antes (a lobby setting; `ante_paid`/`ante_won`/`ante_refunded`
entries) and the challenge payouts (drawn from the hidden seed; `challenge:<id>` entries).
"""


def docs_markdown() -> str:
    parts = [DOC_HEAD, DOC_VIEWS]
    for name, sql in VIEWS.items():
        parts.append(f"\n### `{name}`\n\n```sql\n{sql.strip()}\n```\n")
    parts.append("\n## The queries\n")
    for name, (title, sql) in QUERIES.items():
        parts.append(f"\n### {title} (`{name}`)\n\n```sql\n{sql.strip()}\n```\n")
    return "".join(parts)
