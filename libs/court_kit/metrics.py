"""Prometheus metrics: the shared gRPC series and the HTTP endpoint.

``COURT_METRICS_LISTEN`` (rules 127.0.0.1:9101 ...; empty disables) serves
``/metrics`` in the Prometheus text format from a background thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from .settings import listen_host_port

GRPC_REQUESTS = Counter(
    "court_grpc_requests_total", "gRPC calls handled, by method and status code", ["method", "code"]
)
GRPC_IN_FLIGHT = Gauge(
    "court_grpc_in_flight", "gRPC calls being handled right now, by method (a draining replica counts down)",
    ["method"],
)
GRPC_SECONDS = Histogram(
    "court_grpc_request_seconds",
    "gRPC call handling time, by method",
    ["method"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)


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
