"""The web client's page on a local stack (``make bench ONLY=web``): what a first visit
transfers (HTML, JS and CSS, raw and gzipped; goal: JS + CSS gzipped at most 250 KB), and the time
from opening a game's URL in a fresh browser (empty cache) to its table drawn, and from pressing
"Play now with bots" on the home page to the table.

Real parts: the stack ``make run`` starts (nats-server, the services, court-web serving web/dist)
on free ports, and Debian's Chromium driven by Playwright. Figures are printed side by side with the
goal; nothing here passes or fails on them.
"""

from __future__ import annotations

import gzip
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from court_cli.stack import LocalStack, StackConfig
from playwright.sync_api import sync_playwright

from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, DESKTOP, DIST

GOAL_KB = 250.0
RUNS = 10


def _first_visit(browser: Any, url: str) -> dict[str, int]:
    """Bytes of every response of a cold first visit: raw, gzipped (level 9), and on the wire."""
    ctx = browser.new_context(viewport=DESKTOP)
    page = ctx.new_page()
    sizes: dict[str, int] = {"html": 0, "js": 0, "css": 0, "html_gz": 0, "js_gz": 0, "css_gz": 0}
    wire = {"bytes": 0}
    cdp = ctx.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.on(
        "Network.loadingFinished",
        lambda ev: wire.__setitem__("bytes", wire["bytes"] + int(ev["encodedDataLength"])),
    )

    def got(resp: Any) -> None:
        kind = resp.headers.get("content-type", "")
        key = "js" if "javascript" in kind else "css" if "css" in kind else "html" if "html" in kind else ""
        if key:
            body = resp.body()
            sizes[key] += len(body)
            sizes[key + "_gz"] += len(gzip.compress(body, 9))

    page.on("response", got)
    page.goto(url + "/#/account")
    page.wait_for_selector("#guest")
    page.wait_for_load_state("networkidle")
    sizes["wire"] = wire["bytes"]
    ctx.close()
    return sizes


def _times_to_table(browser: Any, url: str) -> tuple[list[float], list[float]]:
    """Seconds to the first drawn table: opening #/game/<id> cold (a new context each run, signed
    in through localStorage), and pressing "Play now with bots" on the home page."""
    cold: list[float] = []
    start: list[float] = []
    setup = browser.new_context(viewport=DESKTOP)
    page = setup.new_page()
    page.goto(url + "/#/account")
    page.click("#guest")
    page.wait_for_selector("#me")
    session = page.evaluate("localStorage.getItem('court.session')")
    for _ in range(RUNS):
        page.goto(url + "/#/")
        page.wait_for_selector("#play-bots")
        page.select_option("form.new-game select[name=game]", "hearts")
        t0 = time.perf_counter()
        page.click("#play-bots")
        page.wait_for_selector("#table .table", timeout=60_000)
        start.append(time.perf_counter() - t0)
        game = page.url.rsplit("/", 1)[1]
        ctx = browser.new_context(viewport=DESKTOP)
        ctx.add_init_script(f"localStorage.setItem('court.session', {session!r})")
        fresh = ctx.new_page()
        t0 = time.perf_counter()
        fresh.goto(f"{url}/#/game/{game}")
        fresh.wait_for_selector("#table .table", timeout=60_000)
        cold.append(time.perf_counter() - t0)
        ctx.close()
    setup.close()
    return cold, start


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"median {statistics.median(xs) * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms   (n={len(xs)})"


def main() -> None:
    if not CHROMIUM.exists() or not DIST.exists():
        raise SystemExit(f"needs {CHROMIUM} and {DIST} (make setup builds the web client)")
    with tempfile.TemporaryDirectory(prefix="court-bench-web-") as tmp:
        config = StackConfig.from_env({}, free_ports=True, state_dir=Path(tmp) / "state")
        stack = LocalStack(config)
        stack.start()
        try:
            url = f"http://{config.address('web')}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                try:
                    s = _first_visit(browser, url)
                    cold, start = _times_to_table(browser, url)
                finally:
                    browser.close()
        finally:
            stack.stop()
    kb = lambda n: n / 1024  # noqa: E731
    assets_gz = kb(s["js_gz"] + s["css_gz"])
    print("web page, first visit (cold cache):")
    print(f"  html {kb(s['html']):7.1f} KB raw {kb(s['html_gz']):6.1f} KB gzipped")
    print(f"  js   {kb(s['js']):7.1f} KB raw {kb(s['js_gz']):6.1f} KB gzipped")
    print(f"  css  {kb(s['css']):7.1f} KB raw {kb(s['css_gz']):6.1f} KB gzipped")
    print(
        f"  js+css gzipped {assets_gz:6.1f} KB   goal {GOAL_KB:.0f} KB   ratio {assets_gz / GOAL_KB:.2f} of the goal"
    )
    print(f"  on the wire (as served, every response) {kb(s['wire']):6.1f} KB")
    print("time to the first drawn table (local stack, Hearts with bots):")
    print(f"  open #/game/<id> in a fresh browser context   {_ms(cold)}")
    print(f"  press 'Play now with bots' on the home page   {_ms(start)}")


if __name__ == "__main__":
    main()
