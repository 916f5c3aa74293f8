"""End-to-end fixtures for the web client (web/, docs/web-client.md): the real local stack (the
launcher ``make run`` uses: nats-server, the services and ``court-web`` serving ``web/dist`` as
processes on free ports), and Debian's Chromium driven by Playwright, one browser context per person.

Nothing is installed or skipped here: without ``/usr/bin/chromium`` (``.ci/run`` installs the Debian
package) or the built client (``make setup`` builds ``web/dist``) every test fails and says so.
Screenshots of each game's table go to ``tests/web/artifacts/`` (gitignored).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from court_cli.stack import LocalStack, StackConfig
from court_client import RulesClient
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
DIST = ROOT / "web" / "dist" / "index.html"
ARTIFACTS = ROOT / "tests" / "web" / "artifacts"
BIN = Path(sys.executable).parent
STACK_TIMEOUT = 180.0
# Chromium as this machine runs it (headless, no sandbox as root, no calls to Google's hosts).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
T = TypeVar("T")


def require_browser_and_client() -> None:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the web tests drive Debian's Chromium "
            "(.ci/run installs it; here: apt-get install -y chromium)"
        )
    if not DIST.exists():
        pytest.fail(f"{DIST} is missing: build the web client with `make setup` (npm ci and the bundle)")


@dataclass
class WebStack:
    stack: LocalStack
    url: str

    def address(self, service: str) -> str:
        return self.stack.config.address(service)

    def token(self, sub: str, role: str) -> str:
        """A token signed with the stack's development key (as ``make token``)."""
        env = {**os.environ, "COURT_ENV": "dev", "COURT_STATE_DIR": str(self.stack.state_dir)}
        out = subprocess.run(
            [str(BIN / "court-token"), "--sub", sub, "--role", role, "--ttl", "3600"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        return out.stdout.strip()


@pytest.fixture(scope="module")
def web_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebStack]:
    require_browser_and_client()
    config = StackConfig.from_env({}, free_ports=True, state_dir=tmp_path_factory.mktemp("web") / "state")
    # One browser address plays many moves fast here: the per-address call rate is the edge's own
    # test's business (tests/web/test_edge*.py), not this one's.
    config.extra_env.update({"COURT_WEB_RATE": "1000", "COURT_WEB_BURST": "2000"})
    stack = LocalStack(config)
    stack.start(timeout=STACK_TIMEOUT)
    try:
        yield WebStack(stack, f"http://{config.address('web')}")
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_browser_and_client()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Body:
    url: str
    data: bytes


@dataclass(eq=False)
class Person:
    """One person in a browser context of their own (their own localStorage: their own session)."""

    context: BrowserContext
    page: Page
    url: str
    errors: list[str] = field(default_factory=list)
    bodies: list[Body] = field(default_factory=list)
    streams: dict[str, str] = field(default_factory=dict)  # CDP request id -> url, streamed into bodies

    # ------------------------------------------------------------------ navigation and sign-in

    def goto(self, hash_: str = "#/") -> None:
        self.page.goto(f"{self.url}/{hash_}")

    def guest(self) -> None:
        self.goto("#/account")
        self.page.click("#guest")
        self.signed_in()

    def signed_in(self) -> None:
        """Until the page shows the account's name; a refusal the page shows instead fails the test."""
        self.page.wait_for_selector("#me, #toast .error", timeout=60_000)
        error = self.page.locator("#toast .error")
        assert not error.count(), f"signing in failed: {error.inner_text()}"

    def register(self, name: str, password: str = "correct horse battery") -> None:
        self._sign("Register", name, password)

    def sign_in(self, name: str, password: str = "correct horse battery") -> None:
        self._sign("Sign in", name, password)

    def _sign(self, button: str, name: str, password: str) -> None:
        self.goto("#/account")
        self.page.fill("input[name=name]", name)
        self.page.fill("input[name=password]", password)
        self.page.get_by_role("button", name=button).click()
        self.signed_in()

    def session(self) -> dict[str, Any]:
        raw = self.page.evaluate("localStorage.getItem('court.session')")
        assert raw, "no session in localStorage"
        out: dict[str, Any] = json.loads(raw)
        return out

    # ------------------------------------------------------------------ games

    def new_game_form(
        self,
        game: str,
        options: dict[str, str] | None = None,
        *,
        turn_seconds: int = 0,
        time_bank: int = 60,
        online: bool = False,
        ante: int = 0,
        private: bool = False,
        level: str = "random",
    ) -> None:
        self.goto("#/")
        form = self.page.locator("form.new-game")
        form.locator("select[name=game]").select_option(game)
        for name, value in (options or {}).items():
            field_ = form.locator(f"[name={name}]")
            if field_.evaluate("e => e.tagName") == "SELECT":
                field_.select_option(value)
            else:
                field_.fill(value)
        form.locator("select[name=level]").select_option(level)
        form.locator("input[name=turn_seconds]").fill(str(turn_seconds))
        form.locator("input[name=time_bank_seconds]").fill(str(time_bank))
        form.locator("input[name=ante]").fill(str(ante))
        form.locator("input[name=online]").set_checked(online)
        form.locator("input[name=private]").set_checked(private)

    def new_local_game(self, game: str, options: dict[str, str] | None = None, **kw: Any) -> str:
        """A game against bots started from the home page; its id, from the URL the page went to."""
        self.new_game_form(game, options, **kw)
        self.page.click("#play-bots")
        return self.wait_table()

    def wait_table(self) -> str:
        self.page.wait_for_url("**/#/game/*", timeout=60_000)
        self.page.wait_for_selector("#table .table", timeout=60_000)
        return self.page.url.rsplit("/", 1)[1]

    def finished(self) -> bool:
        return "Game over" in self.page.locator("#turn").inner_text()

    def step(self, timeout: float = 90.0) -> bool:
        """Wait until the game is over (False) or a move is offered, and press the first (True)."""
        self.page.wait_for_selector(
            "#turn:has-text('Game over'), [data-move]:not([disabled])", timeout=timeout * 1000
        )
        if self.finished():
            return False
        try:
            self.page.locator("[data-move]:not([disabled])").first.click(timeout=5000)
        except PlaywrightTimeout:
            pass  # the table was drawn again under the pointer (a bot moved): look again
        return True

    def play_to_end(self, shots: str | None = None, limit: int = 2000) -> int:
        """Press the first legal move until the game is over; the number of presses. With ``shots``,
        the table is saved at desktop and phone width after the third move."""
        moves = 0
        while self.step():
            moves += 1
            if shots and moves == 3:
                self.screenshots(shots)
            assert moves < limit, f"{limit} moves and the game is not over"
        return moves

    def screenshots(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        size = self.page.viewport_size or DESKTOP
        for tag, vp in (("desktop", DESKTOP), ("375", PHONE)):
            self.page.set_viewport_size(vp)
            self.page.wait_for_selector("#table .table")
            self.page.screenshot(path=str(ARTIFACTS / f"{name}-{tag}.png"), full_page=True)
        self.page.set_viewport_size(size)

    # ------------------------------------------------------------------ what the page received

    def record_bodies(self) -> None:
        """Keep every response body the page receives: whole ones as they end, and the streaming
        ones (WatchGame) chunk by chunk as they arrive, through the DevTools protocol."""
        cdp = self.context.new_cdp_session(self.page)
        cdp.send("Network.enable")

        def finished(resp: Any) -> None:
            try:
                self.bodies.append(Body(resp.url, resp.body()))
            except Exception:  # noqa: BLE001 - a stream cut by navigation has no whole body
                pass

        def headers(ev: dict[str, Any]) -> None:
            if "WatchGame" in ev["response"]["url"]:
                self.streams[ev["requestId"]] = ev["response"]["url"]

        def chunk(ev: dict[str, Any]) -> None:
            if ev.get("data") and ev["requestId"] in self.streams:
                self.bodies.append(Body(self.streams[ev["requestId"]], base64.b64decode(ev["data"])))

        self.page.on("response", finished)
        cdp.on("Network.responseReceived", headers)
        cdp.on("Network.dataReceived", chunk)
        self._cdp = cdp
        self._streamed: set[str] = set()

    def stream_open_bodies(self) -> None:
        """Ask the browser for the bytes of every open stream so far, and every later chunk."""
        for rid, url in list(self.streams.items()):
            if rid in self._streamed:
                continue
            self._streamed.add(rid)
            try:
                got = self._cdp.send("Network.streamResourceContent", {"requestId": rid})
            except Exception:  # noqa: BLE001 - the stream ended meanwhile: its body came whole
                continue
            self.bodies.append(Body(url, base64.b64decode(got.get("bufferedData", ""))))


@pytest.fixture
def people(browser: Browser, web_stack: WebStack) -> Iterator[Callable[..., Person]]:
    made: list[Person] = []

    def make(viewport: dict[str, int] | None = None) -> Person:
        ctx = browser.new_context(viewport=viewport or DESKTOP)
        page = ctx.new_page()
        person = Person(ctx, page, web_stack.url)
        page.on("pageerror", lambda e: person.errors.append(str(e)))
        made.append(person)
        return person

    yield make
    for p in made:
        p.context.close()
    errors = [e for p in made for e in p.errors]
    assert not errors, f"script errors in the page: {errors}"


def run(call: Callable[[], Awaitable[T]]) -> T:
    """Async calls to the services (made by ``call``) from a sync test: in a thread and an event
    loop of their own (Playwright's sync API holds this thread's loop)."""

    async def main() -> T:
        return await call()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout:.0f}s")
        time.sleep(0.2)  # polling a service: no event to wait on from here


def final_view(web_stack: WebStack, token: str, game_id: str) -> Any:
    """The game's view as its player's token reads it over gRPC (not through the edge)."""

    async def call() -> Any:
        async with RulesClient(web_stack.address("rules"), token) as rules:
            return await rules.get_view(game_id)

    return run(call)
