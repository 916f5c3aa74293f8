"""Token-bucket rate limits keyed by a string (a peer address, an account name), bounded in memory.

``RateLimiter(rate, burst)`` lets each key through ``burst`` times at once and then ``rate`` times a
second; ``take(key)`` returns 0 when allowed, else the seconds until the next attempt would be.
The least recently used keys are forgotten beyond ``max_keys`` (a forgotten key starts full, which
only ever errs on the side of letting a caller through), so a flood of distinct keys costs bounded
memory. ``peer_host`` turns a gRPC peer (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``) into its host.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ):
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self.rate, self.burst, self.max_keys, self._clock = rate, float(burst), max_keys, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def take(self, key: str) -> float:
        now = self._clock()
        tokens, at = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait


def peer_host(peer: str) -> str:
    """The host part of a gRPC peer string (the port changes per connection; the host does not)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1 : rest.find("]")] if "]" in rest else rest
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0]
    return peer  # unix:..., or something unexpected: the whole string is the key
