"""A kopf operator for the peer benchmark (bench/peers): the example Greeting's reconcile.

Greeting (example.com/v1) spec.message -> ConfigMap `<name>-greeting` (data.message, label,
owner reference); status phase=Ready, observedGeneration and a Ready condition.

CRDFN_KOPF_PROFILE picks the settings: "default" (kopf as installed) or "tuned" (no k8s Events
posted, a shorter batching window, progress in annotations only). The settings in force are
printed on stdout as one JSON line at start-up, for the benchmark's record.
"""
import datetime
import json
import os
import sys

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import ApiException

GROUP, VERSION, PLURAL = "example.com", "v1", "greetings"
PROFILE = os.environ.get("CRDFN_KOPF_PROFILE", "default")
if PROFILE not in ("default", "tuned"):
    sys.exit(f"CRDFN_KOPF_PROFILE must be default or tuned, not {PROFILE!r}")

api: dict[str, client.CoreV1Api] = {}


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, **_):
    await config.load_kube_config(config_file=os.environ["KUBECONFIG"])
    api["core"] = client.CoreV1Api(client.ApiClient())
    if PROFILE == "tuned":
        settings.posting.enabled = False
        settings.batching.batch_window = 0.01
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage()
    record = {
        "kopf": kopf.__version__ if hasattr(kopf, "__version__") else None,
        "python": sys.version.split()[0],
        "profile": PROFILE,
        "posting.enabled": settings.posting.enabled,
        "batching.batch_window": settings.batching.batch_window,
        "batching.worker_limit": settings.batching.worker_limit,
        "batching.idle_timeout": settings.batching.idle_timeout,
        "watching.server_timeout": settings.watching.server_timeout,
        "watching.client_timeout": settings.watching.client_timeout,
        "persistence.progress_storage": type(settings.persistence.progress_storage).__name__,
        "persistence.diffbase_storage": type(settings.persistence.diffbase_storage).__name__,
        "execution.max_workers": settings.execution.max_workers,
    }
    print(json.dumps({"settings": record}), flush=True)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def reconcile(body, spec, name, namespace, meta, status, patch, **_):
    generation = meta["generation"]
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-greeting", "labels": {"example.com/greeting": name}},
        "data": {"message": spec.get("message", "")},
    }
    kopf.adopt(cm, owner=body)
    core = api["core"]
    # Patch first: after the first reconcile the ConfigMap exists, so a change costs one request.
    try:
        await core.patch_namespaced_config_map(
            cm["metadata"]["name"], namespace,
            {"metadata": {"labels": cm["metadata"]["labels"], "ownerReferences": cm["metadata"]["ownerReferences"]}, "data": cm["data"]},
            _content_type="application/merge-patch+json",
        )
    except ApiException as e:
        if e.status != 404:
            raise
        await core.create_namespaced_config_map(namespace, cm)
    previous = next((c for c in (status.get("conditions") or []) if c.get("type") == "Ready"), None)
    changed = previous is None or previous.get("status") != "True"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch.status["phase"] = "Ready"
    patch.status["observedGeneration"] = generation
    patch.status["conditions"] = [{
        "type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": now if changed else previous.get("lastTransitionTime", now),
    }]
