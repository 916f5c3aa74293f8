"""Generate docs/contract-reference.md from the protos' own comments (run by ``make contract``).

    python protos/contract_doc.py [OUT]      # default: docs/contract-reference.md

protoc (grpcio-tools) compiles protos/ into a descriptor set with source info; every message,
field, enum and value of the contract's files is listed with the comments written beside it in
the .proto, each file under its header comment. tests/test_contract_in_step.py regenerates the
page and compares, so a proto change without ``make contract`` fails the tests.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from court_proto.court.games.v1 import common_pb2  # registers the omitted_when_unset option
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "docs" / "contract-reference.md"
# The contract's files in the page's order: the events, their conventions, the games, the views,
# the record envelope and the typed actions.
FILES = [
    "court/games/v1/events.proto",
    "court/games/v1/common.proto",
    "court/games/v1/queens_court.proto",
    "court/games/v1/hearts.proto",
    "court/games/v1/the_court.proto",
    "court/games/v1/court_wars.proto",
    "court/games/v1/views.proto",
    "court/events/v2/records.proto",
    "court/rules/v1/actions.proto",
]
TITLES = {
    "court/games/v1/events.proto": "Events",
    "court/games/v1/common.proto": "Conventions and shared messages",
    "court/games/v1/queens_court.proto": "Queen's Court",
    "court/games/v1/hearts.proto": "Hearts",
    "court/games/v1/the_court.proto": "The Court",
    "court/games/v1/court_wars.proto": "Court Wars",
    "court/games/v1/views.proto": "Views",
    "court/events/v2/records.proto": "The record envelope",
    "court/rules/v1/actions.proto": "Actions",
}
_TYPE_NAMES = {v: k[len("TYPE_") :].lower() for k, v in descriptor_pb2.FieldDescriptorProto.Type.items()}

# source_code_info paths: FileDescriptorProto field numbers
_MESSAGE, _ENUM, _SYNTAX, _PACKAGE = 4, 5, 12, 2
_FIELD, _NESTED, _NESTED_ENUM, _ONEOF = 2, 3, 4, 8
_VALUE = 2


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    include = Path(protoc.__file__).parent / "_proto"
    files = [f for f in FILES if (PROTOS / f).exists()]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTOS}",
                f"-I{include}",
                "--include_source_info",
                "--include_imports",
                f"--descriptor_set_out={out}",
                *files,
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed with status {code}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _clean(comment: str) -> str:
    lines = [line[1:] if line.startswith(" ") else line for line in comment.strip("\n").split("\n")]
    return "\n".join(lines).strip()


class Comments:
    def __init__(self, f: descriptor_pb2.FileDescriptorProto):
        self.by_path: dict[tuple[int, ...], descriptor_pb2.SourceCodeInfo.Location] = {
            tuple(loc.path): loc for loc in f.source_code_info.location
        }
        syntax = self.by_path.get((_SYNTAX,))
        self.header = (
            _clean("\n\n".join(syntax.leading_detached_comments) + "\n" + syntax.leading_comments)
            if syntax
            else ""
        )

    def of(self, path: tuple[int, ...]) -> str:
        loc = self.by_path.get(path)
        if loc is None:
            return ""
        return " ".join(p for p in (_clean(loc.leading_comments), _clean(loc.trailing_comments)) if p)


def _type(fd: descriptor_pb2.FieldDescriptorProto, package: str) -> str:
    if fd.type_name:
        name = fd.type_name.lstrip(".")
        return f"`{name[len(package) + 1 :]}`" if name.startswith(package + ".") else f"`{name}`"
    return f"`{_TYPE_NAMES[fd.type]}`"


def _label(fd: descriptor_pb2.FieldDescriptorProto, msg: descriptor_pb2.DescriptorProto) -> str:
    parts = []
    if fd.label == fd.LABEL_REPEATED:
        parts.append("repeated")
    elif fd.proto3_optional:
        parts.append("optional")
    elif fd.HasField("oneof_index"):
        parts.append(f"oneof `{msg.oneof_decl[fd.oneof_index].name}`")
    if fd.options.Extensions[common_pb2.omitted_when_unset]:
        parts.append("omitted when unset")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _message(
    out: list[str],
    msg: descriptor_pb2.DescriptorProto,
    path: tuple[int, ...],
    prefix: str,
    package: str,
    comments: Comments,
) -> None:
    name = prefix + msg.name
    out.append(f"### {name}\n")
    doc = comments.of(path)
    if doc:
        out.append(doc + "\n")
    if msg.field:
        out.append("| Field | # | Type | Label | Description |")
        out.append("|---|---|---|---|---|")
        for i, fd in enumerate(msg.field):
            out.append(
                f"| `{fd.name}` | {fd.number} | {_type(fd, package)} | {_label(fd, msg)} | "
                f"{_cell(comments.of((*path, _FIELD, i)))} |"
            )
        out.append("")
    else:
        out.append("No fields.\n")
    for i, nested in enumerate(msg.nested_type):
        if nested.options.map_entry:
            continue
        _message(out, nested, (*path, _NESTED, i), name + ".", package, comments)
    for i, enum in enumerate(msg.enum_type):
        _enum(out, enum, (*path, _NESTED_ENUM, i), name + ".", comments)


def _enum(
    out: list[str],
    enum: descriptor_pb2.EnumDescriptorProto,
    path: tuple[int, ...],
    prefix: str,
    comments: Comments,
) -> None:
    out.append(f"### enum {prefix}{enum.name}\n")
    doc = comments.of(path)
    if doc:
        out.append(doc + "\n")
    out.append("| Value | # | Description |")
    out.append("|---|---|---|")
    for i, v in enumerate(enum.value):
        out.append(f"| `{v.name}` | {v.number} | {_cell(comments.of((*path, _VALUE, i)))} |")
    out.append("")


def render() -> str:
    files = {f.name: f for f in descriptor_set().file}
    out = [
        "# The Court contract: typed events, views and records",
        "",
        "Generated by `make contract` (protos/contract_doc.py) from the comments in protos/; do not edit",
        "by hand (tests/test_contract_in_step.py fails when this page and the protos disagree).",
        "The prose contract (subjects, readers, guarantees) is docs/contract.md.",
        "Every event kind of every game, every view and every record message, field by field. The",
        "JSON forms the engines use (docs/rules/) follow from them by the conventions below.",
        "",
    ]
    present = [name for name in FILES if name in files]
    out.append("Contents: " + ", ".join(f"[{TITLES[n]}](#{_anchor(TITLES[n])})" for n in present) + ".\n")
    for name in present:
        f = files[name]
        comments = Comments(f)
        out.append(f"## {TITLES[name]}\n")
        out.append(f"`{name}`, package `{f.package}`.\n")
        if comments.header:
            out.append(comments.header + "\n")
        if name == "court/games/v1/events.proto":
            out.extend(_kinds(f))
        for i, enum in enumerate(f.enum_type):
            _enum(out, enum, (_ENUM, i), "", comments)
        for i, msg in enumerate(f.message_type):
            _message(out, msg, (_MESSAGE, i), "", f.package, comments)
    return "\n".join(out).rstrip("\n") + "\n"


def _kinds(f: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """The table of Event's kinds: the oneof case, the engine's "type", the message."""
    event = next(m for m in f.message_type if m.name == "Event")
    rows = [
        "Every kind of `Event` (the oneof case; the engine's `type`; the message):",
        "",
        "| Case | Game | type | Message |",
        "|---|---|---|---|",
    ]
    games = ("queens_court", "hearts", "the_court", "court_wars")
    for fd in event.field:
        if not fd.HasField("oneof_index") or fd.proto3_optional:
            continue
        msg = fd.type_name.rsplit(".", 1)[-1]
        game = next((g for g in games if fd.name.startswith(g + "_")), "every game")
        kind = msg[len("".join(p.capitalize() for p in game.split("_"))) :] if game != "every game" else msg
        rows.append(f"| `{fd.name}` | {game} | `{kind}` | [{msg}](#{msg.lower()}) |")
    rows.append("")
    return rows


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c == "-")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT
    out.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
