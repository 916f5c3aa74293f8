"""The lake: Parquet tables of game records on any ``pyarrow.fs`` file system, written exactly once.

Layout under the root (a local folder, or a URL pyarrow.fs understands: ``s3://bucket/lake``,
``gs://...``, ``hdfs://...``; ``file:///abs/path``)::

    games/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet     one row per game
    moves/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet     one row per move (seq >= 1)
    events_<type>/game=<game>/day=<YYYY-MM-DD>/<game_id>.parquet   one row per event of that type
    .../part-<digest>.parquet                                compacted files (many games)
    _staging/<game_id>/<seq>-<index>-<digest>.pb            records of games still being played
    _done/<game_id>                                          the game's tables are written

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

import hashlib
import json
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

from .records import Record, decode

STAGING = "_staging"
DONE = "_done"
META_INPUTS = b"court.compacted_from"
SETTLE = 600.0


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


def build_tables(records: list[Record]) -> GameTables:
    """The rows of one complete game (records in (seq, index) order, GameCreated first)."""
    created = records[0]
    ended = records[-1]
    assert created.type == "GameCreated" and ended.type == "GameEnded"
    game, game_id = created.game, created.game_id
    day = created.time.strftime("%Y-%m-%d")
    seats = [str(s) for s in created.payload.get("seats", [])]
    result = {k: v for k, v in ended.payload.items() if k != "type"}
    winners = result.get("winners")
    if winners is None and isinstance(result.get("winner"), int):  # Queen's Court's GameEnded names one winner
        winners = [result["winner"]]
    games = pa.table({
        "game_id": [game_id],
        "options": [_json(created.payload.get("options", {}))],
        "seats": pa.array([seats], pa.list_(pa.string())),
        "players": pa.array([[s for s in seats if not s.startswith("bot:")]], pa.list_(pa.string())),
        "bot_levels": pa.array([[s.removeprefix("bot:") if s.startswith("bot:") else None for s in seats]],
                               pa.list_(pa.string())),
        "started_at": pa.array([created.time], pa.timestamp("us", tz="UTC")),
        "ended_at": pa.array([ended.time], pa.timestamp("us", tz="UTC")),
        "moves": pa.array([ended.seq], pa.int64()),
        "winners": pa.array([[int(w) for w in winners or []]], pa.list_(pa.int64())),
        "result": [_json(result)],
    })
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
    moves = pa.table({
        "game_id": pa.array(move_rows["game_id"], pa.string()),
        "seq": pa.array(move_rows["seq"], pa.int64()),
        "time": pa.array(move_rows["time"], pa.timestamp("us", tz="UTC")),
        "seat": pa.array(move_rows["seat"], pa.int64()),
        "action_type": pa.array(move_rows["action_type"], pa.string()),
        "events": pa.array(move_rows["events"], pa.int64()),
        "event_types": pa.array(move_rows["event_types"], pa.list_(pa.string())),
    })
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

    def _p(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def _exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def _put(self, path: str, data: bytes) -> None:
        """Write whole or not at all: a temporary name in the same folder, then a move."""
        folder = path.rsplit("/", 1)[0]
        self.fs.create_dir(folder, recursive=True)
        tmp = f"{folder}/.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, path)

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

    def stage(self, data: bytes, headers: dict[str, str] | None) -> Record:
        """Keep one record (idempotent). The caller acknowledges after this returns."""
        return self.stage_batch([(data, headers)])[0]

    def stage_batch(self, messages: list[tuple[bytes, dict[str, str] | None]]) -> list[list[Record] | ValueError]:
        """Keep a batch of records, one staging file per game (idempotent: a file's name is the
        digest of its contents, and its records are keyed). Returns each message's Record, or the
        ValueError saying why it is not one. The caller acknowledges after this returns."""
        out: list[list[Record] | ValueError] = []
        by_game: dict[str, list[tuple[Record, bytes]]] = defaultdict(list)
        for data, headers in messages:
            try:
                recs = decode(data, headers)
                _check_id(recs[0].game_id)
            except ValueError as exc:
                out.append(exc)
                continue
            out.append(recs)
            by_game[recs[0].game_id].append((recs[0], data))
        for game_id, recs in by_game.items():
            if self.done(game_id):
                continue
            body = b"".join(len(d).to_bytes(4, "big") + b"e" + d for _r, d in recs)  # a record is whole
            first = min(r.key[1:] for r, _ in recs)
            name = f"{first[0]:010d}-{first[1]:05d}-{hashlib.sha256(body).hexdigest()[:24]}.pb"
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
            with self.fs.open_input_stream(info.path) as f:
                body = f.read()
            at = 0
            while at + 5 <= len(body):
                n = int.from_bytes(body[at:at + 4], "big")
                for rec in decode(body[at + 5:at + 5 + n]):
                    keyed[(rec.seq, rec.index)] = rec
                at += 5 + n
        return [keyed[k] for k in sorted(keyed)]

    def try_finish(self, game_id: str, before_done: Callable[[], None] | None = None) -> bool:
        """Write the game's tables if its records are complete; True when the game is done."""
        if self.done(game_id):
            return True
        records = self.staged(game_id)
        if not records or records[-1].type != "GameEnded" or not _complete(records):
            return False
        tables = build_tables(records)
        for name, table in tables.tables.items():
            self._put_table(self._p(name, f"game={tables.game}", f"day={tables.day}", f"{game_id}.parquet"), table)
        if before_done is not None:
            before_done()
        self._put(self._p(DONE, game_id), _json({"records": len(records), "moves": records[-1].seq}).encode())
        self.fs.delete_dir_contents(self._p(STAGING, game_id), missing_dir_ok=True)
        try:
            self.fs.delete_dir(self._p(STAGING, game_id))
        except OSError:
            pass  # a racing consumer removed it first
        return True

    def pending(self) -> list[str]:
        """Games with staged records and no tables yet."""
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(STAGING), allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    # ------------------------------------------------------------------ compaction

    def tables(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and not i.base_name.startswith("_"))

    def _partitions(self, table: str) -> Iterable[str]:
        for info in self.fs.get_file_info(pafs.FileSelector(self._p(table), recursive=True, allow_not_found=True)):
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
        infos = [i for i in self.fs.get_file_info(pafs.FileSelector(folder)) if i.type == pafs.FileType.File
                 and i.base_name.endswith(".parquet")]
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
            if done.type == pafs.FileType.File and done.mtime is not None and \
                    (now - done.mtime.astimezone(UTC)).total_seconds() >= self.settle:
                small.append(name)
        if len(small) < min_files:
            return 0
        merged = pa.concat_tables([pq.read_table(f"{folder}/{n}", filesystem=self.fs) for n in small],
                                  promote_options="permissive")
        digest = hashlib.sha256("\n".join(small).encode()).hexdigest()[:20]
        self._put_table(f"{folder}/part-{digest}.parquet", merged, {META_INPUTS: _json(small).encode()})
        for n in small:
            self.fs.delete_file(f"{folder}/{n}")
        return len(small)

    def _sweep_staging(self) -> None:
        """Staging folders of games already done (a late redelivery staged after the game finished)."""
        for game_id in self.pending():
            if self.done(game_id):
                self.fs.delete_dir(self._p(STAGING, game_id))


def _check_id(game_id: str) -> None:
    if not game_id.isascii() or not game_id.isalnum() or len(game_id) > 64:
        raise ValueError(f"game_id must be letters and digits, got {game_id[:20]!r}")


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
