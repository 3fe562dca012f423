"""Restart with a full spool: a process killed with SIGKILL leaves events that the next one sends."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rabbitmq_support import BROKER_URL, Topology

pytestmark = pytest.mark.rabbitmq

CHILD = str(Path(__file__).resolve().parent / "spool_child.py")


def _refused_url() -> str:
    """The same destination as BROKER_URL (a spool is replayed only by an exporter with its
    destination), with a password the broker refuses, so the filler can only spool."""
    assert "guest:guest@" in BROKER_URL
    return BROKER_URL.replace("guest:guest@", "guest:not-the-password@", 1)


def test_killed_process_spool_is_delivered_by_the_next_one(
    topology: Topology, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    ids_file = tmp_path / "ids.txt"
    n = 3000
    filler = subprocess.Popen(
        [
            sys.executable,
            CHILD,
            "fill",
            _refused_url(),
            topology.exchange,
            str(spool),
            str(ids_file),
            str(n),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = filler.stdout.readline() if filler.stdout else ""
        report = json.loads(line)
        assert report == {"spooled": n, "dropped": 0}
    finally:
        os.kill(filler.pid, signal.SIGKILL)
        filler.wait(10)
        if filler.stdout:
            filler.stdout.close()
    assert filler.returncode == -signal.SIGKILL
    left = list(spool.glob("*/*.seg"))
    assert left, "the killed process left its spool segments"

    out = subprocess.run(
        [sys.executable, CHILD, "deliver", BROKER_URL, topology.exchange, str(spool), "-"],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["flushed"] is True
    assert result["replayed"] == n and result["exported"] == n
    assert result["spool_bytes"] == 0
    expected = ids_file.read_text().split("\n")
    got = [props.message_id for _, props, _ in topology.drain(expected=n)]
    assert got == expected  # all of them, once each, in the order they were exported
    assert collections.Counter(got).most_common(1)[0][1] == 1
    assert not list(spool.glob("*/*.seg"))
