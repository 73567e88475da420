#!/usr/bin/env python3
"""Switchboard's black-box conformance suite.

Checks the MUSTs of docs/reference/hub-protocol.md against a real
`switchboard serve`, over its Unix socket, its WebSocket and its HTTP
port, knowing nothing of the code:

    python3 conformance/probe.py --bin target/release/switchboard [-k WORDS] [--list]

Each check starts the hubs it needs (`serve --dir <temporary dir> --ws
127.0.0.1:0`, with a config file where it needs principals, grants or
limits), prints `PASS` or `FAIL` with its section and name, and stops and
removes its hubs. Every wait is bounded, and a check that runs longer than
CHECK_TIMEOUT fails. The exit status is 1 if any check failed. Needs
Python 3.11 and `websockets` (pip).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import traceback

# No __pycache__ in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checks import Context, load  # noqa: E402
from harness import Failed, kill_all  # noqa: E402

CHECK_TIMEOUT = 30.0


async def run_one(check, binary: str, verbose: bool) -> str | None:
    """Runs one check; returns why it failed, or None."""
    ctx = Context(binary)
    reason = None
    try:
        await asyncio.wait_for(check.run(ctx), CHECK_TIMEOUT)
    except Failed as failure:
        reason = str(failure)
    except asyncio.TimeoutError:
        reason = f"did not finish within {CHECK_TIMEOUT:g} s"
    except Exception as error:  # a check that breaks is a failure too
        reason = f"{type(error).__name__}: {error}"
        if verbose:
            traceback.print_exc()
    if reason and verbose:
        for hub in ctx.hubs:
            print(f"      hub log: {hub.log_tail()}", file=sys.stderr)
    try:
        await asyncio.wait_for(ctx.close(), 15)
    except Exception:
        kill_all()
    return reason


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="the switchboard binary")
    parser.add_argument("-k", dest="keyword", help="run only checks whose name or section contains these words")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="tracebacks and hub logs of failures on stderr")
    args = parser.parse_args()

    checks = load()
    if args.keyword:
        words = args.keyword.lower().split()
        checks = [c for c in checks if all(w in f"§{c.section} {c.name}".lower() for w in words)]
    if args.list:
        for c in checks:
            print(f"§{c.section:<3} {c.name}")
        return 0
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print(f"{binary} is not an executable", file=sys.stderr)
        return 2

    started = time.monotonic()
    failed = []
    for c in checks:
        t0 = time.monotonic()
        reason = await run_one(c, binary, args.verbose)
        if reason is None:
            print(f"PASS §{c.section:<3} {c.name} ({time.monotonic() - t0:.2f} s)", flush=True)
        else:
            failed.append(c)
            print(f"FAIL §{c.section:<3} {c.name}: {reason}", flush=True)
    took = time.monotonic() - started
    print(f"\n{len(checks)} checks, {len(checks) - len(failed)} passed, {len(failed)} failed, in {took:.1f} s")
    return 1 if failed else 0


def _on_signal(signum, _frame) -> None:
    kill_all()
    sys.exit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        status = asyncio.run(main())
    finally:
        kill_all()
    sys.exit(status)
