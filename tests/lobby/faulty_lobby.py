"""A lobby replica in its own process that SIGKILLs itself at one step of the start saga.

    python -m tests.lobby.faulty_lobby after_antes|after_game|none

Settings come from the environment as for ``court-lobby``; it prints ``PORT <n>`` once it listens.
The kill is real: no handler runs, no transaction is finished, no lease is released.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from court_kit.settings import Settings
from court_lobby.app import LobbyApp
from court_lobby.saga import Faults
from court_lobby.store import LobbyInfo


class DieAt(Faults):
    def __init__(self, step: str):
        self.step = step

    def _maybe_die(self, step: str) -> None:
        if self.step == step:
            sys.stdout.write(f"DYING {step}\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    async def after_antes(self, info: LobbyInfo) -> None:
        self._maybe_die("after_antes")

    async def after_game(self, info: LobbyInfo) -> None:
        self._maybe_die("after_game")


async def main(step: str) -> None:
    app = await LobbyApp.start(Settings.load("lobby"), faults=DieAt(step))
    sys.stdout.write(f"PORT {app.port}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
