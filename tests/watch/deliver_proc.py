"""A collector's delivery, alone, in a process of its own (the fleet and SIGKILL tests):
``python deliver_proc.py STORE_URL RULES_JSON OWNER LEASE_S TIMEOUT_S``; RULES_JSON lists
``{"url", "secret"}``. Passes every 50 ms until SIGTERM (or SIGKILL); prints ``ready``."""

from __future__ import annotations

import json
import signal
import sys
import threading
from dataclasses import dataclass
from types import FrameType

from lineage_sdk.collector.watch.deliver import Deliverer
from lineage_sdk.collector.watch.rules import rule_key
from lineage_sdk.collector.watch.store import WatchStore


@dataclass(frozen=True)
class Target:
    url: str
    secret: str

    @property
    def key(self) -> str:
        return rule_key(self.url)


def main() -> None:
    url, rules, owner, lease_s, timeout_s = sys.argv[1:6]
    stop = threading.Event()

    def _term(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _term)
    store = WatchStore(url)
    store.open()
    targets = [Target(r["url"], r["secret"]) for r in json.loads(rules)]
    deliverer = Deliverer(
        store,
        targets,
        owner=owner,
        lease_s=float(lease_s),
        timeout=float(timeout_s),
        backoff_s=0.05,
        max_backoff_s=0.2,
        workers=4,
    )
    print("ready", flush=True)
    while not stop.is_set():
        deliverer.run_once()
        stop.wait(0.05)
    deliverer.close()
    store.close()


if __name__ == "__main__":
    main()
