"""docs/contract-reference.md is exactly what `make contract` builds from the protos' comments, and it lists
every event and view message of court.games.v1 with every field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from court_proto.court.games.v1 import events_pb2, views_pb2

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "contract-reference.md"


def test_the_contract_page_matches_the_protos(tmp_path: Path) -> None:
    out = tmp_path / "contract.md"
    subprocess.run(
        [sys.executable, str(ROOT / "protos" / "contract_doc.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert out.read_text() == PAGE.read_text(), (
        "docs/contract-reference.md is out of step with protos/: run `make contract`"
    )


def test_every_event_and_view_message_is_listed_with_its_fields() -> None:
    text = PAGE.read_text()
    messages = [fd.message_type for fd in events_pb2.Event.DESCRIPTOR.oneofs_by_name["kind"].fields]
    messages += [fd.message_type for fd in views_pb2.View.DESCRIPTOR.fields]
    assert len(messages) > 60
    for desc in messages:
        section = text.split(f"\n### {desc.name}\n", 1)
        assert len(section) == 2, f"{desc.full_name} has no section in docs/contract-reference.md"
        body = section[1].split("\n### ", 1)[0]
        for fd in desc.fields:
            assert f"| `{fd.name}` | {fd.number} |" in body, f"{desc.name}.{fd.name} is not listed"
