"""`tagpin local`: the local stack run until interrupted; `tagpin local push REPO:TAG`: a new small
image pushed to the running local stack's registry."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from tagpin_cli import environment
from tagpin_cli.environment import Stack
from tagpin_cli.output import EXIT_OK, emit, error

RECONCILE_INTERVAL = 15.0  # seconds between reconciler runs


def options(args: argparse.Namespace) -> Any:
    """The local stack `tagpin local` runs: the poller and the reconciler on a schedule (0 = off)."""
    from tagpin_local.stack import StackOptions

    return StackOptions(
        notifications=not args.no_notifications,
        poll_interval=None if args.poll_interval <= 0 else args.poll_interval,
        reconcile_interval=None if args.reconcile_interval <= 0 else args.reconcile_interval,
        log_level=args.log_level,
        secret_store=args.secret_store,
    )


def run(args: argparse.Namespace, _stack: Stack | None) -> int:
    """Print the endpoints as one JSON line on stdout, without the secrets: the console's sign-in
    token and the kubeconfig are in the endpoints file only (readable by its owner)."""
    from tagpin_local.endpoints import LocalEndpoints
    from tagpin_local.stack import LocalStack

    path: Path = args.endpoints or args.endpoints_file or environment.LOCAL_FILE
    if args.action == "push":
        return push(args, path)
    if args.image is not None:
        return error("REPO:TAG is for `tagpin local push`")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalStack(options(args)) as stack:
        if not args.empty:
            from tagpin_local.kube.manifests import deployment

            assert stack.registry is not None
            stack.kube.create(
                deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
            )
        # a person's kubeconfig: the cluster's admin, straight to the API server (tagpin's own, bound
        # to docs/rbac.yaml and through the front, is in the cluster secret)
        admin = stack.kube.kubeconfig("local", identity=stack.kube.admin)
        endpoints = LocalEndpoints.model_validate(stack.endpoints() | {"kubeconfig": json.dumps(admin)})
        environment.write_local(endpoints, path)
        print(json.dumps(endpoints.public()), flush=True)
        print(
            f"console: {endpoints.console_url} (sign in with the console_token in {path}; "
            f"the kubeconfig is there too)",
            file=sys.stderr,
            flush=True,
        )
        # Wake up now and then: the kernel may deliver SIGTERM to any of the stack's threads, and
        # Python runs the handler only once the main thread runs again; a plain ``stop.wait()``
        # could then sleep forever.
        while not stop.wait(0.5):
            pass
    path.unlink(missing_ok=True)
    return EXIT_OK


def push(args: argparse.Namespace, path: Path) -> int:
    """A new small image (random layer) under REPO:TAG in the local stack's registry: the tag moves."""
    from tagpin_local.oci import push_image

    if not args.image or ":" not in args.image.rsplit("/", 1)[-1]:
        return error("give the image as REPO:TAG, e.g. `tagpin local push demo/web:stable`")
    registry_url = environment.read_local(path).registry_url
    host = registry_url.split("://", 1)[-1]
    name = args.image.removeprefix(host + "/")
    repository, tag = name.rsplit(":", 1)
    digest = push_image(registry_url, repository, tag)
    result = {"image": f"{host}/{repository}:{tag}", "digest": digest}
    emit(args, result, lambda d: print(f"pushed {d['image']} -> {d['digest']}"))
    return EXIT_OK
