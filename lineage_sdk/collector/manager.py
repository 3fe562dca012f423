"""LineageManager: builds the configured stores from entry points and owns their lifecycle.

Stores are found by name in the ``lineage_sdk.stores`` entry-point group, so a third-party
package adds a store by registering a creator (``StoreCreator``: config -> store) there; nothing
in the collector names a store class.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from types import TracebackType

from lineage_sdk.collector.store import (
    LineageCatalogProtocol,
    LineageStoreProtocol,
    StoreCreator,
    pick_query_store,
)
from lineage_sdk.collector.stores.composite import CompositeStore
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError, StoreError

__all__ = ["STORE_ENTRY_POINT_GROUP", "LineageManager", "available_stores"]

STORE_ENTRY_POINT_GROUP = "lineage_sdk.stores"
_log = logging.getLogger("lineage_sdk.collector")


def available_stores() -> dict[str, StoreCreator]:
    """Every registered store creator by name (imports each plugin)."""
    return {ep.name: ep.load() for ep in entry_points(group=STORE_ENTRY_POINT_GROUP)}


class LineageManager:
    """Creates, opens and closes the stores; ``get_store()`` is what the collector writes to.

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
        self.config = config
        self._creators = dict(creators or {})
        self._stores: list[LineageStoreProtocol] | None = list(stores) if stores else None
        self._store: LineageStoreProtocol | None = None
        self._opened = False

    def backend_names(self) -> list[str]:
        """The leaf stores named by configuration, in write order."""
        cfg = self.config.store
        if cfg.backend == "composite":
            if not cfg.backends:
                raise ConfigError(
                    "store.backends",
                    [],
                    "with store.backend='composite', list "
                    'the stores to write to, e.g. ["sql", "logging"]',
                )
            if "composite" in cfg.backends:
                raise ConfigError(
                    "store.backends", cfg.backends, "a composite cannot contain 'composite'"
                )
            if len(set(cfg.backends)) != len(cfg.backends):
                raise ConfigError("store.backends", cfg.backends, "each store at most once")
            return list(cfg.backends)
        return [cfg.backend]

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
            if not callable(loaded):
                raise ConfigError("store.backend", name, f"entry point {ep.value} is not callable")
            return loaded  # type: ignore[no-any-return]
        known = sorted(
            {*self._creators, *(ep.name for ep in entry_points(group=STORE_ENTRY_POINT_GROUP))}
            | {"composite"}
        )
        raise ConfigError("store.backend", name, "one of " + ", ".join(known))

    def build(self) -> list[LineageStoreProtocol]:
        """Create (not open) the configured stores; raises ConfigError naming a bad setting."""
        if self._stores is None:
            self._stores = [self._creator(name)(self.config) for name in self.backend_names()]
        return self._stores

    @property
    def stores(self) -> list[LineageStoreProtocol]:
        return self.build()

    def get_store(self) -> LineageStoreProtocol:
        """The single configured store, or a fail-fast composite of several."""
        if self._store is None:
            stores = self.build()
            self._store = (
                stores[0]
                if len(stores) == 1 and self.config.store.backend != "composite"
                else CompositeStore(stores)
            )
        return self._store

    def open(self) -> None:
        """Open every store in order; on failure close those already open and raise."""
        opened: list[LineageStoreProtocol] = []
        try:
            for store in self.build():
                store.open()
                opened.append(store)
        except BaseException:
            for store in reversed(opened):
                self._close_one(store)
            raise
        self._opened = True

    def check(self) -> dict[str, str | None]:
        """Open and check each store independently: ``{name: None | error}``."""
        results: dict[str, str | None] = {}
        for store in self.build():
            try:
                store.open()
                store.check()
                results[store.name] = None
            except (StoreError, ConfigError) as exc:
                results[store.name] = str(exc)
            except Exception as exc:  # noqa: BLE001 - report any failure of a plugin store
                results[store.name] = f"{type(exc).__name__}: {exc}"
            finally:
                self._close_one(store)
        return results

    @staticmethod
    def _close_one(store: LineageStoreProtocol) -> None:
        try:
            store.close()
        except Exception:  # noqa: BLE001 - closing must go on for the other stores
            _log.exception("closing store %s failed", store.name)

    def close(self) -> None:
        """Close every store, last opened first; never raises."""
        if self._stores is None:
            return
        if isinstance(self._store, CompositeStore):
            self._store.stop_writers()  # the manager closes the leaf stores itself, below
        for store in reversed(self._stores):
            self._close_one(store)
        self._opened = False

    def __enter__(self) -> LineageManager:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def query_store(self) -> LineageCatalogProtocol:
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
