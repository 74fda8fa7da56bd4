"""KubeRay's ``RayJob`` and ``RayCronJob`` (``ray.io/v1``, KubeRay 1.7) as JSON Schemas, written
from KubeRay's API reference: every field of each level from the custom resource down to the
pod templates, each level closed as ``kubectl apply`` closes it (KubeRay's CRDs are structural
and do not preserve unknown fields there: an unknown field is an error). Maps whose values
KubeRay types as strings (``rayStartParams``, ``labels``, ``clusterSelector``) take strings only.
The pod templates (``template``, ``submitterPodTemplate``) are Kubernetes' ``PodTemplateSpec``:
the tests check them against Kubernetes' own schemas (kubernetes-validate, strict).
"""

from __future__ import annotations

from typing import Any

STRING, BOOLEAN, NUMBER = {"type": "string"}, {"type": "boolean"}, {"type": "number"}
INTEGER = {"type": "integer"}
OBJECT = {"type": "object"}  # a level the manifests do not use: its fields are not listed here
STRINGS = {"type": "object", "additionalProperties": STRING}
POD_TEMPLATE = {"type": "object", "properties": {"metadata": OBJECT, "spec": OBJECT}, "additionalProperties": False}


def closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


HEAD_GROUP = closed(
    {
        "enableIngress": BOOLEAN,
        "headService": OBJECT,
        "ingressOptions": OBJECT,
        "labels": STRINGS,
        "rayStartParams": STRINGS,
        "resources": STRINGS,
        "serviceType": STRING,
        "template": POD_TEMPLATE,
    },
    ("template",),
)

WORKER_GROUP = closed(
    {
        "groupName": STRING,
        "idleTimeoutSeconds": INTEGER,
        "labels": STRINGS,
        "maxReplicas": INTEGER,
        "minReplicas": INTEGER,
        "numOfHosts": INTEGER,
        "priority": INTEGER,
        "rayStartParams": STRINGS,
        "replicas": INTEGER,
        "resources": STRINGS,
        "scaleStrategy": OBJECT,
        "suspend": BOOLEAN,
        "template": POD_TEMPLATE,
    },
    ("groupName", "maxReplicas", "minReplicas", "template"),
)

RAY_CLUSTER_SPEC = closed(
    {
        "authOptions": OBJECT,
        "autoscalerOptions": OBJECT,
        "enableInTreeAutoscaling": BOOLEAN,
        "gcsFaultToleranceOptions": OBJECT,
        "headGroupSpec": HEAD_GROUP,
        "headServiceAnnotations": STRINGS,
        "historyServerOptions": OBJECT,
        "managedBy": STRING,
        "networkPolicy": OBJECT,
        "rayVersion": STRING,
        "suspend": BOOLEAN,
        "tlsOptions": OBJECT,
        "upgradeStrategy": OBJECT,
        "workerGroupSpecs": {"type": "array", "items": WORKER_GROUP},
    }
)

RAY_JOB_SPEC = closed(
    {
        "activeDeadlineSeconds": INTEGER,
        "backoffLimit": INTEGER,
        "clusterSelector": STRINGS,
        "deletionStrategy": OBJECT,
        "entrypoint": STRING,
        "entrypointNumCpus": NUMBER,
        "entrypointNumGpus": NUMBER,
        "entrypointResources": STRING,
        "jobId": STRING,
        "managedBy": STRING,
        "metadata": STRINGS,
        "preRunningDeadlineSeconds": {"type": "integer", "minimum": 1},
        "rayClusterSpec": RAY_CLUSTER_SPEC,
        "runtimeEnvYAML": STRING,
        "shutdownAfterJobFinishes": BOOLEAN,
        "submissionMode": {"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]},
        "submitterConfig": OBJECT,
        "submitterPodTemplate": POD_TEMPLATE,
        "suspend": BOOLEAN,
        "ttlSecondsAfterFinished": INTEGER,
    }
)

RAY_CRON_JOB_SPEC = closed(
    {
        "jobTemplate": RAY_JOB_SPEC,
        "schedule": STRING,
        "suspend": BOOLEAN,
        "timeZone": {"type": "string", "minLength": 1},
    },
    ("jobTemplate", "schedule"),
)


def resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return closed(
        {"apiVersion": {"const": "ray.io/v1"}, "kind": {"const": kind}, "metadata": OBJECT, "spec": spec},
        ("apiVersion", "kind", "metadata", "spec"),
    )


SCHEMAS = {"RayJob": resource("RayJob", RAY_JOB_SPEC), "RayCronJob": resource("RayCronJob", RAY_CRON_JOB_SPEC)}
