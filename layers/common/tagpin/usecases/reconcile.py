"""Reconcile: follow what is labelled in the clusters, and heal whatever is not at its tag's digest.

A scheduled run does, for every configured cluster at once:

1. **Discover.** One label-selected, paged LIST per workload kind (``tagpin.dev/follow=true``) in
   all namespaces; never a GET per workload. Every container (init containers too) whose image
   has a tag is a target of that tag, unless ``tagpin.dev/containers`` narrows the choice or
   ``tagpin.dev/paused`` asks tagpin to leave the workload alone. Workloads listed explicitly in
   the configuration but not labelled are read with one GET each.
2. **Index.** The followed tag -> targets index in the state table is brought in line with what
   was found: new targets added, targets whose workload was deleted, unlabelled or paused removed
   (and recorded as ``removed`` on the target, before their entries go: a run that dies between
   leaves the entries for the next run, whose removal writes nothing twice). A cluster that
   cannot be listed (unreachable, not ready, credentials rejected, RBAC) is skipped and recorded
   with its error; its entries are kept until it answers again, and the other clusters proceed.
   Argo Rollouts are a custom resource: a cluster without them (404), or whose RBAC predates them
   (403), is noted, and its other kinds proceed (Rollout entries are kept while they cannot be
   listed).
3. **Compare.** What each target runs (``tagpin.usecases.running``): the digest in its image
   field when pinned, else the ``imageID`` its pods report (one paged LIST of pods per namespace
   that has such a target). Unknown (no pods yet, a CronJob between runs, pods of several
   digests) counts as behind.
4. **Heal.** Each distinct tag is resolved once (the ``Detector``: the registry, the state's
   conditional write, the level check against the targets' state), then every target that does not
   run the tag's digest is enqueued in one change per tag, marked with the run so that the consumer
   applies it even when it believes it did so already (a manual edit, a rollback, a lost message).
   People first (``tagpin.usecases.drift``): a held target stays where it is, and a target tagpin
   had settled at the tag's digest that runs another one is read again before it counts as a
   person's change (then it is held, not patched back): a listing older than tagpin's own last
   write never does.
5. **Put back.** A hold written while tagpin patched, whose consumer stopped before it put the
   image back, gets the image the workload ran (``tagpin.usecases.interrupted``).

The cluster side is a port (``tagpin.ports.workloads.Inventory``); ``tagpin.adapters.kubernetes``
implements it with the official client. This module never imports ``kubernetes``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tagpin.domain.annotations import FOLLOW_SELECTOR
from tagpin.domain.channels import FollowedKey, repository_of
from tagpin.domain.config import FollowedImage, Kind, TagpinConfig, Target
from tagpin.domain.messages import Change, Trigger
from tagpin.domain.moves import Move
from tagpin.domain.outcomes import TagOutcome
from tagpin.domain.refs import Digest
from tagpin.ports import workloads as ports
from tagpin.ports.notify import Notifier
from tagpin.ports.queues import ChangeQueue
from tagpin.ports.state import IndexEntry, State, TagState
from tagpin.ports.workloads import Forbidden, Inventory, NotFound, Pod, Workload, WorkloadError, Workloads
from tagpin.usecases.audit import Audit
from tagpin.usecases.detect import Detector
from tagpin.usecases.discover import discovered_targets
from tagpin.usecases.drift import PeopleFirst
from tagpin.usecases.followed import merge
from tagpin.usecases.interrupted import InterruptedPatches
from tagpin.usecases.running import Observed, running_digest

if TYPE_CHECKING:
    from tagpin.usecases.channels import Channels

logger = logging.getLogger(__name__)

MAX_LISTED = 50  # target ids listed per category in the run's report


class Cluster(Inventory, Workloads, Protocol):
    """A cluster as the reconciler sees it: listed, and written only to put back an image a hold
    asked for (``tagpin.usecases.interrupted``)."""


@dataclass
class ClusterScan:
    name: str
    error: str | None = None
    workloads: int = 0
    discovered: list[tuple[FollowedKey, Target]] = field(default_factory=list)
    observed: list[Observed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unlisted: set[Kind] = field(default_factory=set)  # custom kinds RBAC does not let it list
    unreadable: set[tuple[str, str, str]] = field(default_factory=set)  # namespace, kind, name


@dataclass
class ReconcileReport:
    run_id: str
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    images: int = 0
    targets: int = 0
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    behind: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # put on hold in this run: changed outside tagpin
    put_back: list[str] = field(default_factory=list)  # held while tagpin patched: the image put back
    enqueued: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "clusters": self.clusters,
            "clusters_skipped": sum(not c["ok"] for c in self.clusters.values()),
            "images": self.images,
            "targets": self.targets,
            "added": len(self.added),
            "removed": len(self.removed),
            "behind": len(self.behind),
            "held": len(self.held),
            "put_back": self.put_back[:MAX_LISTED],
            "enqueued": self.enqueued,
            "errors": self.errors[:MAX_LISTED],
            "removed_targets": self.removed[:MAX_LISTED],
            "behind_targets": self.behind[:MAX_LISTED],
            "notes": self.notes[:MAX_LISTED],
        }


class Reconciler:
    def __init__(
        self,
        *,
        config: Callable[[], TagpinConfig],
        state: State,
        clusters: Callable[[str], Cluster],
        detector: Detector,
        queue: ChangeQueue,
        clock: Callable[[], int],
        concurrency: int = 8,
        resolve: bool = True,
        channels: Channels | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        """``resolve``: ask the registries for every followed tag's digest on each run. Needed when
        nothing else does (polling off: a lost notification would otherwise go unnoticed); with
        the poller on, the digests it stored are used and only tags it has not seen yet are asked
        for, which saves a registry request and a state write per tag and run."""
        self._resolve = resolve
        self._config = config
        self._state = state
        self._clusters = clusters
        self._detector = detector
        self._queue = queue
        self._clock = clock
        self._concurrency = concurrency
        self._channels = channels
        self._people = PeopleFirst(state, clusters, Audit(state, notifier), clock, lambda: config().gitops)
        self._interrupted = InterruptedPatches(state, clusters, clock)

    def run(self, run_id: str | None = None) -> ReconcileReport:
        report = ReconcileReport(run_id or str(uuid.uuid4()))
        config = self._config()
        names = sorted(config.clusters)
        with ThreadPoolExecutor(max_workers=max(1, min(self._concurrency, len(names) or 1))) as pool:
            scans = list(pool.map(lambda n: self._scan(n, config), names))
        index = self._state.index.entries()
        self._update_index(config, scans, index, report)
        followed = self._followed(config, scans, index)
        observed: dict[FollowedKey, list[Observed]] = {}
        for scan in scans:
            report.clusters[scan.name] = {"ok": scan.error is None, "workloads": scan.workloads}
            if scan.error is not None:
                report.clusters[scan.name]["error"] = scan.error
                report.errors.append(f"{scan.name}: {scan.error}")
            report.notes.extend(scan.notes)
            for seen in scan.observed:
                observed.setdefault(seen.image, []).append(seen)
        report.images = len(followed)
        report.targets = sum(len(f.targets) for f in followed.values())
        # What the registries answered last (eventually consistent: a heal towards a digest that
        # was just replaced is refused by the consumer as superseded, never applied backwards).
        # The settled digests first (a few items for all tags): a tag whose targets all run its
        # settled digest needs nothing; only the others have their own item read.
        todo = list(followed.values())
        known: dict[FollowedKey, TagState] = {}
        if not self._resolve:
            settled = self._state.digests.all()
            todo = [
                f
                for f in todo
                if f.image not in settled
                or any(o.running != settled[f.image] for o in observed.get(f.image, []))
            ]
            known = self._state.tags.get_many([f.image for f in todo])
        with ThreadPoolExecutor(max_workers=max(1, min(self._concurrency, len(todo) or 1))) as pool:
            outcomes = list(
                pool.map(lambda f: self._heal(f, observed.get(f.image, []), report, known.get(f.image)), todo)
            )
        report.enqueued = sum(outcomes)
        # 5. A hold written while tagpin patched: the image the workload ran is put back.
        report.put_back = self._interrupted.settle()
        logger.info("reconciled", extra=report.summary())
        return report

    # -- 1. discover and observe, one cluster --------------------------------------------------
    def _scan(self, name: str, config: TagpinConfig) -> ClusterScan:
        scan = ClusterScan(name)
        try:
            self._scan_cluster(scan, config)
        except WorkloadError as exc:  # unreachable, not ready, 401, 403, 5xx: skip this cluster
            scan.error = f"{type(exc).__name__}: {exc}"
            logger.warning("cluster skipped", extra={"cluster": name, "error": scan.error})
        except Exception as exc:  # one broken cluster must not stop the others
            scan.error = f"{type(exc).__name__}: {exc}"
            logger.exception("cluster skipped", extra={"cluster": name})
        now = self._clock()
        self._state.clusters.record(name, now, error=scan.error, workloads=scan.workloads)
        return scan

    def _scan_cluster(self, scan: ClusterScan, config: TagpinConfig) -> None:
        inventory = self._clusters(scan.name)
        listed: dict[tuple[str, Kind, str], Workload] = {}
        for kind in Kind:
            try:
                for workload in inventory.workloads(kind, FOLLOW_SELECTOR):
                    if workload.unreadable is not None:  # skipped; its targets kept as they are
                        where = f"{kind.value} {workload.namespace}/{workload.name}"
                        scan.notes.append(f"{scan.name}: {where} skipped: {workload.unreadable}")
                        scan.unreadable.add((workload.namespace, kind.value, workload.name))
                        continue
                    listed[(workload.namespace, kind, workload.name)] = workload
            except NotFound:  # the API does not serve this kind (batch/v1 CronJob before 1.21, no Argo)
                scan.notes.append(f"{scan.name}: {kind.value} is not served")
            except Forbidden as exc:
                if not kind.custom:
                    raise
                # RBAC applied before tagpin knew this kind (docs/rbac.yaml): the others proceed
                scan.unlisted.add(kind)
                scan.notes.append(f"{scan.name}: {kind.value} not listed: {exc}")
        scan.workloads = len(listed)
        for workload in listed.values():
            found, notes = discovered_targets(scan.name, workload)
            scan.discovered.extend(found)
            scan.notes.extend(notes)
        pods_by_namespace: dict[str, list[Pod]] = {}

        def pods_of(namespace: str) -> Callable[[], list[Pod]]:
            def load() -> list[Pod]:
                if namespace not in pods_by_namespace:
                    pods_by_namespace[namespace] = list(inventory.pods(namespace))
                return pods_by_namespace[namespace]

            return load

        targets: dict[str, tuple[FollowedKey, Target]] = {t.id: (image, t) for image, t in scan.discovered}
        for followed in config.images:
            for target in followed.targets:
                if target.cluster == scan.name:
                    targets.setdefault(target.id, (followed.image, target))
        for image, target in targets.values():
            key = (target.namespace, target.kind, target.name)
            if (target.namespace, target.kind.value, target.name) in scan.unreadable:
                continue
            current = listed.get(key)
            if current is None:  # configured explicitly and not labelled: one GET
                try:
                    current = inventory.get(target.namespace, target.kind, target.name)
                except (NotFound, ports.Unreadable) as exc:  # gone, or nested too deep to read
                    why = "configured, but the workload does not exist" if isinstance(exc, NotFound) else None
                    scan.notes.append(f"{target.id}: {why or f'skipped: {exc}'}")
                    continue
                listed[key] = current
            if current.paused or current.held:  # left alone, as the consumer leaves them
                continue
            running, how = running_digest(
                current, target.container, repository_of(image), pods_of(target.namespace)
            )
            scan.observed.append(Observed(target, image, running, how))

    # -- 2. the index --------------------------------------------------------------------------
    def _update_index(
        self, config: TagpinConfig, scans: list[ClusterScan], index: list[IndexEntry], report: ReconcileReport
    ) -> None:
        now = self._clock()
        listed = {s.name for s in scans if s.error is None}
        wanted = {
            (image, target.id): IndexEntry.of(image, target, now)
            for scan in scans
            if scan.error is None
            for image, target in scan.discovered
        }
        have = {(e.image, e.target_id): e for e in index}
        unlisted = {(s.name, kind.value) for s in scans for kind in s.unlisted}
        unreadable = {(s.name, *workload) for s in scans for workload in s.unreadable}
        # Entries of a cluster (or a kind, or a workload) that could not be listed (or read) stay as
        # they are; a cluster no longer in the configuration loses its entries.
        stale = [
            e
            for key, e in have.items()
            if key not in wanted
            and (e.cluster in listed or e.cluster not in config.clusters)
            and (e.cluster, e.kind) not in unlisted
            and (e.cluster, e.namespace, e.kind, e.name) not in unreadable
        ]
        new = [e for key, e in wanted.items() if key not in have]
        still = {target_id for _, target_id in wanted} | {
            e.target_id for e in index if e.cluster not in listed and e.cluster in config.clusters
        }
        report.added = sorted({e.target_id for e in new} - {e.target_id for e in index})
        # The targets removed first, then the index: a run that dies in between leaves the stale
        # entries, so the next run removes again (a removal is written once per entry: ``since``).
        for entry in stale:
            if entry.target_id in still:
                continue  # the same container now runs another followed tag: not removed
            if entry.cluster not in config.clusters:
                reason = f"cluster {entry.cluster!r} is no longer configured"
            else:
                reason = "no longer listed: workload deleted, unlabelled or paused, or container gone"
            self._state.targets.remove(entry.target_id, now, reason, since=entry.seen_at)
            report.removed.append(entry.target_id)
            logger.info("target removed", extra={"target": entry.target_id, "reason": reason})
        self._state.index.update(new, stale)

    @staticmethod
    def _followed(
        config: TagpinConfig, scans: list[ClusterScan], index: list[IndexEntry]
    ) -> dict[FollowedKey, FollowedImage]:
        """Configuration + what was discovered now + the kept entries of skipped clusters."""
        skipped = {s.name for s in scans if s.error is not None}
        entries: dict[FollowedKey, list[IndexEntry]] = {}
        for entry in index:
            if entry.cluster in skipped:
                entries.setdefault(entry.image, []).append(entry)
        for scan in scans:
            for image, t in scan.discovered if scan.error is None else []:
                entries.setdefault(image, []).append(IndexEntry.of(image, t))
        known = set(config.clusters)
        merged: dict[FollowedKey, FollowedImage] = {}
        for image in dict.fromkeys([*config.followed, *entries]):
            followed = merge(image, config.followed.get(image), entries.get(image, []), known)
            if followed is not None:
                merged[image] = followed
        return merged

    # -- 3 + 4. compare and heal, one tag ------------------------------------------------------
    def _heal(
        self, followed: FollowedImage, observed: list[Observed], report: ReconcileReport, tag: TagState | None
    ) -> int:
        run = report.run_id
        if tag is None:  # resolving on every run, or a tag not seen yet
            ref = None
            if followed.policy is not None:  # a version channel: resolved at its head
                head = self._channels.heads([followed]).get(followed.image) if self._channels else None
                if head is None or head.ref is None:
                    report.errors.append(f"{followed.image}: {head.error if head else 'cannot list tags'}")
                    return 0
                ref = head.ref
            result = self._detector.detect(followed, trigger=Trigger.RECONCILE, correlation_id=run, ref=ref)
            if result.outcome is TagOutcome.ERROR:
                report.errors.append(f"{followed.image}: {result.error}")
                return 0
            tag = self._state.tags.get(followed.image)
        if tag is None or not tag.digest:
            return 0
        if tag.blocked:  # its rollout failed and was rolled back: never re-applied by healing
            logger.info("tag's digest is marked bad; not healed", extra={"image": followed.image})
            return 0
        behind, held = self._people.behind(
            [o for o in observed if o.running != tag.digest], followed, tag, report.run_id
        )
        report.held.extend(held)
        if not behind:
            return 0
        for seen in behind:
            report.behind.append(seen.target.id)
            logger.info(
                "target behind",
                extra={
                    "target": seen.target.id,
                    "running": seen.running,
                    "how": seen.how,
                    "digest": tag.digest,
                },
            )
        self._queue.send(
            Change(
                move=Move(
                    image=followed.image,
                    digest=Digest(tag.digest),
                    observed_at=tag.observed_at,
                    changed_at=tag.changed_at,
                    trigger=Trigger.RECONCILE,
                    correlation_id=run,
                    tag=tag.version if followed.policy is not None else None,
                ),
                reconcile_run=run,
            )
        )
        return 1
