"""Fan-out bench: one poll round of N tags split in P parts (``PollParts``), through the real poller
handler on the local stack (moto server, the real CNCF registry).

For N label-discovered tags (index entries, tag states and settled targets written through the
production repositories, as after a first reconcile and rollout), it runs:

1. a first round: every part once (this settles the digests: later rounds read only them);
2. a steady round: every part again, each invocation timed;
3. the steady round once more, its Python allocations' peak traced (tracemalloc slows every
   allocation: a round traced is not a round timed).

The parts run one after the other here (2 cores); on AWS they run side by side, each in its own
Lambda with its own CPU and connections, so a round lasts as long as its slowest part. The row for
100,000 tags is **modelled** from the measured per-tag time of the slowest part: tags per part at
100,000 = 100,000 / P, time = that times the measured seconds per tag of the slowest part. Registry latency
and rate limits on the internet are not in these figures (the local registry answers in about a
millisecond): `make bench-poll` measures a poll with 50 ms of latency.

    python -m bench.fanout --tags 5000 --parts 1,4,16
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.cost import cpu
from bench.cost.defaults import template_defaults
from bench.cost.model import REGISTRY_CONCURRENCY, REGISTRY_MS, lambda_ms
from bench.cost.world import images, push_tags, seed_index, seed_target_states

RESULTS = Path(__file__).parent / "results" / "fanout.json"
TARGET_S = 300  # one round of 100,000 tags: under 5 minutes
MODEL_TAGS = 100_000


def measure(n: int, parts_list: list[int]) -> dict[str, Any]:
    from tagpin import wiring
    from tagpin.adapters.lambda_parts import part_event
    from tagpin.domain.shards import PollPart
    from tagpin_local.stack import LocalStack, StackOptions

    logging.getLogger("tagpin").setLevel(logging.WARNING)
    cpu.install()
    poller_mb = template_defaults()["memory_mb"]["poller"]
    out: dict[str, Any] = {"tags": n, "rows": []}
    options = StackOptions(notifications=False, consume=False, log_level="WARNING")
    with LocalStack(options) as stack:
        assert stack.registry is not None
        host = stack.registry.host
        tags = images(host, n)
        t0 = time.perf_counter()
        digest = push_tags(stack.registry.url, n)
        seed_target_states(stack, tags, digest)
        seed_index(stack, tags, digest)
        out["setup_s"] = round(time.perf_counter() - t0, 1)
        document = stack.config_document()
        document["images"] = []
        document["registries"] = {host: {"insecure": True}}
        stack.write_config(document)
        poller = stack.functions["poller"]
        for parts in parts_list:
            os.environ["TAGPIN_POLL_PARTS"] = str(parts)
            wiring.reset()
            events = [part_event(PollPart(i, parts)) for i in range(parts)]
            for event in events:  # first round: settles what the seeding did not
                poller.invoke(event)
            timings, cpus, peaks, resolved = [], [], [], 0
            for event in events:  # timed: tracemalloc would slow every allocation (a few times over)
                started, own = time.perf_counter(), cpu.Invocation()
                result = poller.invoke(event)
                timings.append(time.perf_counter() - started)
                cpus.append(own.cpu_ms() / 1000)
                assert result["changed"] == 0 and result["not_reached"] == 0, result
                resolved += result["resolved"]
            for event in events:  # the same steady round again, its Python allocations' peak traced
                tracemalloc.start()
                poller.invoke(event)
                peaks.append(tracemalloc.get_traced_memory()[1] / 1e6)
                tracemalloc.stop()
            assert resolved == n, (resolved, n)
            slowest = max(timings)
            per_tag = slowest / (n / parts)
            model_s = per_tag * MODEL_TAGS / parts
            # the same from the poller's own CPU (moto's is in the wall time, bench/cost/cpu.py),
            # as the cost model bills it: what one part of 100,000 / P tags would take on Lambda
            part_tags = MODEL_TAGS / parts
            model_cpu_s = (
                lambda_ms(max(cpus) * 1000 / (n / parts) * part_tags, poller_mb, registry_requests=part_tags)
                / 1000
            )
            row = {
                "parts": parts,
                "round_s_sequential": round(sum(timings), 2),
                "slowest_part_s": round(slowest, 2),
                "round_s_parallel": round(slowest, 2),
                "tags_per_part": n // parts,
                "peak_python_mb_per_part": round(max(peaks), 1),
                "slowest_part_own_cpu_s": round(max(cpus), 2),
                "model_100k_round_s": round(model_s, 1),
                "model_100k_under_5_min": model_s < TARGET_S,
                "model_100k_round_s_from_own_cpu": round(model_cpu_s, 1),
                "model_100k_under_5_min_from_own_cpu": model_cpu_s < TARGET_S,
            }
            out["rows"].append(row)
            print(
                f"N={n:>7,} parts={parts:>3}: slowest part {slowest:6.2f} s "
                f"({n // parts:,} tags), all parts one after the other {sum(timings):6.2f} s, "
                f"peak {max(peaks):5.1f} MB; modelled 100,000 tags in {parts} parts: {model_s:6.1f} s "
                f"({'under' if model_s < TARGET_S else 'OVER'} 5 min); from own CPU "
                f"{max(cpus):.2f} s at {poller_mb} MB + {REGISTRY_MS:.0f} ms per {REGISTRY_CONCURRENCY} "
                f"registry requests: {model_cpu_s:6.1f} s "
                f"({'under' if model_cpu_s < TARGET_S else 'OVER'} 5 min)"
            )
        os.environ.pop("TAGPIN_POLL_PARTS", None)
    return out


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--tags", type=int, default=5000)
    parser.add_argument("--parts", default="1,4,16")
    args = parser.parse_args()
    result = measure(args.tags, [int(p) for p in args.parts.split(",")])
    result["note"] = (
        "parts measured one after the other on this machine; on AWS they run side by side, so a "
        "round lasts as long as the slowest part (round_s_parallel). model_100k_*: modelled from "
        "the slowest part's seconds per tag, not measured."
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
