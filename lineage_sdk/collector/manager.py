"""LineageManager: builds the configured stores from entry points and owns their lifecycle.

Stores are found by name in the ``lineage_sdk.stores`` entry-point group, so a third-party
package adds a store by registering its class there: ``from_config(config)`` builds it, and its
``config_class`` is its ``[lineage.store.<name>]`` table. Nothing in the collector names a store
class.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points

from lineage_sdk.collector.engine import EngineStore
from lineage_sdk.collector.settings import StoreConfig
from lineage_sdk.collector.store import LineageStoreProtocol, StoreCreator
from lineage_sdk.collector.stores.composite import CompositeStore, pick_query_store
from lineage_sdk.config.names import STORE_GROUP, component_names, unknown_component
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError
from lineage_sdk.service import BaseService

__all__ = ["STORE_ENTRY_POINT_GROUP", "STORE_INIT_COMMAND", "LineageManager", "available_stores"]

STORE_ENTRY_POINT_GROUP = STORE_GROUP
STORE_INIT_COMMAND = "lineage-collector store init"
_log = logging.getLogger("lineage_sdk.collector")


def available_stores() -> dict[str, StoreCreator]:
    """Every registered store creator by name (imports each plugin)."""
    return {ep.name: ep.load() for ep in entry_points(group=STORE_ENTRY_POINT_GROUP)}


class LineageManager(BaseService):
    """Creates, opens and closes the stores, each exactly once; ``get_store()`` is what the
    collector writes to.

    Lifecycle (:class:`~lineage_sdk.service.BaseService`): ``connect()``/``close()`` (async,
    idempotent), ``connect_sync()``/``close_sync()`` and ``with`` for synchronous code.

    ``creators`` adds or overrides store creators by name (tests, embedding applications);
    ``stores`` bypasses configuration entirely with ready-made stores.
    """

    def __init__(
        self,
        config: LineageConfig,
        *,
        creators: Mapping[str, StoreCreator] | None = None,
        stores: Sequence[LineageStoreProtocol] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self._creators = dict(creators or {})
        self._stores: list[LineageStoreProtocol] | None = list(stores) if stores else None
        self._store: LineageStoreProtocol | None = None
        self._open_stores: list[LineageStoreProtocol] = []  # in opening order

    @property
    def settings(self) -> StoreConfig:
        """``[lineage.store]``; its validator is where the composite's backend rules live."""
        return self.config.section("store", StoreConfig)

    def backend_names(self) -> list[str]:
        """The leaf stores named by configuration, in write order."""
        cfg = self.settings
        return list(cfg.backends) if cfg.backend == "composite" else [cfg.backend]

    def _creator(self, name: str) -> StoreCreator:
        if name in self._creators:
            return self._creators[name]
        for ep in entry_points(group=STORE_ENTRY_POINT_GROUP, name=name):
            try:
                loaded = ep.load()
            except ImportError as exc:
                raise ConfigError(
                    "store.backend",
                    name,
                    f"the store's package cannot be imported ({exc}); install its extra",
                ) from None
            if not callable(getattr(loaded, "from_config", loaded)):
                raise ConfigError("store.backend", name, f"entry point {ep.value} builds no store")
            return loaded  # type: ignore[no-any-return]
        known = [*self._creators, *component_names(STORE_ENTRY_POINT_GROUP), "composite"]
        raise unknown_component(self._key_of(name), name, known, group=STORE_ENTRY_POINT_GROUP)

    def _key_of(self, name: str) -> str:
        """The key that named the store: ``store.backends`` for a composite's, else
        ``store.backend``."""
        return "store.backends" if name in self.settings.backends else "store.backend"

    def _create(self, name: str) -> LineageStoreProtocol:
        """A store class's ``from_config`` (its entry point), or a creator called with config."""
        creator = self._creator(name)
        factory: StoreCreator = getattr(creator, "from_config", creator)
        return factory(self.config)

    def build(self) -> list[LineageStoreProtocol]:
        """Create (not open) the configured stores; raises ConfigError naming a bad setting."""
        if self._stores is None:
            self._stores = [self._create(name) for name in self.backend_names()]
        return self._stores

    @property
    def stores(self) -> list[LineageStoreProtocol]:
        return self.build()

    def get_store(self) -> LineageStoreProtocol:
        """What the collector writes to: the single configured store, or the composite of several
        (written concurrently; it waits for all of them and raises if any failed)."""
        if self._store is None:
            stores = self.build()
            self._store = (
                stores[0]
                if len(stores) == 1 and self.settings.backend != "composite"
                else CompositeStore(stores)
            )
        return self._store

    async def _connect(self) -> None:
        await asyncio.to_thread(self._open_stores_now)

    async def _close(self) -> None:
        await asyncio.to_thread(self._close_stores_now)

    def _open_stores_now(self) -> None:
        """Open every store once, in order, then the composite over them (its writer pool).

        The manager is the one owner of the stores' lifecycles: the composite never opens or
        closes its leaves. On failure, the stores opened so far (and the one that failed, to
        release what it acquired) are closed, last first, and the error is raised (the manager
        stays disconnected). Blocking: runs in a worker thread.
        """
        stores = self.build()
        opened: list[LineageStoreProtocol] = []
        try:
            for store in stores:
                opened.append(store)
                store.open()
            writer = self.get_store()
            if isinstance(writer, CompositeStore):
                opened.append(writer)
                writer.open()
        except BaseException:
            for store in reversed(opened):
                self._close_one(store)
            raise
        self._open_stores = opened

    def check(self) -> dict[str, str | None]:
        """Check each store independently: ``{name: None | error}``.

        On a manager that is not open, each store is opened for its check and closed after it;
        on an open one, the open stores are checked as they are.
        """
        results: dict[str, str | None] = {}
        already_open = bool(self._open_stores)
        for store in self.build():
            try:
                if not already_open:
                    store.open()
                store.check()
                results[store.name] = None
            except (StoreError, ConfigError) as exc:
                results[store.name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - report any failure of a plugin store
                results[store.name] = f"{type(exc).__name__}: {exc}"
            finally:
                if not already_open:
                    self._close_one(store)
        return results

    def probe(self) -> dict[str, str | None]:
        """Check each store without changing it: ``{name: None | problem}``.

        A store with a ``missing()`` method (sql, document, graph) is asked what its ``open``
        would create, without opening it; anything missing is a problem naming the command that
        creates it. Any other store is opened, checked and closed, as :meth:`check` does.
        """
        results: dict[str, str | None] = {}
        for store in self.build():
            missing = getattr(store, "missing", None)
            if missing is None:
                results.update(LineageManager(self.config, stores=[store]).check())
                continue
            try:
                absent = missing()
                results[store.name] = (
                    f"missing {', '.join(absent)}; create with `{STORE_INIT_COMMAND}` (or "
                    f"`lineage-collector run`, which creates them at start)"
                    if absent
                    else None
                )
            except (StoreError, ConfigError) as exc:
                results[store.name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - report any failure of a plugin store
                results[store.name] = f"{type(exc).__name__}: {exc}"
        return results

    def init_stores(self) -> None:
        """Create what the stores need (tables, indexes), as ``run`` does at start: open each
        store, then close it (``lineage-collector store init``)."""
        self.connect_sync()
        self.close_sync()

    @staticmethod
    def _close_one(store: LineageStoreProtocol) -> None:
        try:
            store.close()
        except Exception:  # noqa: BLE001 - closing must go on for the other stores
            _log.exception("closing store %s failed", store.name)

    def _close_stores_now(self) -> None:
        """Close what was opened, once, last opened first (the composite's writer pool before
        the stores it writes to); never raises. Blocking: runs in a worker thread."""
        opened, self._open_stores = self._open_stores, []
        for store in reversed(opened):
            self._close_one(store)

    def query_store(self) -> EngineStore:
        """The store that answers reads (built, not opened): ``sql``, else ``graph``, else another
        querying store, looking into a composite. ConfigError when no configured store can."""
        stores = self.build()
        query = pick_query_store(stores)
        if query is None:
            raise ConfigError(
                "store.backend",
                [getattr(s, "name", type(s).__name__) for s in stores],
                "no configured store answers queries; configure the sql or graph store",
            )
        return query
