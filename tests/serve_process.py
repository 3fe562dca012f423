"""A real ``lineage-collector serve`` in a process of its own, for the tests that need the whole
command (producers pointed at it by ``OPENLINEAGE_URL``, collectors killed with SIGKILL)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["clean_env", "free_port", "http_status", "serve_process"]


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str) -> int:
    """The status a GET of ``url`` answers (an error status too); 0 when nothing listens (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def clean_env() -> dict[str, str]:
    """This process's environment without the machine's lineage, OpenLineage or dbt settings."""
    prefixes = ("LINEAGE_", "OPENLINEAGE_", "DBT_")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


@contextmanager
def serve_process(
    folder: Path,
    *,
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    wait_s: float = 60.0,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``serve`` on a free loopback port, run in ``folder`` with ``config`` (or none) and
    ``env`` added to :func:`clean_env`; its URL and process once it answers. Terminated at
    exit unless it has ended (a test may kill it)."""
    port = free_port()
    command = [sys.executable, "-m", "lineage_sdk.collector.cli", "serve"]
    if config is not None:
        command += ["--config", str(config)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        command,
        env=clean_env() | dict(env or {}),
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, f"serve did not answer within {wait_s:g} s"
            try:
                if httpx.get(f"{url}/api/v1/namespaces", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.communicate(timeout=30)
