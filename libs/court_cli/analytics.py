"""``court analytics report``: DuckDB over the lake court-analytics writes, one self-contained HTML page.

Every figure is one SQL query in ``QUERIES`` (also in docs/analytics.md), run over views named
after the lake's tables (``games``, ``moves``, ``events_<Type>``), each
``read_parquet('<lake>/<table>/**/*.parquet', hive_partitioning = true, union_by_name = true)``,
filtered to games started at or after ``--since``. Plots are inline SVG bars (hover for values):
no script, no CDN, so the page opens offline.
"""

from __future__ import annotations

import html
import math
import os
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
# what the people paid leaves play). These are exactly the ranking service's `round` ledger entries
# of an online game.
VIEWS: dict[str, str] = {
    "qc_round_points": """
WITH r AS (
  SELECT e.game_id, CAST(e.p_round AS BIGINT) AS round, CAST(e.p_starter AS BIGINT) AS starter,
         CAST(e.p_winners AS BIGINT[]) AS winners, g.seats, len(g.seats) AS n
  FROM events_RoundEnded e JOIN games g USING (game_id) WHERE e.game = 'queens_court'
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
        "Hearts: points per hand and shoot-the-moon frequency",
        """
SELECT count(*) AS hands, avg(list_sum(CAST(p_points AS BIGINT[]))) AS points_per_hand,
       count(*) FILTER (WHERE p_moon IS NOT NULL) AS moons
FROM events_HandEnded WHERE game = 'hearts'""",
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
        "Queen's Court: rank points the rounds moved, per game and person",
        """
SELECT game_id, player_id, count(*) AS rounds, sum(points) AS points,
       -sum(points) FILTER (WHERE points < 0) AS paid, sum(points) FILTER (WHERE points > 0) AS received
FROM qc_round_points GROUP BY ALL ORDER BY game_id, player_id""",
    ),
    "qc_rank_points_by_player": (
        "Queen's Court: net rank points from rounds, by person",
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
        "The Court: solitaire scores (bins of 10)",
        """
SELECT CAST(floor(p_score / 10) * 10 AS BIGINT) AS score_from, count(*) AS games,
       count(*) FILTER (WHERE p_score >= 0) AS at_or_above_zero
FROM events_PlayerFinished WHERE game = 'the_court' GROUP BY ALL ORDER BY score_from""",
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
            db.execute(
                f"CREATE VIEW games AS SELECT *{status} FROM {src} WHERE started_at >= TIMESTAMPTZ '{floor}'"
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


def _bars(
    items: list[tuple[str, float, str]], *, ci: list[tuple[float, float]] | None = None, rate: bool = False
) -> str:
    """Horizontal bars as inline SVG: (label, value, tooltip); ``ci``: whiskers on a 0..1 scale."""
    if not items:
        return "<p><em>no data yet</em></p>"
    top = 1.0 if rate else max(abs(v) for _, v, _ in items) or 1.0
    w, label_w, row = 640, 220, 22
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + label_w + 80}" height="{row * len(items) + 10}" '
        'role="img">'
    ]
    for i, (label, value, tip) in enumerate(items):
        y = 5 + i * row
        bw = max(1.0, abs(value) / top * w)
        colour = "#b5534a" if value < 0 else "#4a7ab5"  # negative amounts (points lost) in red
        parts.append(
            f'<g><title>{html.escape(tip)}</title><text x="{label_w - 6}" y="{y + 15}" text-anchor="end" '
            f'font-size="12">{html.escape(label)}</text><rect x="{label_w}" y="{y + 3}" width="{bw:.1f}" '
            f'height="{row - 6}" fill="{colour}"/>'
        )
        if ci is not None:
            lo, hi = ci[i]
            parts.append(
                f'<line x1="{label_w + lo * w:.1f}" x2="{label_w + hi * w:.1f}" y1="{y + row / 2}" '
                f'y2="{y + row / 2}" stroke="#222" stroke-width="2"/>'
            )
        shown = f"{value:.1%}" if rate else f"{value:g}"
        parts.append(f'<text x="{label_w + bw + 6}" y="{y + 15}" font-size="12">{shown}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r.values()) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def _figure(name: str, data: dict[str, list[dict[str, Any]]]) -> str:
    rows = data[name]
    if name == "games_per_hour":
        plot = _bars([(f"{r['hour']} {r['game']}", r["games"], f"{r['games']} games") for r in rows])
    elif name == "length":
        plot = _bars(
            [(r["game"], r["median"], f"median {r['median']}, p90 {r['p90']}, max {r['max']}") for r in rows]
        )
    elif name in ("win_by_seat", "win_by_level"):
        n_key = "games" if name == "win_by_seat" else "seats"

        def what(r: dict[str, Any]) -> str:
            return (
                f"{r['game']} {r['players']}p seat {r['seat']}"
                if name == "win_by_seat"
                else f"{r['game']} {r['level']}"
            )

        plot = _bars(
            [
                (
                    what(r),
                    r["wins"] / r[n_key] if r[n_key] else 0.0,
                    f"{r['wins']} of {r[n_key]}; 95% CI {wilson(r['wins'], r[n_key])[0]:.1%}.."
                    f"{wilson(r['wins'], r[n_key])[1]:.1%}",
                )
                for r in rows
            ],
            ci=[wilson(r["wins"], r[n_key]) for r in rows],
            rate=True,
        )
    elif name == "qc_rounds":
        plot = _bars([(f"seat {r['seat']}", r["round_wins"], f"{r['shared_wins']} shared") for r in rows])
    elif name == "games_by_status":
        plot = _bars(
            [
                (f"{r['game']} {r['status']}", r["games"], f"{r['games']} games, {r['moves']} moves")
                for r in rows
            ]
        )
    elif name == "qc_rank_points":
        paid = sum(r["paid"] or 0 for r in rows)
        received = sum(r["received"] or 0 for r in rows)
        plot = (
            _bars(
                [
                    ("paid by the rounds' losers", paid, f"{paid} rank points"),
                    ("received by the rounds' winners", received, f"{received} rank points"),
                    ("left play (only bots won)", paid - received, f"{paid - received} rank points"),
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
            [(r["player_id"], r["points"], f"{r['points']} over {r['games']} games") for r in rows[:40]]
        )
    elif name == "cw_eliminations":
        plot = _bars([(f"moves {r['from_move']}+", r["eliminations"], "") for r in rows])
    elif name == "court_scores":
        plot = _bars([(f"score {r['score_from']}..{r['score_from'] + 9}", r["games"], "") for r in rows])
    else:
        plot = ""
    title, sql = QUERIES[name]
    return (
        f'<section id="{name}"><h2>{html.escape(title)}</h2>{plot}{_table(rows)}'
        f"<details><summary>SQL</summary><pre>{html.escape(sql.strip())}</pre></details></section>"
    )


def render(data: dict[str, list[dict[str, Any]]], lake: Path, since: datetime | None) -> str:
    games = sum(r["games"] for r in data["length"])
    style = (
        "body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse;"
        "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}pre{background:#f4f4f4;"
        "padding:8px;overflow:auto}"
    )
    body = "".join(_figure(n, data) for n in QUERIES)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Court analytics</title><style>{style}</style>"
        f"</head><body><h1>Court analytics</h1><p>{games} games in {html.escape(str(lake))}"
        f"{' since ' + since.isoformat() if since else ''}; generated "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Every figure's SQL is beside it (docs/analytics.md).</p>"
        f"{body}</body></html>"
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
    out.write_text(render(data, where, when))
    games = sum(r["games"] for r in data["length"])
    console.print(f"Wrote {out} ({games} games).", highlight=False, soft_wrap=True)


analytics_app = typer.Typer(no_args_is_help=True, help="The analytics lake: reports over the game records.")
analytics_app.command("report")(report_command)


DOC_HEAD = """# Analytics: the lake and the report

`court-analytics` (services/analytics) lands the public game records (`court.events.v2`; the
decoding lives in `court_analytics/records.py` alone) as Parquet under `COURT_ANALYTICS_LAKE`
(default `<state>/lake`; any pyarrow.fs URL such as `s3://bucket/lake`):

* `games/game=<game>/day=<YYYY-MM-DD>/...parquet`: one row per game: `game_id`, `status`,
  `options` (JSON), `seats` (player ids, `bot:<level>` for bots), `players`, `bot_levels` (null for
  people), `started_at`, `ended_at`, `last_move_at`, `moves`, `winners` (seats; Queen's Court's
  single `winner` as a one-element list), `result` (the GameEnded payload as JSON),
  `resumed_from`, `resumed_into`;
* `moves/...`: one row per move (seq >= 1): `game_id`, `seq`, `time`, `seat`, `action_type`,
  `events`, `event_types`;
* `events_<Type>/...`: one row per event of that type: `game_id`, `seq`, `index`, `time` and the
  payload's keys as `p_<key>` (lists and objects as JSON text).

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

`court analytics report [--since 2026-12-01] [--out report.html] [--lake PATH]` runs each query below
(views as above, `games` filtered by `--since`, the other tables to those games) and draws it.
"""


DOC_VIEWS = """
## Derived views

Made after the table views, and read by the queries below.

`qc_round_points`: one row per Queen's Court round and person seat (`game_id`, `round`, `seat`,
`player_id`, `points`), from the public `RoundEnded` (`winners`, `starter`) and the game's seats, by
docs/rules/queens_court.md ("Rank points", "Bots and rank points (ours)"): every person who did not
win the round pays 100; the people among the winners share what the people paid (rounded down, the
remainder to the first of them clockwise after the starter); a round nobody won moves nothing; bots
hold no points, so when only bots won, what the people paid leaves play. For an online game these
are exactly the ranking service's `round` ledger entries (a test plays games through the lobby,
bots, rules and ranking and checks it, per game and person and in total). Not in the game records,
so not in the report: the antes (a lobby setting; `ante_paid`/`ante_won`/`ante_refunded` entries),
the challenge payouts (drawn from the hidden seed; `challenge:<id>` entries), and whether a game
was online at all (a local game's rounds are counted here though its players' balances never move).
"""


def docs_markdown() -> str:
    parts = [DOC_HEAD, DOC_VIEWS]
    for name, sql in VIEWS.items():
        parts.append(f"\n### `{name}`\n\n```sql\n{sql.strip()}\n```\n")
    parts.append("\n## The queries\n")
    for name, (title, sql) in QUERIES.items():
        parts.append(f"\n### {title} (`{name}`)\n\n```sql\n{sql.strip()}\n```\n")
    return "".join(parts)
