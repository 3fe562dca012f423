"""Fixtures for the API tests: the real sql store (the engine over the sql backend, SQLite in
tmp_path) built from configuration by a LineageManager, the real app under uvicorn on a free
loopback port, and a loaded pipeline."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# tests/conformance.py and api_helpers.py are plain modules: importable however pytest started.
for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from api_helpers import API_KEY, Api, pipeline  # noqa: E402

from lineage_sdk.collector.api import ApiServer, create_app  # noqa: E402
from lineage_sdk.collector.engine import EngineStore  # noqa: E402
from lineage_sdk.collector.manager import LineageManager  # noqa: E402
from lineage_sdk.collector.stores.sql_backend import SqlBackend  # noqa: E402
from lineage_sdk.config.schema import LineageConfig  # noqa: E402


def _sql_config(tmp_path: Path) -> tuple[LineageConfig, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "lineage.db"
    toml = tmp_path / "lineage.toml"
    toml.write_text(
        f'[lineage.store]\nbackend = "sql"\n[lineage.store.sql]\nurl = "sqlite:///{db}"\n',
        encoding="utf-8",
    )
    config = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{db}"}}}
    )
    return config, toml


@pytest.fixture
def make_api(tmp_path: Path) -> Iterator[Callable[..., Api]]:
    """Start an API over a fresh SQLite store (the ``sql`` entry point); keyword arguments go to
    create_app."""
    started: list[tuple[ApiServer, httpx.Client, LineageManager]] = []

    def factory(**kwargs: Any) -> Api:
        config, toml = _sql_config(tmp_path / f"api{len(started)}")
        manager = LineageManager(config)
        manager.connect_sync()
        server = ApiServer(create_app(manager, **kwargs)).start()
        headers = {"X-API-Key": kwargs["api_key"]} if kwargs.get("api_key") else {}
        client = httpx.Client(base_url=server.url, headers=headers, timeout=30)
        started.append((server, client, manager))
        store = manager.get_store()
        assert isinstance(store, EngineStore) and isinstance(store.backend, SqlBackend)
        return Api(server.url, client, store, manager, toml)

    yield factory
    for server, client, manager in started:
        client.close()
        server.stop()
        manager.close_sync()


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    """An API requiring API_KEY for ingest (the client sends it)."""
    return make_api(api_key=API_KEY)


@pytest.fixture
def loaded(api: Api) -> dict[str, Any]:
    """The known pipeline, posted over HTTP as one batch."""
    data = pipeline()
    response = api.client.post("/api/v1/lineage/batch", json=data["events"])
    assert response.status_code == 200, response.text
    assert response.json()["summary"]["successful"] == len(data["events"])
    return data
