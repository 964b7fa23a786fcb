"""``tagpin doctor``'s GitOps check (docs/gitops.md): each followed workload that Argo CD or Flux
owns, named with its owner and what is configured for it.

The workloads are read as the consumer reads them (the cluster's credentials, through the same
``ClusterConnector``), and their owner decided as the consumer decides it (the tracking annotation
or label, ``gitops.argocd_instance_label``; Flux's toolkit labels). For each owned one:

- ``gitops.write_back`` configures it: ok, where it is written (repository, branch, files, mode);
  warn when the Git host has no ``credentials_secret`` (its pushes would be refused), when the
  stack has no write-back queue (``GitWriteBack=enabled``), or in pull-request mode without the
  host's API;
- ``gitops.patch_live`` names it: ok, patched live by choice (the GitOps tool may revert it);
- neither: warn, nothing moves it (the consumer refuses to patch it): what to configure.

A workload that cannot be read is left to the cluster check, which says why.

The workloads are read side by side (``READERS`` at once): one GET per followed target, so a
stack following a few hundred workloads answers in the time of a few round trips, not hundreds.
Each cluster is asked first for one of its targets: a cluster that is down is asked once, not
once per target, and its other targets are skipped.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tagpin_cli.doctor_seat import Result, Seat, Status

WRITEBACK_QUEUE = "tagpin-writeback.fifo"  # the local stack's (tagpin_local.stack_git)
CONFIGURE = (
    "add a gitops.write_back entry for {image} (repository, branch, files: kustomize, helm or manifest) "
    "whose targets include {target}, or name {target} in gitops.patch_live (docs/gitops.md)"
)
READERS = 8  # workloads read at once (threads; the official client's pool is shared per cluster)
DOWN = object()  # a read that found the cluster unreachable or refused


def check_gitops(seat: Seat) -> list[Result]:
    settings = seat.config.gitops
    pairs = [(followed, target) for followed in seat.followed for target in followed.targets]
    workloads = _read_all(seat, [target for _, target in pairs])
    results: list[Result] = []
    for (followed, target), workload in zip(pairs, workloads, strict=True):
        if workload is None:
            continue
        owner = settings.owner_of(workload.labels, workload.annotations)
        if owner is not None:
            workload_name = f"{target.kind.value} {target.namespace}/{target.name}"
            where = f"{workload_name} is managed by {owner} ({owner.evidence})"
            results.append(_owned(seat, settings, followed.image, target.id, where))
    if not results:
        read = sum(1 for w in workloads if w is not None)
        return [
            Result(
                "gitops", "-", Status.OK, f"none of the {read} workload(s) read is managed by Argo CD or Flux"
            )
        ]
    return results


def _read_all(seat: Seat, targets: list[Any]) -> list[Any]:
    """Each target's workload, in order; None for one that is gone or whose cluster is down."""
    from tagpin import wiring
    from tagpin.ports.workloads import NotFound

    connector = wiring.cluster_connector()

    def read(target: Any) -> Any:
        try:
            return connector(target.cluster).get(target.namespace, target.kind, target.name)
        except NotFound:  # tagpin status says "gone"
            return None
        except Exception:  # unreachable, or refused: the cluster check says why
            return DOWN

    by_cluster: dict[str, list[int]] = {}
    for index, target in enumerate(targets):
        by_cluster.setdefault(target.cluster, []).append(index)
    found: dict[int, Future[Any]] = {}
    with ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="doctor-gitops") as pool:
        first = {cluster: pool.submit(read, targets[at[0]]) for cluster, at in by_cluster.items()}
        for cluster, at in by_cluster.items():
            if first[cluster].result() is DOWN:
                continue  # its other targets are not asked
            found[at[0]] = first[cluster]
            found.update((index, pool.submit(read, targets[index])) for index in at[1:])
        outcomes = {index: future.result() for index, future in found.items()}
    return [None if outcomes.get(i) is DOWN else outcomes.get(i) for i in range(len(targets))]


def _owned(seat: Seat, settings: Any, image: str, target: str, where: str) -> Result:
    entries = settings.for_target(image, target)
    if not entries and settings.live_allowed(target):
        return Result("gitops", target, Status.OK, f"{where}: patched live (gitops.patch_live names it)")
    if not entries:
        return Result(
            "gitops",
            target,
            Status.WARN,
            f"{where}: not patched live, and nothing writes it back through Git: it does not move",
            CONFIGURE.format(image=image, target=target),
        )
    (entry,) = entries[:1]
    files = ", ".join(f"{f.path} ({f.kind.value})" for f in entry.files)
    detail = f"{where}: moved through Git, {entry.repository}#{entry.branch} {files}, mode {entry.mode.value}"
    host = settings.hosts.get(entry.host)
    if host is None or host.credentials_secret is None:
        return Result(
            "gitops",
            target,
            Status.WARN,
            detail + f"; no token for {entry.host}: its pushes would be refused",
            "put a token in the secret store (tagpin/git/...) and name it in "
            f"gitops.hosts.{entry.host}.credentials_secret (docs/gitops.md)",
        )
    if not _write_back_enabled(seat):
        return Result(
            "gitops",
            target,
            Status.WARN,
            detail + "; but the stack has no write-back queue: the consumer refuses it",
            "deploy the stack with GitWriteBack=enabled (docs/deploying.md)",
        )
    return Result("gitops", target, Status.OK, detail + f", token {host.credentials_secret}")


def _write_back_enabled(seat: Seat) -> bool:
    """The stack was deployed with ``GitWriteBack=enabled``; locally, its write-back queue exists."""
    if not seat.local:
        return seat.stack.parameters.get("GitWriteBack") == "enabled"
    from tagpin import wiring

    try:
        wiring.aws("sqs").get_queue_url(QueueName=WRITEBACK_QUEUE)
    except Exception:  # no such queue
        return False
    return True
