"""The lake: Parquet tables of game records on any ``pyarrow.fs`` file system, written exactly once.

Layout under the root (a local folder, or a URL pyarrow.fs understands: ``s3://bucket/lake``,
``gs://...``, ``hdfs://...``; ``file:///abs/path``)::

    games/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet     one row per game
    moves/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet     one row per move (seq >= 1)
    events_<type>/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet   one row per event of that type
    .../part-<digest>.parquet                                compacted files (many games)
    _staging/<game_id>/<seq>-<index>-<digest>[-e].pb        records of games still being played
                                                             (-e: the file holds the GameEnded)
    _done/<game_id>                                          the game's tables are written (its status)
    _resumed/<game_id>                                       another game resumed it (that game's id)

``game`` and ``day`` (the game's creation day, UTC) are Hive partition columns, so DuckDB
(``hive_partitioning``), Spark and Trino read them from the paths.

Exactly once, keyed by (game_id, seq, index): a fetched batch of records is first *staged*, one
file per game (written to a temporary name, then moved: a file is either there whole or not at
all), and only then acknowledged. Staging records again (a redelivery after a crash between
writing and acking, a replay from the stream's start, a second consumer given the same message)
adds files that hold the same keys again, and the staging area is read keyed: each key once. When a game's staged records run without a gap from seq 0 to
its ``GameEnded`` (each move's indices 0..k, the k-th marked as the move's end), its rows are
built from the staging area alone, so they do not depend on which consumer saw which message,
and written under names made of the game id; then ``_done/<game_id>`` is written and the staging
folder removed. A record of a game already done is acknowledged and dropped.

Compaction (``compact``) merges the per-game files of each partition whose games have been done
for ``settle`` seconds into one ``part-<digest>.parquet`` (the digest is of the names it merges;
the names go into the file's metadata), then deletes those inputs. A crash between the two leaves
both; the next pass finds the part file's inputs still there and deletes them first. ``settle``
(default 600 s, more than the consumer's ack wait) keeps a slow second writer of the same game
from re-creating a per-game file that was already compacted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from court_kit import logging as klog
from prometheus_client import Counter

from .records import Record, decode

log = klog.get_logger("court_analytics.lake")


def mark_missing(package: str, *modules: str) -> None:
    """Map ``package`` and ``modules`` to ``None`` in ``sys.modules`` when ``package`` is not
    installed, so importing them fails at once instead of searching ``sys.path`` again each time.

    pyarrow's type inference (``pa.array`` over Python values: every payload column of
    ``build_tables``) imports ``dateutil.relativedelta`` on each call; without python-dateutil that
    import fails anew every time, after a look through each folder on ``sys.path``: 0.35 ms a
    ``pa.array`` call against 0.02 ms once marked (make bench ONLY=stack: most of court-analytics'
    CPU per move went there)."""
    if package in sys.modules or importlib.util.find_spec(package) is not None:
        return
    for name in (package, *modules):
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: "not importable"


mark_missing("dateutil", "dateutil.relativedelta")
UNREADABLE = Counter(
    "court_analytics_staging_unreadable_total",
    "staging files that did not decode (another version's records, or damage), set aside",
)
CLOSED_OUT = Counter(
    "court_analytics_games_closed_out_total",
    "games landed without a GameEnded after their staging went quiet, by status",
    ["status"],
)
DROPPED = Counter(
    "court_analytics_records_dropped_total",
    "staged records that landed nowhere when a game was closed out, by reason",
    ["reason"],
)
LATE = Counter(
    "court_analytics_records_late_total",
    "records of a game already closed out as unfinished or resumed, past what landed (dropped)",
)

STAGING = "_staging"
DONE = "_done"
RESUMED = "_resumed"
ENDED_SUFFIX = "-e"  # a staging file holding a GameEnded: <seq>-<index>-<digest>-e.pb
FINISHED, UNFINISHED, RESUMED_AS, NO_CREATION = "finished", "unfinished", "resumed", "dropped"
RETENTION = 7 * 86_400.0  # seconds a game's staging stays quiet before it is closed out as unfinished
META_INPUTS = b"court.compacted_from"
SETTLE = 600.0
WROTE, DONE_ALREADY = "wrote", "done"  # try_finish: this call wrote the tables / they were there


def open_fs(where: str | Path) -> tuple[pafs.FileSystem, str]:
    """A file system and the root path in it: a local folder (created) or any pyarrow.fs URL."""
    text = str(where)
    if "://" in text:
        fs, root = pafs.FileSystem.from_uri(text)
    else:
        fs, root = pafs.LocalFileSystem(), str(Path(text).absolute())
    fs.create_dir(root, recursive=True)
    return fs, root.rstrip("/")


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _column_value(v: Any) -> Any:
    """Scalars stay as they are; lists and objects become JSON text (one type per column)."""
    return _json(v) if isinstance(v, (list, dict)) else v


@dataclass
class GameTables:
    game: str
    game_id: str
    day: str
    tables: dict[str, pa.Table]


def build_tables(
    records: list[Record], status: str = FINISHED, resumed_into: str | None = None
) -> GameTables:
    """The rows of one game: records in (seq, index) order from GameCreated, complete moves only.
    ``status`` ``finished``: they end with GameEnded; ``unfinished`` / ``resumed`` (closed out): they
    end wherever the game stopped, and the game has no end time, result or winners."""
    created = records[0]
    last = records[-1]
    assert created.type == "GameCreated" and (last.type == "GameEnded") == (status == FINISHED)
    game, game_id = created.game, created.game_id
    day = created.time.strftime("%Y-%m-%d")
    seats = [str(s) for s in created.payload.get("seats", [])]
    result = {k: v for k, v in last.payload.items() if k != "type"} if status == FINISHED else None
    winners = (result or {}).get("winners")
    single = (result or {}).get("winner")
    if winners is None and isinstance(single, int):  # Queen's Court's GameEnded names one winner
        winners = [single]
    resumed_from = created.payload.get("resumed_from")
    games = pa.table(
        {
            "game_id": [game_id],
            "status": [status],
            "options": [_json(created.payload.get("options", {}))],
            "online": pa.array([bool(created.payload.get("online"))], pa.bool_()),
            "seats": pa.array([seats], pa.list_(pa.string())),
            "players": pa.array([[s for s in seats if not s.startswith("bot:")]], pa.list_(pa.string())),
            "bot_levels": pa.array(
                [[s.removeprefix("bot:") if s.startswith("bot:") else None for s in seats]],
                pa.list_(pa.string()),
            ),
            "started_at": pa.array([created.time], pa.timestamp("us", tz="UTC")),
            "ended_at": pa.array([last.time if status == FINISHED else None], pa.timestamp("us", tz="UTC")),
            "last_move_at": pa.array([last.time], pa.timestamp("us", tz="UTC")),
            "moves": pa.array([last.seq], pa.int64()),
            "winners": pa.array([[int(w) for w in winners or []]], pa.list_(pa.int64())),
            "result": pa.array([None if result is None else _json(result)], pa.string()),
            "resumed_from": pa.array([resumed_from if isinstance(resumed_from, str) else None], pa.string()),
            "resumed_into": pa.array([resumed_into], pa.string()),
        }
    )
    by_seq: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        by_seq[r.seq].append(r)
    move_rows: dict[str, list[Any]] = defaultdict(list)
    for seq in sorted(s for s in by_seq if s > 0):
        evs = by_seq[seq]
        applied = next((e for e in evs if e.type == "ActionApplied"), None)
        move_rows["game_id"].append(game_id)
        move_rows["seq"].append(seq)
        move_rows["time"].append(evs[0].time)
        move_rows["seat"].append(applied.payload.get("seat") if applied else None)
        move_rows["action_type"].append(applied.payload.get("action_type") if applied else None)
        move_rows["events"].append(len(evs))
        move_rows["event_types"].append([e.type for e in evs])
    moves = pa.table(
        {
            "game_id": pa.array(move_rows["game_id"], pa.string()),
            "seq": pa.array(move_rows["seq"], pa.int64()),
            "time": pa.array(move_rows["time"], pa.timestamp("us", tz="UTC")),
            "seat": pa.array(move_rows["seat"], pa.int64()),
            "action_type": pa.array(move_rows["action_type"], pa.string()),
            "events": pa.array(move_rows["events"], pa.int64()),
            "event_types": pa.array(move_rows["event_types"], pa.list_(pa.string())),
        }
    )
    tables = {"games": games, "moves": moves}
    kinds: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        kinds[r.type].append(r)
    for kind, evs in kinds.items():
        keys = sorted({k for e in evs for k in e.payload if k != "type"})
        cols: dict[str, Any] = {
            "game_id": pa.array([game_id] * len(evs), pa.string()),
            "seq": pa.array([e.seq for e in evs], pa.int64()),
            "index": pa.array([e.index for e in evs], pa.int64()),
            "time": pa.array([e.time for e in evs], pa.timestamp("us", tz="UTC")),
        }
        for k in keys:
            values = [_column_value(e.payload.get(k)) for e in evs]
            try:
                cols[f"p_{k}"] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds in one key: keep it as JSON text
                cols[f"p_{k}"] = pa.array([None if v is None else _json(v) for v in values], pa.string())
        tables[f"events_{kind}"] = pa.table(cols)
    return GameTables(game, game_id, day, tables)


class Lake:
    def __init__(self, where: str | Path, *, settle: float = SETTLE):
        self.fs, self.root = open_fs(where)
        self.settle = settle
        self._done: set[str] = set()
        self._done_info: dict[str, dict[str, Any]] = {}

    def _p(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def _exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def _put(self, path: str, data: bytes) -> None:
        """Write whole or not at all: a temporary name in the same folder, then a move."""
        folder = path.rsplit("/", 1)[0]
        tmp = f"{folder}/.tmp-{uuid.uuid4().hex}"
        for attempt in (1, 2):
            self.fs.create_dir(folder, recursive=True)
            try:
                with self.fs.open_output_stream(tmp) as f:
                    f.write(data)
                self.fs.move(tmp, path)
                return
            except FileNotFoundError:
                # the folder went between create_dir and here: a racing replica finished the game and
                # removed its staging folder; make it again (the record is dropped as done later)
                if attempt == 2:
                    raise

    def _put_table(self, path: str, table: pa.Table, metadata: dict[bytes, bytes] | None = None) -> None:
        if metadata:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        self._put(path, sink.getvalue().to_pybytes())

    # ------------------------------------------------------------------ ingest

    def done(self, game_id: str) -> bool:
        if game_id in self._done:
            return True
        if self._exists(self._p(DONE, game_id)):
            self._done.add(game_id)  # done is for ever
            return True
        return False

    def done_info(self, game_id: str) -> dict[str, Any]:
        """A done game's marker: ``status`` (finished when absent: markers before closing out existed)
        and ``moves`` (the last move whose rows landed)."""
        if game_id not in self._done_info:
            with self.fs.open_input_stream(self._p(DONE, game_id)) as f:
                info = json.loads(f.read() or b"{}")
            self._done_info[game_id] = {
                "status": info.get("status", FINISHED),
                "moves": info.get("moves", -1),
            }
        return self._done_info[game_id]

    def stage_batch(
        self, messages: list[tuple[bytes, dict[str, str] | None]]
    ) -> list[list[Record] | ValueError]:
        """Keep a batch of messages, one staging file per game (idempotent: a file's name is the
        digest of its contents, and its records are keyed). Returns each message's Records (one for
        a v1 event; ``records.decode`` may return a list, one message holding a move's records), or
        the ValueError saying why it holds none. The caller acknowledges after this returns."""
        out: list[list[Record] | ValueError] = []
        by_game: dict[str, list[tuple[list[Record], bytes]]] = defaultdict(list)
        for data, headers in messages:
            try:
                decoded = decode(data, headers)
                recs = list(decoded) if isinstance(decoded, list) else [decoded]
                if not recs or len({r.game_id for r in recs}) != 1:
                    raise ValueError("a message must hold the records of one game")
                _check_id(recs[0].game_id)
            except ValueError as exc:
                out.append(exc)
                continue
            out.append(recs)
            by_game[recs[0].game_id].append((recs, data))
            for rec in recs:
                resumed_from = rec.payload.get("resumed_from") if rec.type == "GameCreated" else None
                if (
                    isinstance(resumed_from, str)
                    and resumed_from.isascii()
                    and resumed_from.isalnum()
                    and len(resumed_from) <= 64
                    and not self._exists(self._p(RESUMED, resumed_from))
                ):
                    self._put(self._p(RESUMED, resumed_from), rec.game_id.encode())  # the old game is over
        for game_id, msgs in by_game.items():
            recs = [r for rs, _ in msgs for r in rs]
            if self.done(game_id):
                info = self.done_info(game_id)
                if info["status"] != FINISHED:  # closed out: what comes after what landed is late
                    LATE.inc(sum(1 for r in recs if r.seq > info["moves"]))
                continue
            body = b"".join(len(d).to_bytes(4, "big") + (b"e" if rs[-1].end else b"m") + d for rs, d in msgs)
            first = min(r.key[1:] for r in recs)
            ended = ENDED_SUFFIX if any(r.type == "GameEnded" for r in recs) else ""
            name = f"{first[0]:010d}-{first[1]:05d}-{hashlib.sha256(body).hexdigest()[:24]}{ended}.pb"
            self._put(self._p(STAGING, game_id, name), body)
        return out

    def staged(self, game_id: str) -> list[Record]:
        """The game's staged records, each key once, in (seq, index) order."""
        folder = self._p(STAGING, game_id)
        infos = self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        keyed: dict[tuple[int, int], Record] = {}
        for info in infos:
            if info.type != pafs.FileType.File or not info.base_name.endswith(".pb"):
                continue
            try:
                with self.fs.open_input_stream(info.path) as f:
                    body = f.read()
            except FileNotFoundError:
                continue  # a racing replica finished the game and removed its staging meanwhile
            try:
                recs = _unpack(body)
            except ValueError as exc:
                # written whole (a move), so not torn: another version's records, or damage. Kept
                # aside under a name nothing reads; its records count as never received
                UNREADABLE.inc()
                log.warning("unreadable staging file set aside", path=info.path[-120:], error=str(exc)[:200])
                with contextlib.suppress(OSError):
                    self.fs.move(info.path, f"{folder}/.{info.base_name}.unreadable")
                continue
            for rec in recs:
                keyed[(rec.seq, rec.index)] = rec
        return [keyed[k] for k in sorted(keyed)]

    def try_finish(self, game_id: str, before_done: Callable[[], None] | None = None) -> str:
        """Write the game's tables if its records are complete. Returns ``WROTE`` (this call wrote
        them), ``DONE`` (they were there already) or ``""`` (the game is not complete yet)."""
        if self.done(game_id):
            self._drop_staging(game_id)
            return DONE_ALREADY
        records = self.staged(game_id)
        if not records or records[-1].type != "GameEnded" or not _complete(records):
            return ""
        tables = build_tables(records)
        for name, table in tables.tables.items():
            self._put_table(
                self._p(name, f"game={tables.game}", f"day={tables.day}", f"{game_id}.parquet"), table
            )
        if before_done is not None:
            before_done()
        self._put(
            self._p(DONE, game_id),
            _json({"records": len(records), "moves": records[-1].seq, "status": FINISHED}).encode(),
        )
        self._done.add(game_id)
        self._drop_staging(game_id)
        return WROTE

    def _drop_staging(self, game_id: str) -> None:
        """Remove a done game's staging folder; a racing replica removing files of it at the same
        time is no error (whatever is left is removed by the next pass)."""
        folder = self._p(STAGING, game_id)
        try:
            self.fs.delete_dir_contents(folder, missing_dir_ok=True)
            self.fs.delete_dir(folder)
        except OSError:
            pass

    def close_out(
        self, *, retention: float = RETENTION, resumed_after: float | None = None, now: datetime | None = None
    ) -> dict[str, int]:
        """Land the games that will never end, so staging does not keep them for ever. A staged game
        none of whose records arrived for ``retention`` seconds (its last staging file's time), or
        for ``resumed_after`` seconds (default ``settle``) once another game says it resumed it
        (``resumed_from`` in its GameCreated), is closed out: its complete moves from seq 0 land
        like a finished game's, with ``status`` ``unfinished`` or ``resumed`` (``resumed_into``
        names the new game) and no end, result or winners; records after a gap are dropped
        (``court_analytics_records_dropped_total{reason="after_gap"}``), and a game whose creation
        never arrived lands nothing (``reason="no_creation"``). Its done marker holds the status, so
        a record arriving later is dropped and counted (``court_analytics_records_late_total``).
        The caller runs this only when its consumer has no undelivered records (so a backlog being
        read after downtime is not mistaken for silence). A wait of 0 never closes. Returns closed
        games per status."""
        now = now or datetime.now(UTC)
        resumed_after = self.settle if resumed_after is None else resumed_after
        closed: dict[str, int] = defaultdict(int)
        waits = [w for w in (retention, resumed_after) if w > 0]
        if not waits:
            return {}
        for game_id, infos in sorted(self.staging_index().items()):
            files = [i for i in infos if i.mtime is not None]
            if not files:
                continue
            quiet = (now - max(i.mtime for i in files).astimezone(UTC)).total_seconds()
            if quiet < min(waits):
                continue  # too recent for either wait (most games, most of the time): not read
            if self.try_finish(game_id):
                continue  # complete after all (or done, its staging left over: removed)
            into = self._read_text(self._p(RESUMED, game_id))
            wait = resumed_after if into else retention
            if wait <= 0 or quiet < wait:  # 0: never
                continue
            closed[self._close(game_id, into)] += 1
        return dict(closed)

    def _read_text(self, path: str) -> str | None:
        try:
            with self.fs.open_input_stream(path) as f:
                text: str = f.read().decode()
                return text
        except FileNotFoundError:
            return None

    def _close(self, game_id: str, resumed_into: str | None) -> str:
        records = self.staged(game_id)
        prefix = _complete_prefix(records)
        if not prefix:
            status, moves = NO_CREATION, -1
            DROPPED.labels("no_creation").inc(len(records))
        else:
            status = (
                FINISHED if prefix[-1].type == "GameEnded" else RESUMED_AS if resumed_into else UNFINISHED
            )
            tables = build_tables(prefix, status, resumed_into if status == RESUMED_AS else None)
            for name, table in tables.tables.items():
                self._put_table(
                    self._p(name, f"game={tables.game}", f"day={tables.day}", f"{game_id}.parquet"), table
                )
            moves = prefix[-1].seq
            DROPPED.labels("after_gap").inc(len(records) - len(prefix))
        self._put(
            self._p(DONE, game_id), _json({"records": len(prefix), "moves": moves, "status": status}).encode()
        )
        self._done.add(game_id)
        self._drop_staging(game_id)
        CLOSED_OUT.labels(status).inc()
        log.info(
            "game closed out",
            game_id=game_id,
            status=status,
            moves=moves,
            records=len(prefix),
            dropped=len(records) - len(prefix),
        )
        return status

    def pending(self) -> list[str]:
        """Games with staged records and no tables yet."""
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(STAGING), allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    def staging_index(self) -> dict[str, list[pafs.FileInfo]]:
        """Every staged game's files, from one listing of the staging area (one request on an
        object store, however many games are in play)."""
        out: dict[str, list[pafs.FileInfo]] = defaultdict(list)
        prefix = self._p(STAGING) + "/"
        for info in self.fs.get_file_info(
            pafs.FileSelector(self._p(STAGING), recursive=True, allow_not_found=True)
        ):
            if (
                info.type == pafs.FileType.File
                and info.path.startswith(prefix)
                and "/" in info.path[len(prefix) :]
            ):
                out[info.path[len(prefix) :].split("/", 1)[0]].append(info)
        return dict(out)

    def pending_ended(self, index: dict[str, list[pafs.FileInfo]] | None = None) -> list[str]:
        """Staged games with their GameEnded among the staged records (a staging file named
        ``...-e.pb``): the only ones that may be complete. Games still being played are not read."""
        index = self.staging_index() if index is None else index
        return sorted(
            g for g, files in index.items() if any(f.base_name.endswith(ENDED_SUFFIX + ".pb") for f in files)
        )

    # ------------------------------------------------------------------ compaction

    def tables(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        return sorted(
            i.base_name
            for i in infos
            if i.type == pafs.FileType.Directory and not i.base_name.startswith("_")
        )

    def _partitions(self, table: str) -> Iterable[str]:
        for info in self.fs.get_file_info(
            pafs.FileSelector(self._p(table), recursive=True, allow_not_found=True)
        ):
            if info.type == pafs.FileType.Directory and info.base_name.startswith("day="):
                yield info.path

    def compact(self, *, now: datetime | None = None, min_files: int = 2) -> int:
        """Merge each partition's settled per-game files into one; returns the files merged away."""
        now = now or datetime.now(UTC)
        merged = 0
        for table in self.tables():
            for part in self._partitions(table):
                merged += self._compact_partition(part, now, min_files)
        self._sweep_staging()
        return merged

    def _compact_partition(self, folder: str, now: datetime, min_files: int) -> int:
        infos = [
            i
            for i in self.fs.get_file_info(pafs.FileSelector(folder))
            if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
        ]
        names = {i.base_name for i in infos}
        for i in infos:  # finish an interrupted compaction: its inputs are still there
            if i.base_name.startswith("part-"):
                meta = pq.read_schema(i.path, filesystem=self.fs).metadata or {}
                for stale in json.loads(meta.get(META_INPUTS, b"[]")):
                    if stale in names:
                        self.fs.delete_file(f"{folder}/{stale}")
                        names.discard(stale)
        small = []
        for name in sorted(names):
            if name.startswith("part-"):
                continue
            done = self.fs.get_file_info(self._p(DONE, name.removesuffix(".parquet")))
            if (
                done.type == pafs.FileType.File
                and done.mtime is not None
                and (now - done.mtime.astimezone(UTC)).total_seconds() >= self.settle
            ):
                small.append(name)
        if len(small) < min_files:
            return 0
        merged = pa.concat_tables(
            [pq.read_table(f"{folder}/{n}", filesystem=self.fs) for n in small], promote_options="permissive"
        )
        digest = hashlib.sha256("\n".join(small).encode()).hexdigest()[:20]
        self._put_table(f"{folder}/part-{digest}.parquet", merged, {META_INPUTS: _json(small).encode()})
        for n in small:
            self.fs.delete_file(f"{folder}/{n}")
        return len(small)

    def _sweep_staging(self) -> None:
        """Staging folders of games already done (a late redelivery staged after the game finished)."""
        for game_id in self.pending():
            if self.done(game_id):
                self._drop_staging(game_id)


def _unpack(body: bytes) -> list[Record]:
    """The records of one staging file (``ValueError`` when it is not one)."""
    out, at = [], 0
    while at < len(body):
        if at + 5 > len(body):
            raise ValueError("a staging file that ends inside a record's header")
        n = int.from_bytes(body[at : at + 4], "big")
        end = body[at + 4 : at + 5]
        if end not in (b"e", b"m") or at + 5 + n > len(body):
            raise ValueError("a staging file that is not a list of records")
        decoded = decode(body[at + 5 : at + 5 + n], {"Court-End": "1"} if end == b"e" else None)
        out += decoded if isinstance(decoded, list) else [decoded]
        at += 5 + n
    return out


def _check_id(game_id: str) -> None:
    if not game_id.isascii() or not game_id.isalnum() or len(game_id) > 64:
        raise ValueError(f"game_id must be letters and digits, got {game_id[:20]!r}")


def _complete_prefix(records: list[Record]) -> list[Record]:
    """The records of the moves from 0 on that are complete (indices 0..k, the k-th marked as the
    move's end), up to the first move that is not: what a game that will not end can land."""
    by_seq: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        by_seq[r.seq].append(r)
    out: list[Record] = []
    seq = 0
    while seq in by_seq:
        evs = sorted(by_seq[seq], key=lambda e: e.index)
        if [e.index for e in evs] != list(range(len(evs))) or not evs[-1].end:
            break
        if seq == 0 and evs[0].type != "GameCreated":
            break
        out += evs
        if evs[-1].type == "GameEnded":
            break
        seq += 1
    return out


def _complete(records: list[Record]) -> bool:
    """Every move from 0 to the last, each with indices 0..k and the k-th marked as its end."""
    by_seq: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        by_seq[r.seq].append(r)
    last = records[-1].seq
    if sorted(by_seq) != list(range(last + 1)):
        return False
    for evs in by_seq.values():
        idx = sorted(e.index for e in evs)
        if idx != list(range(len(idx))) or not max(evs, key=lambda e: e.index).end:
            return False
    return records[0].type == "GameCreated"
