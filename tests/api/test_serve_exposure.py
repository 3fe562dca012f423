"""``lineage-collector serve`` refuses a non-loopback address without ``api_key`` unless
``--insecure`` is given, which it logs; loopback addresses need no key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from servers import free_port

from lineage_sdk.collector.api.server import is_loopback


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE_"))}
    env.update(
        {
            "LINEAGE_STORE_BACKEND": "sql",
            "LINEAGE_STORE_SQL_URL": f"sqlite:///{tmp_path}/api.db",
            "COLUMNS": "200",
        }
    )
    env.update(extra)
    return env


def _serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lineage_sdk.collector.cli", "serve", *args],
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_a_non_loopback_address_without_a_key_is_refused_in_one_line(tmp_path, host):
    result = _serve(tmp_path, "--host", host, "--port", str(free_port()))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "api.host" in lines[0] and "--insecure" in lines[0] and "api_key" in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "api.db").exists()  # refused before opening the store


def test_the_configured_host_is_checked_too(tmp_path):
    result = _serve(tmp_path, LINEAGE_API_HOST="0.0.0.0", LINEAGE_API_PORT=str(free_port()))
    assert result.returncode == 2 and "--insecure" in result.stderr


def test_insecure_listens_on_every_interface_and_logs_a_warning(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lineage_sdk.collector.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--insecure",
        ],
        env=_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert status is not None and status.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    warnings = [line for line in err.splitlines() if "--insecure" in line]
    assert len(warnings) == 1, err
    assert '"level":"warning"' in warnings[0] and "without an api_key" in warnings[0]


def test_a_key_or_a_loopback_address_needs_no_flag(tmp_path):
    for args, env in (
        (["--host", "0.0.0.0"], {"LINEAGE_API_API_KEY": "k3y-for-tests"}),
        (["--host", "127.0.0.1"], {}),
    ):
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lineage_sdk.collector.cli",
                "serve",
                *args,
                "--port",
                str(port),
            ],
            env=_env(tmp_path, **env),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            up = False
            while time.monotonic() < deadline and proc.poll() is None and not up:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=1)
                    up = True
                except httpx.TransportError:
                    time.sleep(0.1)
            assert up, args
        finally:
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=30)
        assert "--insecure" not in err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.0.0.1", False),
        ("localhost.example.com", False),
    ],
)
def test_what_counts_as_loopback(host, loopback):
    assert is_loopback(host) is loopback
