from __future__ import annotations

import sys
from pathlib import Path

COURT = str(Path(sys.executable).parent / "court")
