"""Running the API: ``serve`` (the ``lineage-collector serve`` command) and :class:`ApiServer`.

The API runs as its own process, ``lineage-collector serve``, beside ``lineage-collector run``:
both build a :class:`LineageManager` from the same configuration and write to the same stores,
so HTTP ingest and queue consumption store identically, yet the broker consumer's loop never
shares a process (or a GIL) with HTTP clients, and each can be restarted or scaled on its own.
:class:`ApiServer` runs the same app on a background thread for tests, benchmarks and
applications that embed it.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI

from lineage_sdk.collector.api.access import AccessPolicy
from lineage_sdk.collector.api.app import create_app
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.collector.service import LineageCollectorService
from lineage_sdk.collector.settings import ApiConfig, ApiKeyConfig
from lineage_sdk.collector.startup import tune_gc
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ApiServer",
    "api_settings",
    "is_loopback",
    "serve",
]

_log = logging.getLogger("lineage_sdk.collector.api")

DEFAULT_HOST = "127.0.0.1"
#: Marquez's API port, so tools configured for a local Marquez find this API unchanged.
DEFAULT_PORT = 5000


def api_settings(config: LineageConfig) -> dict[str, Any]:
    """The API's settings from ``[lineage.api]``."""
    section = config.section("api", ApiConfig)
    return {
        "host": section.host,
        "port": section.port,
        "api_key": section.api_key,
        "protect_reads": section.protect_reads,
        "max_body_bytes": section.max_body_bytes,
        "keys": config.named("api.keys", ApiKeyConfig),
    }


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 (also IPv4-mapped) and ``localhost``; a host name other than
    ``localhost`` is not resolved and counts as reachable from elsewhere."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def serve(
    config: LineageConfig,
    host: str | None = None,
    port: int | None = None,
    *,
    api_key: str | None = None,
    protect_reads: bool | None = None,
    max_body_bytes: int | None = None,
    log_level: str = "info",
    insecure: bool = False,
    open_stores: Callable[[LineageManager], None] | None = None,
) -> None:
    """Open the configured stores, serve the API until SIGINT/SIGTERM, close the stores.

    Arguments override ``[lineage.api]``. Raises ConfigError/StoreError before listening if the
    stores cannot be built or opened, and ConfigError for a non-loopback address without an
    ``api_key`` (anyone who reaches it could write events), unless ``insecure`` (logged).
    ``open_stores`` opens the manager's stores (default: at once; ``lineage-collector serve``
    waits for them, see ``lineage_sdk.collector.startup``). uvicorn's logs go to the root
    logger's handlers (``lineage_sdk.collector.logs``), so ``serve`` logs in one format.
    """
    settings = api_settings(config)
    host = host or settings["host"]
    key = api_key if api_key is not None else settings["api_key"]
    keys = settings["keys"]
    if not key and not keys and not is_loopback(host):
        if not insecure:
            raise ConfigError(
                "api.host",
                host,
                f"refusing to listen on {host}: serve binds only to a loopback address"
                " (127.0.0.1, ::1 or localhost) while no API key is configured; set"
                " [lineage.api.keys.NAME] or api.api_key (LINEAGE_API_API_KEY), or pass"
                " --insecure to serve it without a key anyway",
            )
        _log.warning(
            "serving the API on %s without an api_key (--insecure): anyone who can reach this"
            " address can write events%s",
            host,
            "" if settings["protect_reads"] else " and read all lineage",
        )
    reads = protect_reads if protect_reads is not None else settings["protect_reads"]
    AccessPolicy(api_key=key, keys=keys, protect_reads=reads)  # a bad grant fails before opening
    manager = LineageManager(config)
    manager.build()
    (open_stores or LineageManager.connect_sync)(manager)
    service: LineageCollectorService | None = None
    try:
        app = create_app(
            manager,
            api_key=key,
            keys=keys,
            protect_reads=reads,
            max_body_bytes=max_body_bytes or settings["max_body_bytes"],
        )
        service = app.state.lineage.service
        if service is not None:
            service.start_watch()  # the alerts' watch, when rules are configured
        tune_gc()
        uvicorn.run(
            app,
            host=host,
            port=port if port is not None else settings["port"],
            log_level=log_level.lower(),
            log_config=None,
            server_header=False,
            proxy_headers=False,
        )
    finally:
        if service is not None:
            service.stop_watch()
        manager.close_sync()


class ApiServer:
    """The app under uvicorn on a background thread, on a loopback port picked by the OS.

    >>> with ApiServer(create_app(store)) as server:   # doctest: +SKIP
    ...     httpx.get(server.url + "/api/v1/namespaces")
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections: without it, a response written in two parts waits
        # for the client's delayed ACK (~40 ms a request on Linux).
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", server_header=False, lifespan="off")
        )
        self._thread = threading.Thread(target=self._run, name="lineage-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        self.server.run(sockets=[self._sock])

    def start(self, timeout: float = 10.0) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
