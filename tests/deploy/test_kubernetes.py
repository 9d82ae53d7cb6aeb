"""deploy/kubernetes: every overlay renders with `kubectl kustomize`, and every object it renders loads into the
official `kubernetes` client's models with no field the models do not know (the client itself ignores unknown
fields, which is how a typo like `readinesProbe` ships; this loader refuses them). Then what the issue promises:
Secrets referenced and never inlined, the probes, resources, a PodDisruptionBudget and a NetworkPolicy that select
the pods, a grace period above the drain, the seccomp profile file instead of Unconfined, one replica on a
volume for SQLite and several for PostgreSQL. kubectl renders offline (no cluster)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import models

from tests.test_container import DRAIN_SECONDS  # checked against the settings there

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.parent.name for p in (KUBE / "overlays").glob("*/kustomization.yaml"))
PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object, "datetime": str,
              "date": str, "bytes": str}


class UnknownField(AssertionError):
    pass


def strict(data: Any, kind: str, where: str) -> Any:
    """`data` as the client's model `kind` (`V1Deployment`, `List[V1Container]`, `Dict[str, str]`), refusing any
    key the model does not declare, and letting the model refuse what it requires and is missing."""
    if kind.startswith(("List[", "list[")):
        assert isinstance(data, list), f"{where}: a list was expected"
        return [strict(item, kind[5:-1], f"{where}[{i}]") for i, item in enumerate(data)]
    if kind.startswith(("Dict[", "dict(")):
        assert isinstance(data, dict), f"{where}: a mapping was expected"
        inner = kind[5:-1].split(", ", 1)[1]
        return {k: strict(v, inner, f"{where}.{k}") for k, v in data.items()}
    if kind in PRIMITIVES:
        assert isinstance(data, PRIMITIVES[kind]), f"{where}: {kind} expected, got {data!r}"
        return data
    cls = getattr(models, kind)
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    assert isinstance(data, dict), f"{where}: a {kind} mapping was expected"
    unknown = sorted(set(data) - set(by_json))
    if unknown:
        raise UnknownField(f"{where}: {kind} has no field {', '.join(unknown)}")
    values = {by_json[k]: strict(v, cls.openapi_types[by_json[k]], f"{where}.{k}") for k, v in data.items()}
    return cls(**values)


def model_name(obj: dict[str, Any]) -> str:
    version = obj["apiVersion"].split("/")[-1]
    return f"{version.capitalize()}{obj['kind']}"


@cache
def rendered(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed: the manifests cannot be rendered (.ci/run says how to get it)")
    ran = subprocess.run([kubectl, "kustomize", str(KUBE / "overlays" / overlay)], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    return [d for d in yaml.safe_load_all(ran.stdout) if d]


def objects(overlay: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendered(overlay) if o["kind"] == kind]


def deployment(overlay: str) -> dict[str, Any]:
    [found] = objects(overlay, "Deployment")
    return found


def test_there_are_the_two_overlays():
    assert OVERLAYS == ["postgres", "sqlite"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_loads_into_the_client_models_without_unknown_fields(overlay: str):
    kinds = set()
    for obj in rendered(overlay):
        loaded = strict(obj, model_name(obj), f"{overlay}/{obj['kind']}/{obj['metadata']['name']}")
        assert loaded.metadata.name
        kinds.add(obj["kind"])
    assert {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap", "ServiceAccount"} <= kinds


def test_the_loader_refuses_a_misspelt_field():
    obj = json.loads(json.dumps(deployment("sqlite")))
    obj["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = obj["spec"]["template"]["spec"][
        "containers"][0].pop("readinessProbe")
    with pytest.raises(UnknownField, match="V1Container has no field readinesProbe"):
        strict(obj, "V1Deployment", "deployment")
    with pytest.raises(UnknownField, match="V1SecurityContext has no field privilegd"):
        strict({"privilegd": True}, "V1SecurityContext", "ctx")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_are_referenced_never_inlined(overlay: str):
    assert objects(overlay, "Secret") == []
    text = yaml.safe_dump_all(rendered(overlay))
    assert not re.search(r"(?i)(xoxb-|xapp-|sk-[a-z0-9]|password=|token=)", text)
    pod = deployment(overlay)["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert {"secretRef": {"name": "yokebot-secrets"}} in container["envFrom"]
    for config in objects(overlay, "ConfigMap"):  # settings that are not secret only
        assert not any(k in config["data"] for k in ("OPENAI_API_KEY", "SLACK_BOT_TOKEN", "PGPASSWORD"))
        url = config["data"]["YOKEBOT_DATABASE_URL"]
        assert "@" not in url or ":" not in url.split("//", 1)[1].split("@")[0]  # no password in the URL


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_resources_grace_period_and_the_sandbox_security_context(overlay: str):
    pod = deployment(overlay)["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]
    assert pod["terminationGracePeriodSeconds"] > DRAIN_SECONDS
    seccomp = pod["securityContext"]["seccompProfile"]
    assert seccomp["type"] == "Localhost"  # the shipped profile, not Unconfined
    assert seccomp["localhostProfile"] == "profiles/yokebot-bwrap.json"
    assert (ROOT / "deploy" / "seccomp" / Path(seccomp["localhostProfile"]).name).is_file()
    assert "Unconfined" not in json.dumps(c["securityContext"].get("seccompProfile", {}))
    ctx = c["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}
    assert not ctx.get("privileged") and ctx["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert ctx["procMount"] == "Unmasked" and pod["hostUsers"] is False  # Unmasked only inside a user namespace


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_budget_the_policy_and_the_service_select_the_pods(overlay: str):
    labels = deployment(overlay)["spec"]["template"]["metadata"]["labels"]
    assert deployment(overlay)["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [pdb] = objects(overlay, "PodDisruptionBudget")
    [policy] = objects(overlay, "NetworkPolicy")
    [service] = objects(overlay, "Service")
    for selector in (pdb["spec"]["selector"]["matchLabels"], policy["spec"]["podSelector"]["matchLabels"],
                     service["spec"]["selector"]):
        assert selector and selector.items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert [p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]] == [8080]


def test_sqlite_is_one_replica_on_a_volume_replaced_not_rolled():
    d = deployment("sqlite")
    assert d["spec"]["replicas"] == 1 and d["spec"]["strategy"] == {"type": "Recreate"}
    [pvc] = objects("sqlite", "PersistentVolumeClaim")
    pod = d["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    [c] = pod["containers"]
    data = next(m for m in c["volumeMounts"] if m["mountPath"] == "/data")
    assert volumes[data["name"]]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    [config] = objects("sqlite", "ConfigMap")
    assert config["data"]["YOKEBOT_DATABASE_URL"] == "sqlite+aiosqlite:////data/yokebot.db"


def test_postgres_is_several_replicas_with_the_password_from_a_secret():
    d = deployment("postgres")
    assert d["spec"]["replicas"] >= 2
    [c] = d["spec"]["template"]["spec"]["containers"]
    password = next(e for e in c["env"] if e["name"] == "PGPASSWORD")
    assert password["valueFrom"]["secretKeyRef"]["name"] == "yokebot-postgres"
    [config] = objects("postgres", "ConfigMap")
    url = config["data"]["YOKEBOT_DATABASE_URL"]
    assert url.startswith("postgresql+asyncpg://") and ":" not in url.split("//", 1)[1].split("@")[0]
    [policy] = objects("postgres", "NetworkPolicy")
    assert 5432 in [p["port"] for r in policy["spec"]["egress"] for p in r.get("ports", [])]
