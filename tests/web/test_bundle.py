"""The built web client (web/dist, made by ``make setup``): one index.html naming one hashed script
and one hashed style sheet that exist, nothing loaded from another host, and JS + CSS within the
250 KB gzipped budget of issue 30 (the figures themselves: ``make bench ONLY=web``)."""

from __future__ import annotations

import gzip
import re

from tests.web.conftest import DIST, require_browser_and_client

BUDGET = 250 * 1024


def test_the_page_names_its_hashed_assets_loads_nothing_from_elsewhere_and_fits_the_budget() -> None:
    require_browser_and_client()
    html = DIST.read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assets = [r for r in refs if r.startswith("/assets/")]
    assert sorted(a.rsplit(".", 1)[1] for a in assets) == ["css", "js"], refs
    for ref in refs:
        assert not re.match(r"(https?:)?//", ref), f"index.html loads {ref} from another host"
    total = 0
    for ref in assets:
        assert re.fullmatch(r"/assets/\w+-[A-Z0-9]{8}\.(js|css)", ref), ref  # hashed: cached for good
        body = (DIST.parent / ref.lstrip("/")).read_bytes()
        total += len(gzip.compress(body, 9))
        if ref.endswith(".css"):
            assert not re.search(rb"url\((?!data:)", body), "the style sheet loads an image or font"
            assert b"@import" not in body
    assert total <= BUDGET, f"JS + CSS gzipped {total / 1024:.1f} KB, over the {BUDGET // 1024} KB budget"
