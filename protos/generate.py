"""Generate the ``court_proto`` package from ``protos/`` (run by ``make proto``).

    python protos/generate.py [OUT_DIR]     # default: libs/court_proto

Runs grpcio-tools' protoc with the Python, gRPC and mypy-protobuf plugins, so
every module comes with a ``.pyi`` stub, and the ``connectrpc`` package's
``protoc-gen-connectrpc`` (asyncio stubs on google.protobuf messages: the
``*_connect.py`` modules court-web serves Connect and gRPC-Web with), then rewrites the generated imports
from ``court.<service>.v1`` to ``court_proto.court.<service>.v1`` so the code
lives inside one importable package. ``OUT_DIR`` is replaced wholesale: the
package holds generated files only (tests/test_proto_in_step.py regenerates
into a temporary folder and compares).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
PACKAGE = "court_proto"

INIT_DOC = '''"""Generated protobuf and gRPC code for Court's contracts (source: protos/).

Built by ``make proto`` (protos/generate.py); never edit by hand. Import e.g.
``from court_proto.court.rules.v1 import rules_pb2, rules_pb2_grpc``.
"""
'''

# `from court.rules.v1 import x_pb2` and `import court.rules.v1.x_pb2` ...
_IMPORT = re.compile(r"^(\s*)(from|import) court\.", re.MULTILINE)
# ... the stubs' annotations `court.rules.v1.actions_pb2.Action`, and the
# module name protoc writes into each _pb2.py: 'court.rules.v1.rules_pb2'.
_QUALIFIED = re.compile(r"(?<![\w./])(['\"]?)court\.(\w+)\.(v\d+)\.(\w+_pb2(?:_grpc)?)\b")


def _rewrite(text: str) -> str:
    text = _IMPORT.sub(rf"\1\2 {PACKAGE}.court.", text)
    return _QUALIFIED.sub(rf"\1{PACKAGE}.court.\2.\3.\4", text)


def protoc_run(proto_files: list[str], out: Path) -> None:
    bin_dir = Path(sys.executable).parent
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--plugin=protoc-gen-connectrpc={bin_dir / 'protoc-gen-connectrpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        f"--connectrpc_out={out}",
        "--connectrpc_opt=protobuf=google,io=async",
        *proto_files,
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with status {code}")


def generate(out_dir: Path) -> None:
    proto_files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    if not proto_files:
        raise SystemExit(f"no .proto files under {PROTOS}")
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / PACKAGE
        staging.mkdir()
        protoc_run(proto_files, staging)
        for path in sorted(staging.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".pyi"):
                path.write_text(_rewrite(path.read_text()))
        for folder in [staging, *sorted(p for p in staging.rglob("*") if p.is_dir())]:
            init = folder / "__init__.py"
            if not init.exists():
                init.write_text(INIT_DOC if folder == staging else "")
        (staging / "py.typed").write_text("")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        shutil.copytree(staging, out_dir)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else ROOT / "libs" / PACKAGE
    generate(out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
