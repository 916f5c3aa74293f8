"""Which form of ``court_games`` runs: the mypyc-compiled core or the ``.py`` files themselves.

``make setup`` compiles this package with mypyc (``scripts/compile_core.py``; docs/development.md):
beside each ``x.py`` an extension module ``x.<abi>.so``, one shared library
``_core__mypyc.<abi>.so`` that holds them all, and the manifest ``_core__mypyc.json`` with the
hash, size and modification time of every source it was built from (a start reads only the
sources whose size or time changed). Python's import system takes an extension module before a
``.py`` file of the same name, so the compiled form runs wherever it was built. The ``.py`` files
run instead:

* where nothing was built (no C compiler: ``COURT_COMPILE=0 make setup``);
* with ``COURT_PURE=1`` in the environment: the extension modules are skipped (the tests run the
  game suites in both forms, tests/games/test_forms.py);
* when a source differs from the one the build compiled (edited since the last ``make setup``):
  a warning says so. Then every module of the package runs from its source: one build's compiled
  modules are never mixed with newer interpreted ones.

``compiled_sources`` derives what is compiled: every ``.py`` file of the package but the
``__init__.py`` files (a package's ``__init__`` stays interpreted: mypyc sets a compiled package's
``__path__`` wrongly), this module, which picks the form before any other is imported, and a module
with a line ``# court_games: interpreted (why)``, which mypyc would not compile to the same behaviour;
and the few modules of other packages named in ``ALSO_COMPILED`` (a bot's inner loop over the
core's simulator: calls into the core stay native). Those run in the same form as the core, and
their sources count for the stale check where they are present beside the package (a copy of
the package alone runs without them).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent.name  # "court_games" (also when loaded by path)
PACKAGE_DIR = Path(__file__).resolve().parent
SHARED_LIB = "_core__mypyc"  # mypyc's group library: the package's modules, compiled together
MANIFEST = SHARED_LIB + ".json"
NOT_COMPILED = frozenset({"__init__.py", "_form.py"})
INTERPRETED = b"\n# court_games: interpreted"  # a module's own line: mypyc does not compile it
# modules of other packages compiled with the core, as paths from the folder holding the package
ALSO_COMPILED = ("court_bots/games/the_court_policy.py",)
ALSO_COMPILED_MODULES = frozenset(p.removesuffix(".py").replace("/", ".") for p in ALSO_COMPILED)


def _also(package_dir: Path) -> list[Path]:
    """The ``ALSO_COMPILED`` sources present beside ``package_dir``."""
    return [p for p in (package_dir.parent / rel for rel in ALSO_COMPILED) if p.is_file()]


def _key(p: Path, package_dir: Path) -> str:
    """A source's name in the manifest: its path from the package (``../`` for ``ALSO_COMPILED``)."""
    return Path(os.path.relpath(p, package_dir)).as_posix()


def _candidates(package_dir: Path) -> list[Path]:
    """The package's ``.py`` files mypyc may compile: all but ``NOT_COMPILED`` (a module marked
    ``INTERPRETED`` is one, but telling needs its text)."""
    return [
        p for p in package_dir.rglob("*.py") if p.name not in NOT_COMPILED and "__pycache__" not in p.parts
    ] + _also(package_dir)


def compiled_sources(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The package's sources that mypyc compiles, sorted."""
    return sorted(p for p in _candidates(package_dir) if INTERPRETED not in p.read_bytes())


def source_hashes(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """``{path relative to the package: sha256 of the file}`` of every compiled source."""
    return {
        _key(p, package_dir): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in compiled_sources(package_dir)
    }


def built(package_dir: Path = PACKAGE_DIR) -> bool:
    """Whether a compiled core for this interpreter is there (fresh or not)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return (package_dir / MANIFEST).is_file() and (package_dir / (SHARED_LIB + suffix)).is_file()


def source_stats(package_dir: Path = PACKAGE_DIR) -> dict[str, list[int]]:
    """``{path relative to the package: [size, mtime_ns]}`` of every compiled source."""
    stats = {}
    for p in compiled_sources(package_dir):
        st = p.stat()
        stats[_key(p, package_dir)] = [st.st_size, st.st_mtime_ns]
    return stats


def stale(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """The sources that differ from the ones the build compiled (added, changed or removed).

    A file whose size and modification time are the ones the build recorded is the file it compiled
    and is not read; any other ``.py`` file of the package is read, and hashed if mypyc compiles it.
    An ``ALSO_COMPILED`` source absent beside the package is no difference (nothing can load it).
    """
    try:
        manifest = json.loads((package_dir / MANIFEST).read_text())
        recorded: dict[str, str] = manifest["sources"]
        stats: dict[str, list[int]] = manifest.get("stats", {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [MANIFEST]
    now: dict[str, str] = {}
    for p in _candidates(package_dir):
        rel = _key(p, package_dir)
        st = p.stat()
        if rel in recorded and stats.get(rel) == [st.st_size, st.st_mtime_ns]:
            now[rel] = recorded[rel]
            continue
        data = p.read_bytes()
        if INTERPRETED not in data:
            now[rel] = hashlib.sha256(data).hexdigest()
    absent = {rel for rel in recorded if rel.startswith("../") and not (package_dir / rel).is_file()}
    return sorted(
        p for p in recorded.keys() | now.keys() if recorded.get(p) != now.get(p) and p not in absent
    )


class SourcesOnly(importlib.abc.MetaPathFinder):
    """Finds the package's submodules (and ``ALSO_COMPILED``) among ``.py`` files only, never an
    extension module."""

    _LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None or not (fullname.startswith(PACKAGE + ".") or fullname in ALSO_COMPILED_MODULES):
            return None
        for entry in path:
            spec = importlib.machinery.FileFinder(entry, self._LOADERS).find_spec(fullname, target)
            if spec is not None and spec.loader is not None:
                return spec
        return None


def _choose() -> str:
    if os.environ.get("COURT_PURE", "") not in ("", "0"):
        sys.meta_path.insert(0, SourcesOnly())
        return "interpreted"
    if not built():
        return "interpreted"
    changed = stale()
    if changed:
        warnings.warn(
            f"{PACKAGE}: the compiled core is older than its sources ({', '.join(changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''} changed): running the .py files; `make setup` "
            "compiles them again",
            RuntimeWarning,
            stacklevel=2,
        )
        sys.meta_path.insert(0, SourcesOnly())
        return "interpreted"
    return "compiled"


# "compiled" or "interpreted": which form this process runs (scripts/compile_core.py loads this file
# on its own, as no package: it only derives the sources then)
FORM = _choose() if __package__ == PACKAGE else "interpreted"
