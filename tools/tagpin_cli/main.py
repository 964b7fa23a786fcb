"""The ``tagpin`` command. ``tagpin local`` runs the local stack; ``tagpin demo`` the demo scenario."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading


def _local(args: argparse.Namespace) -> int:
    from tagpin_local.stack import LocalStack, StackOptions

    options = StackOptions(
        notifications=not args.no_notifications,
        poll_interval=None if args.poll_interval <= 0 else args.poll_interval,
        log_level=args.log_level,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalStack(options) as stack:
        if not args.empty:
            from tagpin_local.kubesim import deployment

            assert stack.registry is not None
            stack.kube.create(
                deployment("web", "default", f"{stack.registry.host}/demo/web:stable", container="web")
            )
        endpoints = stack.endpoints()
        endpoints["kubeconfig"] = json.dumps(stack.kube.kubeconfig("local"))
        print(json.dumps(endpoints), flush=True)
        stop.wait()
    return 0


def _demo(_args: argparse.Namespace) -> int:
    from tagpin_local.demo import main

    return main([])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagpin", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    local = commands.add_parser(
        "local", help="run the local stack until interrupted; prints its endpoints as JSON"
    )
    local.add_argument(
        "--poll-interval", type=float, default=30.0, help="seconds between poller runs; 0 = off"
    )
    local.add_argument("--no-notifications", action="store_true", help="registry push notifications off")
    local.add_argument("--log-level", default="WARNING")
    local.add_argument("--empty", action="store_true", help="do not create the demo Deployment default/web")
    local.set_defaults(func=_local)
    demo = commands.add_parser("demo", help="run the demo scenario and exit")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
