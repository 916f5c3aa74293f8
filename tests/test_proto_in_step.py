"""The checked-in libs/court_proto/ is exactly what `make proto` builds from protos/."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED_IN = ROOT / "libs" / "court_proto"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    out = tmp_path / "court_proto"
    subprocess.run(
        [sys.executable, str(ROOT / "protos" / "generate.py"), str(out)], check=True, capture_output=True
    )
    fresh, kept = _files(out), _files(CHECKED_IN)
    assert fresh == kept, (
        f"libs/court_proto is out of step with protos/: missing {sorted(fresh - kept)}, "
        f"stale {sorted(kept - fresh)}; run `make proto`"
    )
    differ = [f for f in sorted(fresh) if not filecmp.cmp(out / f, CHECKED_IN / f, shallow=False)]
    assert not differ, f"generated files differ from protos/: {differ}; run `make proto`"


def test_generated_package_imports_with_stubs() -> None:
    from court_proto.court.bot.v1 import bot_pb2_grpc
    from court_proto.court.events.v1 import events_pb2
    from court_proto.court.rules.v1 import actions_pb2, rules_pb2, rules_pb2_grpc

    assert rules_pb2.CreateGameRequest.DESCRIPTOR.full_name == "court.rules.v1.CreateGameRequest"
    assert hasattr(rules_pb2_grpc, "RulesServiceStub") and hasattr(bot_pb2_grpc, "BotServiceServicer")
    # classes carry the importable module name (pickling, error messages)
    assert actions_pb2.Action.__module__ == "court_proto.court.rules.v1.actions_pb2"
    ev = events_pb2.GameEvent(event_id="g-1-0", visibility=events_pb2.VISIBILITY_FULL)
    assert events_pb2.GameEvent.FromString(ev.SerializeToString()) == ev
    for stub in ("rules/v1/rules_pb2.pyi", "rules/v1/rules_pb2_grpc.pyi", "events/v1/events_pb2.pyi"):
        assert (CHECKED_IN / "court" / stub).is_file()
