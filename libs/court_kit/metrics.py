"""Prometheus metrics: the shared gRPC series and the HTTP endpoint.

``COURT_METRICS_LISTEN`` (rules 127.0.0.1:9101 ...; empty disables) serves
``/metrics`` in the Prometheus text format from a background thread.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .settings import listen_host_port

SECONDS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class MethodStats:
    """One gRPC method's series. Updated on the event loop's thread without a lock (plain ints: a
    prometheus_client child takes a lock per update, several microseconds a call on the hot path);
    the scrape thread reads them, a value at most one call old."""

    __slots__ = ("codes", "in_flight", "buckets", "sum", "count")

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.in_flight = 0
        self.buckets = [0] * (len(SECONDS_BUCKETS) + 1)  # the last: above every bound
        self.sum = 0.0
        self.count = 0

    def done(self, code: str, seconds: float) -> None:
        """A call ended with ``code`` after ``seconds``."""
        self.codes[code] = self.codes.get(code, 0) + 1
        self.buckets[bisect.bisect_left(SECONDS_BUCKETS, seconds)] += 1
        self.sum += seconds
        self.count += 1


class GrpcCalls(Collector):
    """The shared gRPC series of every service, by method: ``court_grpc_requests_total{method,code}``,
    ``court_grpc_in_flight{method}`` (a draining replica counts down) and
    ``court_grpc_request_seconds{method}`` (handling time, a histogram)."""

    def __init__(self, prefix: str = "court_grpc", what: str = "gRPC calls") -> None:
        self._methods: dict[str, MethodStats] = {}
        self.prefix, self.what = prefix, what  # court-web: court_web, Connect and gRPC-Web calls

    def method(self, name: str) -> MethodStats:
        stats = self._methods.get(name)
        if stats is None:
            stats = self._methods[name] = MethodStats()
        return stats

    def collect(self) -> Iterator[Metric]:
        p, what = self.prefix, self.what
        requests = CounterMetricFamily(
            f"{p}_requests", f"{what} handled, by method and status code", labels=["method", "code"]
        )
        in_flight = GaugeMetricFamily(
            f"{p}_in_flight",
            f"{what} being handled right now, by method (a draining replica counts down)",
            labels=["method"],
        )
        seconds = HistogramMetricFamily(
            f"{p}_request_seconds", f"{what}: handling time, by method", labels=["method"]
        )
        for name, st in list(self._methods.items()):  # copied: the event loop may add a method meanwhile
            for code, n in list(st.codes.items()):
                requests.add_metric([name, code], n)
            in_flight.add_metric([name], st.in_flight)
            counts, total = list(st.buckets), st.sum
            cumulative, buckets = 0, []
            for bound, n in zip(SECONDS_BUCKETS, counts, strict=False):
                cumulative += n
                buckets.append((repr(float(bound)), cumulative))
            buckets.append(("+Inf", cumulative + counts[-1]))
            seconds.add_metric([name], buckets, total)
        yield requests
        yield in_flight
        yield seconds


GRPC = GrpcCalls()
REGISTRY.register(GRPC)


@dataclass
class MetricsServer:
    port: int
    _httpd: Any

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def start_metrics_server(listen: str) -> MetricsServer | None:
    """Serve /metrics on ``listen`` (HOST:PORT, port 0 picks one); ``""`` disables it."""
    if not listen:
        return None
    addr = listen_host_port(listen)
    host, _, port = addr.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    httpd, _thread = start_http_server(int(port), addr="0.0.0.0" if host == "::" else host)
    return MetricsServer(port=httpd.server_port, _httpd=httpd)
