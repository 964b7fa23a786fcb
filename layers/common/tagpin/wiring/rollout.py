"""The composition root's rollout side (the consumer and the reconciler): admission, the applier and
its idempotency guard, verification, promotion, approvals, notifications, signature checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tagpin import wiring
from tagpin.wiring.cache import cached
from tagpin.wiring.core import SECRET_MAX_AGE
from tagpin.wiring.detection import change_queue

if TYPE_CHECKING:
    from tagpin.adapters.notify import Notifier
    from tagpin.ports.signatures import SignatureChecker, TrustMaterial
    from tagpin.usecases.admission import Admission
    from tagpin.usecases.admission.platform import PlatformGate
    from tagpin.usecases.apply import Applier, ApplyTarget, Guard
    from tagpin.usecases.approvals import Approvals
    from tagpin.usecases.gitroute import GitRoute
    from tagpin.usecases.promote import Promoter
    from tagpin.usecases.reconcile import Reconciler
    from tagpin.usecases.verify import Verifier


@cached
def idempotency_guard() -> Guard:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

    from tagpin.domain.messages import TargetChange
    from tagpin.domain.outcomes import ApplyResult

    persistence = DynamoDBPersistenceLayer(
        table_name=wiring.setting("idempotency_table"), boto3_client=wiring.aws("dynamodb")
    )

    def guard(fn: ApplyTarget) -> ApplyTarget:
        # The key is the change's typed ``key`` (``TargetChange.key``), handed over as the data
        # powertools hashes: nothing depends on what the use case names its parameter.
        def once(key: list[Any], change: TargetChange) -> ApplyResult:
            return fn(change)

        once_only: Callable[..., ApplyResult] = idempotent_function(
            once,
            data_keyword_argument="key",
            persistence_store=persistence,
            config=wiring.idempotency_config(),
            output_serializer=PydanticSerializer(model=ApplyResult),
            # A stable prefix, not the function's module path: moving code never forgets results.
            key_prefix="tagpin.apply_target",
        )

        def guarded(change: TargetChange) -> ApplyResult:
            return once_only(key=list(change.key), change=change)

        return guarded

    return guard


@cached
def idempotency_config() -> Any:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    # One roll per key (tagpin.domain.messages.OnceKey: target, digest, the move, a reconcile
    # run's healing). A day covers SQS retries and the DLQ redrive window that matters; after that
    # the state's conditional claim and the "already current" check still hold.
    return IdempotencyConfig(expires_after_seconds=24 * 3600)


@cached
def notifier() -> Notifier:
    from tagpin.adapters.notify import Notifier

    return Notifier(
        settings=lambda: wiring.config().rollout.notifications,
        sns=wiring.aws("sns"),
        topic_arn=wiring.settings().notify_topic_arn or None,
        secret=wiring.secret_json,
    )


@cached
def promoter() -> Promoter:
    from tagpin.usecases.promote import Promoter

    return Promoter(
        state=wiring.state(),
        followed=wiring.followed,
        settings=wiring.rollout_settings,
        verifications=wiring.verification_queue(),
        changes=change_queue(),
        notifier=wiring.notifier(),
        clock=wiring.clock,
    )


@cached
def approvals() -> Approvals:
    """A person's decisions before a wave starts (the consumer asks; the CLI, console and Slack
    decide)."""
    from tagpin.usecases.approvals import Approvals

    return Approvals(
        state=wiring.state(),
        settings=wiring.rollout_settings,
        changes=change_queue(),
        verifications=wiring.verification_queue(),
        notifier=wiring.notifier(),
        clock=wiring.clock,
    )


@cached
def admission() -> Admission:
    """The gates a move passes before it starts on a target (``tagpin.usecases.admission``): the
    consumer's, and ``tagpin plan``'s (the same answer)."""
    from tagpin.usecases.admission import standard
    from tagpin.usecases.admission.signature import SignatureGate

    return standard(
        state=wiring.state(),
        settings=wiring.rollout_settings,
        gitops=lambda: wiring.config().gitops,
        platforms=wiring.platform_gate(),
        signatures=SignatureGate(wiring.signature_checker, wiring.trust_material, wiring.rollout_settings),
    )


@cached
def platform_gate() -> PlatformGate:
    """The platform gate, with what it keeps for the container's life (each cluster's nodes, each
    digest's platforms); its own factory so that warming can read the nodes ahead of a first change."""
    from tagpin.usecases.admission.platform import PlatformGate

    return PlatformGate(
        wiring.registry_client(), wiring.cluster_connector(), lambda: wiring.config().clusters, wiring.clock
    )


@cached
def console_admission() -> Admission:
    """The same gates for the console, which reads no registry and no cluster: those gates
    answer ``unknown`` there (``tagpin plan`` asks them)."""
    from tagpin.usecases.admission import GateName, Stage, Unavailable, standard

    why = "the console reads no registry (tagpin plan asks it)"
    return standard(
        state=wiring.state(),
        settings=wiring.rollout_settings,
        gitops=lambda: wiring.config().gitops,
        platforms=Unavailable(GateName.PLATFORM, Stage.TARGET, why),
        signatures=Unavailable(GateName.SIGNATURE, Stage.TARGET, why),
    )


@cached
def signature_checker() -> SignatureChecker:
    from tagpin.adapters.signatures import RegistrySignatureChecker

    return RegistrySignatureChecker(wiring.registry_client())


@cached
def trust_material() -> TrustMaterial:
    """Signature gates' keys: inline, from the secret store (``tagpin/signing/...``) or AWS KMS."""
    from tagpin.adapters.signatures.material import StoredTrustMaterial

    kms = lambda region: wiring.aws("kms", region)  # noqa: E731
    return StoredTrustMaterial(wiring.secret_text, kms, max_age=SECRET_MAX_AGE)


@cached
def applier() -> Applier:
    from tagpin.usecases.apply import Applier

    return Applier(
        followed=wiring.followed,
        state=wiring.state(),
        workloads=wiring.cluster_connector(),
        clock=wiring.clock,
        guard=wiring.idempotency_guard(),
        settings=wiring.rollout_settings,
        verifications=wiring.verification_queue(),
        promoter=wiring.promoter(),
        notifier=wiring.notifier(),
        approvals=wiring.approvals(),
        admission=wiring.admission(),
        gitops=lambda: wiring.config().gitops,
        git=git_route(),
    )


@cached
def git_route() -> GitRoute:
    """Owned targets to Git: the write-back queue, when this function has one (tagpin.gitwiring)."""
    from tagpin.adapters.sqs_writes import SqsWriteQueue
    from tagpin.usecases.gitroute import GitRoute

    url = wiring.settings().writeback_queue_url
    return GitRoute(lambda: wiring.config().gitops, SqsWriteQueue(wiring.aws("sqs"), url) if url else None)


@cached
def verifier() -> Verifier:
    from tagpin.usecases.gitrevert import GitReverts
    from tagpin.usecases.verify import Verifier

    return Verifier(
        state=wiring.state(),
        workloads=wiring.cluster_connector(),
        followed=wiring.followed,
        settings=wiring.rollout_settings,
        verifications=wiring.verification_queue(),
        promoter=wiring.promoter(),
        notifier=wiring.notifier(),
        clock=wiring.clock,
        approvals=wiring.approvals(),
        git=GitReverts(lambda: wiring.config().gitops, git_route()),
    )


@cached
def reconciler() -> Reconciler:
    from tagpin.usecases.reconcile import Reconciler

    return Reconciler(
        config=wiring.config,
        state=wiring.state(),
        clusters=wiring.cluster_connector(),
        detector=wiring.detector(),
        queue=change_queue(),
        clock=wiring.clock,
        resolve=wiring.settings().reconcile_resolves,
        channels=wiring.channels(),
        notifier=wiring.notifier(),
    )
