"""What the tests share: in-memory fakes of the ports (``tagpin.ports``), constants and helpers. Each
fake or constant is defined here once; test modules import them instead of writing their own.

- ``constants``: digests D0..D3, images and targets, the webhook token, moto's names, paths
- ``clock``: ``FakeClock``, monotonic seconds or ticking epoch ms
- ``registry``: ``ScriptedRegistry``, the Resolver, BatchResolver, ManifestFetcher and TagLister ports
- ``cluster``: ``FakeCluster`` (the Workloads and Inventory ports) and ``FakeClusters`` (the connector)
- ``queues``: ``ListQueue``, ``ListVerificationQueue``
- ``notify``: ``RecordingNotifier`` (the Notifier port), ``FakeSns`` (the SNS client)
- ``webhooks``: the samples in events/webhooks and ``Hook``, a WebhookService to post them to
- ``stack``: ``drain`` and ``state_of`` over the local stack; ``aws``: ``create_table`` for moto
"""
