"""deploy/: the Kubernetes manifests hang together (the Deployment's pods are what the Service and
the InferencePool select, probes and ports name the server's real port and its open /health route,
the pods run as the image's non-root user) and the InferencePool carries the fields the
inference.networking.k8s.io/v1 API requires. Consistency checks, not a cluster: no Kubernetes API
server or CRD schema is available offline here."""
import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")


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
