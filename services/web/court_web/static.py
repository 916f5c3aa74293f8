"""The web client's built files (``COURT_WEB_STATIC``, default ``web/dist``), a single-page app.

* a file under the folder is served as it is (GET and HEAD; anything else is 405), gzipped when the
  client accepts it and it is text (compressed once, kept in memory by path and modification time);
* hashed assets (``assets/name-<hash>.js`` as vite and esbuild name them) are cached for a year
  (``immutable``); everything else, ``index.html`` first, is revalidated on every load
  (``no-cache``), so a new deployment is picked up at once;
* an unknown path that is not a file (``/game/g123``, a route of the app) gets ``index.html``;
* without the folder, ``/`` answers 503 saying how to build the web client.

Paths are resolved inside the folder: ``..``, symbolic links out of it and hidden files are 404.
"""

from __future__ import annotations

import gzip
import mimetypes
import re
from pathlib import Path
from typing import Any

from .http import Receive, Scope, Send, send_simple

HASHED = re.compile(r"[.-][A-Za-z0-9_-]{8,}\.(?:js|css|mjs|woff2?|svg|png|webp|map)$")
TEXT = ("text/", "application/javascript", "application/json", "image/svg+xml", "application/manifest")
MAX_CACHED = 8 * 1024 * 1024  # bytes of a file compressed and kept in memory at most


class StaticFiles:
    def __init__(self, root: Path):
        self.root = root.resolve() if root.exists() else root
        self._gz: dict[Path, tuple[float, bytes]] = {}

    def missing_message(self) -> bytes:
        return (
            f"court-web is running, but the web client is not built: {self.root} does not exist.\n\n"
            "Build it with `make setup` (or `npm ci --prefix web && npm run build --prefix web`), or point "
            "COURT_WEB_STATIC at a folder holding the built client (index.html and its assets).\n"
            "The Connect API is served all the same (docs/web.md).\n"
        ).encode()

    def _resolve(self, path: str) -> Path | None:
        rel = path.lstrip("/")
        if any(part.startswith(".") for part in rel.split("/") if part):
            return None
        candidate = (self.root / rel).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            return None
        return candidate if candidate.is_file() else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await send_simple(send, 405, b"method not allowed\n", headers=[(b"allow", b"GET, HEAD")])
            return
        head = method == "HEAD"
        if not self.root.is_dir():
            await send_simple(send, 503, self.missing_message(), head=head)
            return
        path: str = scope["path"]
        if "\x00" in path:
            await send_simple(send, 404, b"not found\n", head=head)
            return
        file = self._resolve(path) if path != "/" else None
        if file is None:
            last = path.rsplit("/", 1)[-1]
            if "." in last and path != "/":  # a missing file (an old asset): not the app
                await send_simple(send, 404, b"not found\n", head=head)
                return
            file = self.root / "index.html"
            if not file.is_file():
                await send_simple(send, 503, self.missing_message(), head=head)
                return
        await self._send_file(scope, send, file, head)

    async def _send_file(self, scope: Scope, send: Send, file: Path, head: bool) -> None:
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype == "application/javascript":
            ctype += "; charset=utf-8"
        cache = (
            b"public, max-age=31536000, immutable"
            if HASHED.search(file.name) and file.name != "index.html"
            else b"no-cache"
        )
        accept = b""
        for k, v in scope.get("headers", ()):
            if k == b"accept-encoding":
                accept = bytes(v)
        stat = file.stat()
        body: bytes
        headers = [(b"cache-control", cache), (b"vary", b"Accept-Encoding")]
        if b"gzip" in accept and ctype.startswith(TEXT) and stat.st_size <= MAX_CACHED:
            hit = self._gz.get(file)
            if hit is None or hit[0] != stat.st_mtime:
                hit = (stat.st_mtime, gzip.compress(file.read_bytes(), 9, mtime=0))
                self._gz[file] = hit
            body = hit[1]
            headers.append((b"content-encoding", b"gzip"))
        else:
            body = file.read_bytes()
        await _send(send, 200, ctype.encode(), body, headers, head)


async def _send(
    send: Send, status: int, ctype: bytes, body: bytes, headers: list[tuple[bytes, bytes]], head: bool
) -> Any:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})
