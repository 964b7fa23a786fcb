"""Values more than one test module uses: digests, images and targets, the local stack's and moto's
names, paths. Media types are ``tagpin.ports.registry``'s (``OCI_INDEX``, ...): import them from
there, never type them again."""

from __future__ import annotations

from pathlib import Path

from tagpin.domain.annotations import LABEL_FOLLOW

# -- digests: any well-formed sha256 digest, told apart by their one repeated hex digit ----------------
D0 = "sha256:" + "0" * 64
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
D3 = "sha256:" + "3" * 64

# -- followed tags and targets ---------------------------------------------------------------------------
NGINX = "docker.io/library/nginx:1.27"
NGINX_LATEST = "docker.io/library/nginx:latest"
WEB = "127.0.0.1:5000/demo/web:stable"  # the demo's image, in the demo's registry
WEB_TARGET = "dev/demo/Deployment/web/app"  # WEB's target: cluster dev, namespace demo, container app
FOLLOW = {LABEL_FOLLOW: "true"}  # the label that makes the reconciler follow a workload

# -- webhooks -------------------------------------------------------------------------------------------
WEBHOOK_TOKEN = "local-dev-webhook-token"  # the samples' token (events/webhooks/secret.json)
DISTRIBUTION_V1 = "application/vnd.docker.distribution.events.v1+json"  # a registry's notification
DISTRIBUTION_V2 = "application/vnd.docker.distribution.events.v2+json"

# -- AWS (moto in process; the template's names) ---------------------------------------------------------
REGION = "us-east-1"
STATE_TABLE = "tagpin-state"
IDEMPOTENCY_TABLE = "tagpin-idempotency"
QUEUE_NAME = "tagpin-changes.fifo"
DLQ_NAME = "tagpin-changes-dlq.fifo"

# -- paths ----------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]  # the repository
EVENTS = ROOT / "events"  # the sample events (``sam local invoke -e``)
