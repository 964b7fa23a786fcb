"""GitOps write-back at scale (issue 28): one push of a followed tag that moves 500 workloads Argo
CD owns, written in 50 Git repositories, through the whole local stack with ``GitWriteBack``: the
registry's push notification, the webhook, the consumer (the owner check, the claims, one write
request per repository on the FIFO write-back queue), the write-back function on its SQS loop
(``containers`` side by side, each repository's requests serialised by its message group), and
Git's own ``git http-backend`` on 127.0.0.1 with token authentication, each push timed when the
server answered it. Two pushes: the first after a start (cold containers), the second warm.

Per repository: the time from the start of the push to the registry until its commit was pushed;
printed as p50 and max over the repositories, and each repository's commits (exactly one per
push). The peer's figure for comparison: Argo CD Image Updater serialises write-back per
repository, about 13 minutes a cycle at 500 applications (argo-cd-image-updater #475, #1572).

The workloads have no replicas and verification is off (``rollout.verify: false``): what is
measured is the write-back, not 500 rollouts (tests/e2e/test_gitops_writeback.py follows one
through its sync and verification). The 500 targets are listed in the configuration (moto does not
hold it to SSM's 8 KB; a real stack of this size discovers them by label).

    python -m bench.gitops [--workloads 500] [--repositories 50] [--containers 3]
    python -m bench.gitops --size    the Git layer's size and the write-back function's cold start
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gitops.json"
TOKEN = "ghp_bench_0123456789abcdef"
PEER = (
    "Argo CD Image Updater: about 13 minutes a cycle at 500 applications (argo-cd-image-updater #475, #1572)"
)


def manifest(names: list[str], namespace: str, image: str) -> str:
    docs = [
        f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{app.kubernetes.io/instance: {namespace}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: app
          image: {image}
"""
        for name in names
    ]
    return "---\n".join(docs)


def measure(workloads: int, repositories: int, containers: int) -> dict[str, Any]:
    from tagpin_local.gitserver import GitServer
    from tagpin_local.kube.manifests import deployment
    from tagpin_local.oci import push_image
    from tagpin_local.stack import LocalStack, StackOptions

    pushes: dict[str, list[float]] = {}
    lock = threading.Lock()

    class TimedGitServer(GitServer):
        def record(self, method: str, path: str, status: int) -> None:
            super().record(method, path, status)
            if method == "POST" and path.endswith("/git-receive-pack") and status == 200:
                with lock:
                    pushes.setdefault(path.removesuffix("/git-receive-pack"), []).append(time.monotonic())

    # visibility_timeout as the template's (6 x the consumer's timeout): the local default (5 s)
    # would hand a change still being applied (500 targets take longer) to a second consumer
    options = StackOptions(
        visibility_timeout=360,
        notifications=True,
        consume=True,
        git_write_back=True,
        containers=containers,
        log_level=os.environ.get("BENCH_LOG", "ERROR"),
    )
    with TimedGitServer(tokens={TOKEN: "write"}) as git, LocalStack(options) as st:
        assert st.registry is not None
        image = f"{st.registry.host}/bench/web:stable"
        first = push_image(st.registry.url, "bench/web", "stable", content=b"round 0")
        per_repo = workloads // repositories
        targets, write_back, repos = [], [], []
        for r in range(repositories):
            namespace, names = f"team-{r:02d}", [f"app-{r:02d}-{i:02d}" for i in range(per_repo)]
            url = git.create(
                f"org/team-{r:02d}", {"apps.yaml": manifest(names, namespace, f"{image}@{first}")}
            )
            repos.append(f"/org/team-{r:02d}.git")
            for name in names:
                obj = deployment(name, namespace, f"{image}@{first}", replicas=0)
                obj["metadata"]["labels"] = {"app.kubernetes.io/instance": namespace}
                st.kube.create(obj)
                targets.append(
                    {
                        "cluster": "local",
                        "namespace": namespace,
                        "kind": "Deployment",
                        "name": name,
                        "container": "app",
                    }
                )
            write_back.append(
                {
                    "image": image,
                    "targets": [f"local/{namespace}/*/*"],
                    "repository": url,
                    "files": [{"path": "apps.yaml", "kind": "manifest"}],
                }
            )
        document = st.config_document()
        document["images"] = [{"image": image, "targets": targets}]
        document["rollout"] = {"verify": False}
        document["gitops"] = {
            "hosts": {git.host: {"credentials_secret": "tagpin/git/bench", "insecure": True}},
            "write_back": write_back,
        }
        st.write_config(document)
        st.put_secret("tagpin/git/bench", json.dumps({"token": TOKEN}))
        rounds = []
        for n in (1, 2):
            with lock:
                pushes.clear()
            writes_before = st.functions["writeback"].invocations
            consumer_before = st.functions["consumer"].invocations
            requests_before = len(git.requests)
            started = time.monotonic()
            digest = push_image(st.registry.url, "bench/web", "stable", content=f"round {n}".encode())
            deadline = started + 600
            while time.monotonic() < deadline:
                with lock:
                    done = len(pushes)
                if done >= repositories:
                    break
                time.sleep(0.05)
            with lock:
                latency = {repo: round(times[0] - started, 2) for repo, times in pushes.items()}
                commits = {repo: len(times) for repo, times in pushes.items()}
            values = sorted(latency.values())
            fetches = sum(
                1 for m, p, _ in git.requests[requests_before:] if m == "POST" and p.endswith("upload-pack")
            )
            refused = sum(
                1 for _, p, s in git.requests[requests_before:] if p.endswith("receive-pack") and s != 200
            )
            rounds.append(
                {
                    "round": "first push after a start" if n == 1 else "second push (warm)",
                    "digest": digest,
                    "repositories_committed": len(latency),
                    "p50_s": round(statistics.median(values), 2) if values else None,
                    "max_s": values[-1] if values else None,
                    "min_s": values[0] if values else None,
                    "per_repository_s": dict(sorted(latency.items())),
                    "commits_per_repository": sorted(set(commits.values())),
                    "pushes": sum(commits.values()),
                    "fetches": fetches,
                    "failed_requests": refused,
                    "writeback_invocations": st.functions["writeback"].invocations - writes_before,
                    "consumer_invocations": st.functions["consumer"].invocations - consumer_before,
                    # where the time went: each function's invocations in this round, from the push
                    "functions": {
                        name: [
                            (round(i.started - started, 2), round(i.finished - i.started, 2))
                            for i in st.functions[name].history
                            if i.started >= started - 1
                        ]
                        for name in ("webhook", "consumer", "writeback")
                    },
                }
            )
            # every file of every repository says the digest (each workload's reference was written)
            written = sum(
                git.show(repo.strip("/").removesuffix(".git"), "apps.yaml").count(digest) for repo in repos
            )
            rounds[-1]["references_written"] = written
        return {
            "workloads": workloads,
            "repositories": repositories,
            "containers": containers,
            "rounds": rounds,
            "peer": PEER,
            "writeback_cold_starts": st.functions["writeback"].cold_starts,
        }


def size() -> dict[str, Any]:
    """The Git layer built as sam build builds it (layers/git/Makefile), and the write-back
    function's cold start on this host: its handler imported and its writer built, in a fresh
    process (median of 5)."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            ["make", "-s", "-f", str(ROOT / "layers/git/Makefile"), "build-GitLayer", f"ARTIFACTS_DIR={out}"],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHON": sys.executable},
        )
        files = [p for p in Path(out).rglob("*") if p.is_file()]
        layer = sum(p.stat().st_size for p in files)
        dulwich = sum(p.stat().st_size for p in files if "/dulwich/" in str(p))
    script = (
        "import time, importlib.util, sys; t = time.perf_counter(); "
        "spec = importlib.util.spec_from_file_location('app', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "from tagpin import gitwiring; gitwiring.writer(); "
        "print(round((time.perf_counter() - t) * 1000, 1))"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "TAGPIN_CONFIG_PARAMETER": "/tagpin/config",
        "TAGPIN_STATE_TABLE": "tagpin-state",
        "TAGPIN_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/changes.fifo",
        "TAGPIN_WRITEBACK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/writeback.fifo",
    }
    handler = str(ROOT / "functions/writeback/app.py")
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", script, handler], capture_output=True, text=True, env=env, check=True
            ).stdout
        )
        for _ in range(5)
    ]
    return {
        "git_layer_bytes": layer,
        "dulwich_bytes": dulwich,
        "cold_start_ms_median_of_5": statistics.median(runs),
        "cold_start_ms_runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=500)
    parser.add_argument("--repositories", type=int, default=50)
    parser.add_argument("--containers", type=int, default=3)
    parser.add_argument("--size", action="store_true")
    args = parser.parse_args()
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.size:
        result = previous | {"size": size()}
        s = result["size"]
        print(
            f"Git layer {s['git_layer_bytes'] / 1e6:.2f} MB (dulwich {s['dulwich_bytes'] / 1e6:.2f} MB); "
            f"write-back cold start (handler + writer, this host) {s['cold_start_ms_median_of_5']} ms"
        )
    else:
        scale = measure(args.workloads, args.repositories, args.containers)
        result = {**{k: v for k, v in previous.items() if k == "size"}, **scale}
        print(f"{scale['workloads']} workloads in {scale['repositories']} repositories, one push each round:")
        for r in scale["rounds"]:
            print(
                f"  {r['round']}: {r['repositories_committed']}/{scale['repositories']} repositories "
                "committed; "
                f"push -> commit per repository p50 {r['p50_s']} s, max {r['max_s']} s (min {r['min_s']} s); "
                f"commits per repository {r['commits_per_repository']}; {r['references_written']} references "
                f"written; {r['fetches']} fetches, {r['pushes']} pushes, {r['failed_requests']} failed; "
                f"write-back {r['writeback_invocations']} invocations, consumer {r['consumer_invocations']}"
            )
        print(f"  peer: {PEER}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
