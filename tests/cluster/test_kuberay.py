"""The KubeRay manifests: valid RayJob / RayCronJob resources (unknown fields are errors, as
`kubectl apply` makes them), pod templates valid Kubernetes, the image built with the pins, and
entrypoints that are commands distcheck accepts."""

from __future__ import annotations

import copy
import os
import pathlib
import re
import shlex

import jsonschema
import kubernetes_validate
import pytest
import yaml

from distcheck.cli import parser
from tests.cluster import kuberay_schema

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "cluster" / "kuberay"
KUBERNETES = "1.33"  # the Kubernetes version whose PodTemplateSpec the pod templates are checked against


def manifests() -> dict[str, dict]:
    found = {}
    for path in sorted(KUBERAY.glob("*.yaml")):
        for k, document in enumerate(yaml.safe_load_all(path.read_text())):
            found[f"{path.name}#{k}"] = document
    return found


def job_spec(manifest: dict) -> dict:
    return manifest["spec"]["jobTemplate"] if manifest["kind"] == "RayCronJob" else manifest["spec"]


def pod_templates(manifest: dict) -> list[dict]:
    cluster = job_spec(manifest)["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"], *(group["template"] for group in cluster["workerGroupSpecs"])]


def problems(manifest: dict) -> list[str]:
    """Why ``manifest`` would be refused: KubeRay's fields, then each pod template's."""
    schema = kuberay_schema.SCHEMAS.get(manifest.get("kind"))
    if schema is None:
        return [f"not a RayJob or RayCronJob: {manifest.get('kind')!r}"]
    found = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(manifest)
    ]
    if found:
        return found
    for template in pod_templates(manifest):
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
        try:
            kubernetes_validate.validate(pod, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as e:
            found.append(f"pod template: {e.message} at {'.'.join(map(str, e.absolute_path))}")
    return found


MANIFESTS = manifests()


def test_there_are_a_nightly_cron_job_and_an_on_demand_job():
    kinds = sorted(m["kind"] for m in MANIFESTS.values())
    assert kinds == ["RayCronJob", "RayJob"]


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_manifest_is_valid(name):
    assert problems(MANIFESTS[name]) == []


MISTAKES = {
    "an unknown field of the job": lambda m: job_spec(m).update(shutdownAfterJobFinish=True),
    "an unknown field of a worker group": lambda m: job_spec(m)["rayClusterSpec"]["workerGroupSpecs"][0].update(
        replica=3
    ),
    "a number where KubeRay takes a string": lambda m: job_spec(m)["rayClusterSpec"]["headGroupSpec"][
        "rayStartParams"
    ].update({"num-cpus": 0}),
    "an unknown field of a container": lambda m: pod_templates(m)[1]["spec"]["containers"][0].update(
        imagePullPolcy="Always"
    ),
    "a wrong type in a pod": lambda m: pod_templates(m)[0]["spec"]["containers"][0].update(ports=8265),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_a_mistake_in_a_manifest_is_found(name, mistake):
    broken = copy.deepcopy(MANIFESTS[name])
    MISTAKES[mistake](broken)
    assert problems(broken)


def crd_schema(node: dict) -> dict:
    """A CRD's openAPIV3Schema as a JSON Schema with unknown fields refused, as the API server
    prunes and `kubectl apply` rejects them (where x-kubernetes-preserve-unknown-fields is absent)."""
    node = dict(node)
    node.pop("description", None)
    if node.pop("x-kubernetes-int-or-string", False):
        node = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    if "properties" in node:
        node["properties"] = {k: crd_schema(v) for k, v in node["properties"].items()}
        if not node.pop("x-kubernetes-preserve-unknown-fields", False):
            node["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = crd_schema(node["additionalProperties"])
    if "items" in node:
        node["items"] = crd_schema(node["items"])
    return {k: v for k, v in node.items() if not k.startswith("x-kubernetes")}


@pytest.mark.skipif(not os.environ.get("KUBERAY_CRDS"), reason="$KUBERAY_CRDS names no folder of KubeRay's CRDs")
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_manifest_is_valid_against_kuberays_own_crds(name):
    """Against KubeRay's CRD files (ray-operator/config/crd/bases of a KubeRay checkout, named by
    $KUBERAY_CRDS): its whole schema, pod templates included; and a mistake is found there too."""
    manifest = MANIFESTS[name]
    crd = yaml.safe_load(
        (pathlib.Path(os.environ["KUBERAY_CRDS"]) / f"ray.io_{manifest['kind'].lower()}s.yaml").read_text()
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == manifest["apiVersion"].split("/")[1]]
    validator = jsonschema.Draft7Validator(crd_schema(version["schema"]["openAPIV3Schema"]))
    assert [e.message for e in validator.iter_errors(manifest)] == []
    for mistake in MISTAKES.values():
        broken = copy.deepcopy(manifest)
        mistake(broken)
        assert list(validator.iter_errors(broken))


def ray_pin() -> str:
    return re.search(r"^ray==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M).group(1)


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_node_runs_the_image_of_the_pins(name):
    spec = job_spec(MANIFESTS[name])
    images = {c["image"] for t in pod_templates(MANIFESTS[name]) for c in t["spec"]["containers"]}
    assert len(images) == 1  # the same libraries on every node: bitwise identical results
    assert spec["rayClusterSpec"]["rayVersion"] == ray_pin()
    groups = {g["groupName"]: g for g in spec["rayClusterSpec"]["workerGroupSpecs"]}
    gpu = groups["gpu"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert set(groups) == {"cpu", "gpu"} and gpu["nvidia.com/gpu"] == "1"


def test_the_image_installs_distcheck_with_the_pins_and_the_store_and_job_extras():
    dockerfile = (KUBERAY / "Dockerfile").read_text()
    install = next(line for line in dockerfile.splitlines() if "pip install" in line)
    assert "-c constraints.txt" in install
    extras = set(re.search(r"\.\[([a-z,]+)\]", install).group(1).split(","))
    assert {"torch", "cloud", "jobs"} <= extras
    python = re.search(r"^FROM python:(\d+\.\d+)", dockerfile, re.M).group(1)
    assert python in (ROOT / "constraints.txt").read_text() or python == "3.11"  # the Python of the pins


def distcheck_command(entrypoint: str) -> list[str]:
    words = shlex.split(entrypoint)
    assert words[0] == "distcheck"
    return words[1:]


def test_the_on_demand_job_runs_a_command_distcheck_accepts():
    (job,) = [m for m in MANIFESTS.values() if m["kind"] == "RayJob"]
    args = parser().parse_args(distcheck_command(job["spec"]["entrypoint"]))
    assert args.command == "run" and args.out.startswith("s3://") and args.device == "cuda"
    assert all(path.startswith("s3://") for path in (args.json, args.junit, args.html))
