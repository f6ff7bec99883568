"""deploy/: the Kubernetes manifests hang together (the Deployment's pods are what the Service and
the InferencePool select, probes and ports name the server's real port and its open /health route,
the pods run as the image's non-root user) and each manifest is valid against its published schema: the
Deployment and Service against Kubernetes' own OpenAPI-derived JSON schemas (kubernetes-validate's
offline copy, strict: unknown fields are errors, as `kubectl apply --validate=strict`), the
InferencePool against the Gateway API Inference Extension's CRD (its openAPIV3Schema at release
v1.6.0, committed as tests/fixtures/k8s/, checked with jsonschema with unknown fields refused the
same way). Each schema check is also shown to fail on a broken copy of the manifest. Not a
cluster: admission-time CEL rules (x-kubernetes-validations) are not evaluated."""
import copy
import os
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")
POOL_CRD = os.path.join(ROOT, "tests", "fixtures", "k8s", "inference.networking.k8s.io_inferencepools.v1.6.0.yaml")
K8S_VERSION = "1.37"  # the newest schemas kubernetes-validate 1.37.0 ships


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return yaml.safe_load(f)


def test_manifests_select_the_same_pods_on_the_served_port():
    dep, svc, pool = load("deployment.yaml"), load("service.yaml"), load("inferencepool.yaml")
    assert (dep["apiVersion"], dep["kind"]) == ("apps/v1", "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    assert (pool["apiVersion"], pool["kind"]) == ("inference.networking.k8s.io/v1", "InferencePool")
    spec = pool["spec"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert 1 <= len(spec["targetPorts"]) <= 8 and spec["endpointPickerRef"]["name"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert [p["number"] for p in spec["targetPorts"]] == [ports["http"]]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
    # The image's entrypoint listens on 8000; the events go where the args say.
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as f:
        docker = f.read()
    assert '"--port", "8000"' in docker and ports["http"] == 8000
    args = c["args"]
    assert args[args.index("--kv-events-endpoint") + 1] == f"tcp://*:{ports['kv-events']}"
    assert args[args.index("--kv-events-replay-endpoint") + 1] == f"tcp://*:{ports['kv-replay']}"
    topic = args[args.index("--kv-events-topic") + 1]
    name = args[args.index("--served-model-name") + 1]
    assert topic == f"kv@$(POD_IP):{ports['http']}@{name}"
    assert any(e["name"] == "POD_IP" for e in c["env"])


def test_pods_run_as_the_images_non_root_user_with_writable_cache_only():
    dep = load("deployment.yaml")
    pod = dep["spec"]["template"]["spec"]
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as f:
        docker = f.read()
    uid = int(re.search(r"^USER (\d+)$", docker, re.M).group(1))
    assert uid != 0 and pod["securityContext"]["runAsUser"] == uid and pod["securityContext"]["runAsNonRoot"]
    (c,) = pod["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    assert "/var/cache/rapid-mlx" in mounts and not mounts["/var/cache/rapid-mlx"].get("readOnly")
    assert "--cache-dir\", \"/var/cache/rapid-mlx/kv" in docker


# --- schemas -------------------------------------------------------------------------------------

def strict(schema):
    """An OpenAPI v3 structural schema with unknown fields refused (the API server prunes or, with
    strict field validation, rejects them): objects that list properties and say nothing of
    additionalProperties get additionalProperties: false, recursively."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def pool_validator():
    with open(POOL_CRD) as f:
        crd = yaml.safe_load(f)
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == "InferencePool"
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    assert v1["served"] and crd["spec"]["group"] == "inference.networking.k8s.io"
    schema = strict(v1["schema"]["openAPIV3Schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def k8s_errors(doc):
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return None
    except kubernetes_validate.ValidationError as e:
        return str(e).splitlines()[0]


def pool_errors(doc):
    return [e.message for e in pool_validator().iter_errors(doc)]


@pytest.mark.parametrize("name", ["deployment.yaml", "service.yaml"])
def test_core_manifests_match_kubernetes_schemas(name):
    assert k8s_errors(load(name)) is None


def test_inferencepool_matches_the_published_crd():
    pool = load("inferencepool.yaml")
    assert (pool["apiVersion"], pool["kind"]) == ("inference.networking.k8s.io/v1", "InferencePool")
    assert pool_errors(pool) == []


def broken(doc, path, value=None, drop=False, rename=None):
    """A copy of `doc` with the field at `path` set to `value`, dropped, or renamed."""
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    if drop:
        del node[path[-1]]
    elif rename:
        node[rename] = node.pop(path[-1])
    else:
        node[path[-1]] = value
    return out


CONTAINER = ["spec", "template", "spec", "containers", 0]


@pytest.mark.parametrize("name,path,kw,why", [
    ("deployment.yaml", ["spec", "replicas"], {"value": "two"}, "is not of type"),
    ("deployment.yaml", CONTAINER + ["readinessProbe", "httpGet"], {"rename": "httpGett"}, "httpGett"),
    ("deployment.yaml", CONTAINER + ["name"], {"drop": True}, "'name' is a required property"),
    ("service.yaml", ["spec", "ports", 0, "port"], {"value": "8000"}, "is not of type"),
    ("service.yaml", ["spec", "ports", 0, "protocl"], {"value": "TCP"}, "protocl"),
])
def test_core_schema_check_fails_on_a_broken_manifest(name, path, kw, why):
    err = k8s_errors(broken(load(name), path, **kw))
    assert err is not None and why in err, err


@pytest.mark.parametrize("path,kw,why", [
    (["spec", "targetPorts"], {"value": []}, "should be non-empty"),
    (["spec", "targetPorts", 0, "number"], {"value": 70000}, "is greater than the maximum"),
    (["spec", "selector"], {"drop": True}, "'selector' is a required property"),
    (["spec", "endpointPickerRef", "failureMode"], {"value": "Sometimes"}, "is not one of"),
    (["spec", "selector", "matchLabel"], {"value": {"app": "x"}}, "matchLabel"),
])
def test_pool_schema_check_fails_on_a_broken_manifest(path, kw, why):
    errs = pool_errors(broken(load("inferencepool.yaml"), path, **kw))
    assert any(why in e for e in errs), errs
