"""Compile the games' core (``court_games``) with mypyc, beside its ``.py`` files.

    .venv/bin/python scripts/compile_core.py            make setup runs it (again when a source changes)
    .venv/bin/python scripts/compile_core.py --clean    remove a build: the .py files run
    COURT_COMPILE=0 make setup                          the same: no compile (no C compiler here)

What is compiled is derived, not listed: ``court_games._form.compiled_sources`` (every ``.py``
file of the package but its ``__init__.py`` files and ``_form.py``, and the bots' inner loops that
``_form.ALSO_COMPILED`` names, e.g. ``court_bots/games/the_court_policy.py``), so a module added,
moved or removed is compiled or dropped on the next run. All of them go into one shared library (calls
between them stay native); each module gets an extension module beside its ``.py`` file, and
``_core__mypyc.json`` records the hash of every source compiled (``_form`` runs the ``.py`` files
when one differs). The image builds the same way (deploy/Dockerfile). Needs a C compiler and the
Python headers (Debian: gcc, python3-dev); anything mypyc rejects fails the run with its message.

This file is also the mypy plugin of the build (``plugin`` below): mypyc puts all the modules of a
shared library in one import cycle for mypy, whose order then ignores ``from . import hearts``
(the same priority as the cycle's own edges), and a module-level ``H.HEARTS`` in
``hearts_fast`` is checked before ``hearts`` has inferred it ("Cannot determine type"). The plugin
restates each top-level import between the compiled modules at the priority of ``from x import y``
so that mypy checks them in their import order.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "court_games"


def _form_module(package_dir: Path) -> ModuleType:
    """``court_games/_form.py`` loaded on its own (importing the package could load an old build)."""
    spec = importlib.util.spec_from_file_location("_court_games_form", package_dir / "_form.py")
    assert spec is not None and spec.loader is not None
    form = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(form)
    return form


def clean(package_dir: Path, form: ModuleType) -> list[Path]:
    """Remove every extension module and the manifest from the package (and the ``ALSO_COMPILED``
    modules' extension modules beside their sources)."""
    also = [
        ext
        for rel in form.ALSO_COMPILED
        for src in [package_dir.parent / rel]
        for ext in src.parent.glob(src.stem + ".*")
        if ext.suffix in (".so", ".pyd")
    ]
    gone = [*package_dir.rglob("*.so"), *package_dir.rglob("*.pyd"), *also, package_dir / form.MANIFEST]
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def _fail(message: str) -> None:
    print(f"compile_core: {message}", file=sys.stderr)
    print(
        "compile_core: the compiled core is not built. Fix the above, or run the .py files: "
        "COURT_COMPILE=0 make setup (docs/development.md)",
        file=sys.stderr,
    )
    raise SystemExit(1)


def preflight() -> None:
    """A C compiler and the Python headers, or a message that says which is missing."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        _fail(f"no C compiler: {cc!r} is not on PATH (Debian: apt-get install gcc)")
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        _fail(f"no Python headers: {include}/Python.h is missing (Debian: apt-get install python3-dev)")


def build(root: Path, build_dir: Path) -> dict[str, Any]:
    package_dir = root / PACKAGE
    form = _form_module(package_dir)
    clean(package_dir, form)
    preflight()
    sources = [p.relative_to(root).as_posix() for p in form.compiled_sources(package_dir)]
    hashes = form.source_hashes(package_dir)
    stats = form.source_stats(package_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    config = build_dir / "mypyc.ini"
    config.write_text(f"[mypy]\nstrict = True\nmypy_path = {root}\nplugins = {Path(__file__).resolve()}\n")

    from mypyc.build import mypycify  # mypy's own compiler (the dev group; the image's build venv)
    from setuptools import Distribution
    from setuptools.errors import CompileError, LinkError

    t0 = time.perf_counter()
    cwd = Path.cwd()
    os.chdir(root)  # mypy names the modules from their paths
    try:
        extensions = mypycify(
            ["--config-file", str(config), *sources],
            opt_level="3",
            group_name=f"{form.PACKAGE}.{form.SHARED_LIB.removesuffix('__mypyc')}",
            target_dir=str(build_dir / "c"),
        )
    except SystemExit:
        _fail("mypyc rejected the sources above")
    finally:
        os.chdir(cwd)
    t1 = time.perf_counter()
    dist = Distribution({"name": "court-games-core", "ext_modules": extensions})
    dist.verbose = 0
    cmd: Any = dist.get_command_obj("build_ext")
    cmd.build_lib = str(build_dir / "lib")
    cmd.build_temp = str(build_dir / "temp")
    cmd.parallel = os.cpu_count() or 1
    try:
        dist.run_command("build_ext")
    except (CompileError, LinkError) as exc:
        _fail(f"the C compiler failed: {exc}")
    for ext in extensions:
        built = Path(cmd.get_ext_fullpath(ext.name))
        dest = root / cmd.get_ext_filename(ext.name)
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)  # a new file: a process that has the old one loaded keeps it intact
    manifest = {
        "python": sys.version,
        "mypy": _mypy_version(),
        "modules": len(sources),
        "sources": hashes,
        "stats": stats,
    }
    (package_dir / form.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(
        f"compile_core: {len(sources)} modules of {PACKAGE} compiled by mypyc into {root / PACKAGE}"
        f" (mypyc {t1 - t0:.0f} s, C {time.perf_counter() - t1:.0f} s)"
    )
    return manifest


def _mypy_version() -> str:
    from mypy.version import __version__

    return str(__version__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO / "libs", help="the folder holding court_games/")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "mypyc", help="C sources, objects")
    parser.add_argument("--clean", action="store_true", help="remove a build: the .py files run")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.clean or os.environ.get("COURT_COMPILE", "1") == "0":
        clean(root / PACKAGE, _form_module(root / PACKAGE))
        why = "--clean" if args.clean else "COURT_COMPILE=0"
        print(f"compile_core: {why}: no compiled core in {root / PACKAGE}; its .py files run")
        return 0
    build(root, args.build_dir.resolve())
    return 0


def plugin(version: str) -> type:
    """The mypy plugin of the build (see the module's docstring)."""
    from mypy.nodes import Import, ImportFrom, MypyFile
    from mypy.plugin import Plugin
    from mypy.util import correct_relative_import

    pri_from_import = 5  # mypy.build.PRI_HIGH: a top-level "from x import y"

    class ImportOrder(Plugin):
        def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
            group = {m for m, o in self.options.per_module_options.items() if o.get("mypyc")}
            if file.fullname not in group:
                return []
            deps: list[tuple[int, str, int]] = []
            for imp in file.imports:
                if not imp.is_top_level:
                    continue
                if isinstance(imp, Import):
                    ids = [name for name, _ in imp.ids]
                elif isinstance(imp, ImportFrom):
                    base, _ = correct_relative_import(
                        file.fullname, imp.relative, imp.id, file.path.endswith("__init__.py")
                    )
                    ids = [base, *(f"{base}.{name}" for name, _ in imp.names)]
                else:
                    continue
                deps += [(pri_from_import, i, imp.line) for i in ids if i in group and i != file.fullname]
            return deps

    return ImportOrder


if __name__ == "__main__":
    sys.exit(main())
