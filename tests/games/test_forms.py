"""The games' core in its two forms: compiled by mypyc (``make setup``) and interpreted (the ``.py``
files: ``COURT_PURE=1``, nothing built, or a build older than its sources). docs/development.md.

A process loads one form for good, so each check runs a fresh interpreter. The last test reruns the
fast game suites (engines, vectors, the OpenSpiel differential, the lockstep tests, the bots' fixed
decisions) interpreted: ``make test`` runs everything else once, compiled.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from court_games import _form

REPO = Path(__file__).resolve().parents[2]

# Imports every module of the package (and those compiled with it), then plays seeded random games on every engine with events,
# views and results, and prints which file each module came from and a digest of everything played.
PROBE = r"""
import hashlib, importlib, json, random, sys
import court_games
from court_games import _form
from court_games.registry import GAME_NAMES, get_game

files = {}
for p in sorted(_form.PACKAGE_DIR.rglob("*.py")):
    rel = p.relative_to(_form.PACKAGE_DIR).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    name = ".".join((_form.PACKAGE, *parts))
    files[name] = importlib.import_module(name).__file__
for rel in _form.ALSO_COMPILED:  # the bots' modules compiled with the core, where present beside it
    if (_form.PACKAGE_DIR.parent / rel).is_file():
        name = rel.removesuffix(".py").replace("/", ".")
        files[name] = importlib.import_module(name).__file__
digest = hashlib.sha256()
for name in GAME_NAMES:
    game = get_game(name)
    opts = game.options_from_dict({})
    for seed in range(3):
        rng = random.Random(seed)
        state, events = game.start(opts, seed)
        for _ in range(400):
            if game.is_terminal(state):
                break
            acting = game.to_act(state)
            player = rng.choice(acting)
            action = rng.choice(game.legal_actions(state, player))
            digest.update(repr(game.action_to_json(action, player)).encode())
            state, events = game.apply(state, player, action)
            digest.update(repr([e.full() for e in events]).encode())
            digest.update(repr([game.view(state, s) for s in (None, *acting)]).encode())
        digest.update(repr(game.result(state) if game.is_terminal(state) else None).encode())
print(json.dumps({"form": _form.FORM, "files": files, "digest": digest.hexdigest()}))
"""


def probe(*, pure: bool, pythonpath: Path | None = None) -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURT_PURE", "PYTHONPATH")}
    if pure:
        env["COURT_PURE"] = "1"
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def is_extension(path: str) -> bool:
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def module_name(path: Path, package_dir: Path = _form.PACKAGE_DIR) -> str:
    if not path.is_relative_to(package_dir):  # one of _form.ALSO_COMPILED, beside the package
        return ".".join(path.relative_to(package_dir.parent).with_suffix("").parts)
    parts = path.relative_to(package_dir).with_suffix("").parts
    return ".".join((_form.PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def compiled_names(package_dir: Path = _form.PACKAGE_DIR) -> set[str]:
    return {module_name(p, package_dir) for p in _form.compiled_sources(package_dir)}


def require_build() -> None:
    if os.environ.get("COURT_COMPILE") == "0":
        pytest.skip("COURT_COMPILE=0: no compiled core to test (only the .py files run here)")
    assert _form.built(), (
        "the compiled core is not built: run make setup (or COURT_COMPILE=0 to test the .py files only)"
    )
    assert not _form.stale(), f"the compiled core is older than {_form.stale()}: run make setup"


def test_what_is_compiled_is_derived_from_the_package():
    names = compiled_names()
    every = {module_name(p) for p in _form.PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts}
    assert f"{_form.PACKAGE}.core" in names and f"{_form.PACKAGE}.registry" in names
    assert len(names) >= 8, names  # the engines and their fast models
    left_out = every - names
    assert f"{_form.PACKAGE}._form" in left_out and _form.PACKAGE in left_out
    for name in left_out:  # each left out for its reason: __init__, _form, or its own mark
        path = _form.PACKAGE_DIR.joinpath(*name.split(".")[1:])
        source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        assert source.name in _form.NOT_COMPILED or _form.INTERPRETED in source.read_bytes(), name


def test_the_default_form_is_the_compiled_core_and_plays_as_the_py_files():
    require_build()
    compiled, _ = probe(pure=False)
    pure, _ = probe(pure=True)
    assert compiled["form"] == "compiled" and pure["form"] == "interpreted"
    names = compiled_names()
    assert {n for n, f in compiled["files"].items() if is_extension(f)} == names
    assert not any(is_extension(f) for f in pure["files"].values()), pure["files"]
    assert compiled["files"].keys() == pure["files"].keys()
    # the same seeded games, events, views and results, bit for bit
    assert compiled["digest"] == pure["digest"]


def test_court_pure_runs_the_py_files():
    pure, _ = probe(pure=True)
    assert pure["form"] == "interpreted"
    assert all(f.endswith(".py") for f in pure["files"].values()), pure["files"]


def test_a_build_older_than_its_sources_is_not_run(tmp_path):
    """An edit after the last make setup: every module runs from its source, with a warning."""
    require_build()
    copy = tmp_path / _form.PACKAGE
    shutil.copytree(_form.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    edited = min(_form.compiled_sources(copy))
    edited.write_text(edited.read_text() + "\n# edited after the build\n")
    stale, stderr = probe(pure=False, pythonpath=tmp_path)
    assert stale["form"] == "interpreted"
    assert all(f.startswith(str(copy)) and f.endswith(".py") for f in stale["files"].values()), stale["files"]
    assert "older than its sources" in stderr and edited.relative_to(copy).as_posix() in stderr
    # the same copy without the edit runs compiled
    edited.write_text(edited.read_text().removesuffix("\n# edited after the build\n"))
    fresh, _ = probe(pure=False, pythonpath=tmp_path)
    assert fresh["form"] == "compiled"
    assert {n for n, f in fresh["files"].items() if is_extension(f)} == compiled_names(copy)


def test_the_stale_check_reads_only_sources_whose_size_or_time_changed(tmp_path):
    """The manifest's size and time let a start skip reading the sources; a touch alone is no edit,
    an edit of the same size is one."""
    require_build()
    copy = tmp_path / _form.PACKAGE
    shutil.copytree(_form.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _form.stale(copy) == []
    edited = min(_form.compiled_sources(copy))
    rel = edited.relative_to(copy).as_posix()
    st = edited.stat()
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert _form.stale(copy) == []  # touched: the hash is read and matches
    text = edited.read_bytes()
    i = text.index(b"from")
    edited.write_bytes(text[:i] + b"FROM" + text[i + 4 :])  # same size
    assert _form.stale(copy) == [rel]
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the recorded size and time back,
    manifest = copy / _form.MANIFEST  # a build without the stats hashes every source
    data = json.loads(manifest.read_text())
    del data["stats"]
    manifest.write_text(json.dumps(data))
    assert _form.stale(copy) == [rel]


def test_an_edit_of_a_module_compiled_with_the_core_makes_the_build_stale(tmp_path):
    """The bots' modules compiled with the core (``ALSO_COMPILED``) are sources of the build too; a
    copy of the package without them has nothing of theirs to load, and is not stale for that."""
    require_build()
    copy = tmp_path / _form.PACKAGE
    shutil.copytree(_form.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _form.stale(copy) == []  # without them
    rel = _form.ALSO_COMPILED[0]
    extra = tmp_path / rel
    extra.parent.mkdir(parents=True)
    shutil.copy2(_form.PACKAGE_DIR.parent / rel, extra)
    assert _form.stale(copy) == []  # with them, as built
    extra.write_text(extra.read_text() + "\n# edited after the build\n")
    assert _form.stale(copy) == [f"../{rel}"]


def test_clean_removes_the_build_of_the_modules_compiled_with_the_core(tmp_path):
    """``compile_core.py --clean`` (and ``COURT_COMPILE=0``) leaves no extension module of an
    ``ALSO_COMPILED`` module behind, which would otherwise still load; its source stays."""
    spec = importlib.util.spec_from_file_location("compile_core", REPO / "scripts" / "compile_core.py")
    assert spec is not None and spec.loader is not None
    compile_core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compile_core)
    package_dir = tmp_path / _form.PACKAGE
    package_dir.mkdir()
    (package_dir / _form.MANIFEST).write_text("{}")
    rel = Path(_form.ALSO_COMPILED[0])
    source = tmp_path / rel
    source.parent.mkdir(parents=True)
    source.write_text("")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    built = [source.with_name(source.stem + suffix), package_dir / f"core{suffix}"]
    other = source.with_name(f"another{suffix}")  # not compiled with the core: not the build's
    for f in (*built, other):
        f.write_bytes(b"")
    compile_core.clean(package_dir, _form)
    assert not any(f.exists() for f in built) and not (package_dir / _form.MANIFEST).exists()
    assert source.is_file() and other.is_file()


# The interpreted rerun: tests/games (engines, vectors, the OpenSpiel differential) but the long random
# games, and of tests/bots the lockstep tests and the fixed decisions; the thousand-game lockstep runs
# and the random games stay compiled only (minutes interpreted).
INTERPRETED_RERUN = [
    "tests/games",
    "tests/bots",
    "--ignore=tests/games/test_random_games.py",
    "--deselect=tests/games/test_forms.py",
    "-k",
    "not thousand and (not bots or decisions_fixed or lockstep or as_the_engine or follows_the_engine)",
]


def test_the_game_suites_pass_interpreted():
    if _form.FORM == "interpreted":
        pytest.skip("this run is interpreted already (COURT_PURE=1 or no compiled core)")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", *INTERPRETED_RERUN],
        cwd=REPO,
        env={**os.environ, "COURT_PURE": "1"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
