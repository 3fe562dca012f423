"""How database tables and collections are named as OpenLineage datasets.

From the OpenLineage naming spec, and our documented choices where it has no entry:

- PostgreSQL: namespace ``postgres://{host}:{port}``, name ``{database}.{schema}.{table}``;
  an unqualified table is in schema ``public`` (the default ``search_path``).
- MySQL / MariaDB: ``mysql://{host}:{port}``, ``{database}.{table}``.
- SQL Server: ``mssql://{host}:{port}``, ``{database}.{schema}.{table}`` (default schema ``dbo``).
- SQLite (no spec entry): namespace ``sqlite://{absolute path of the database file}`` (so
  ``sqlite:///srv/app/data.db``), name ``{schema}.{table}`` with SQLite's schema name, ``main``
  unless the table is in an attached database. In-memory and temporary databases are nobody
  else's dataset and are not recorded.
- MongoDB (no spec entry): ``mongodb://{host}:{port}``, name ``{database}.{collection}``.
- Any other SQLAlchemy backend: ``{backend}://{host}:{port}``, ``{database}.{schema}.{table}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "Target",
    "host_port",
    "intern_target",
    "mongodb_target",
    "postgres_target",
    "sqlite_target",
]


@dataclass(frozen=True, slots=True)
class Target:
    """Where statements of one connection run, and how their tables are named.

    ``dialect`` is the ``openlineage-sql`` dialect; ``database``/``default_schema`` fill in what
    an unqualified name leaves out (None: that part is not in the name); ``fold_case`` lowers
    unquoted identifiers (PostgreSQL's rule).
    """

    namespace: str
    dialect: str
    database: str | None
    default_schema: str | None
    fold_case: bool = False
    dollar_params: bool = False  # rewrite %s / %(name)s placeholders as $n for the parser


_INTERNED: dict[Target, Target] = {}


def intern_target(target: Target) -> Target:
    """The one object for targets equal to ``target``: its ``id`` then names it for good (the
    per-run statement memo keys on it, cheaper than hashing the dataclass)."""
    found = _INTERNED.get(target)
    if found is None:
        if len(_INTERNED) >= 4096:  # a program connecting to ever new servers: start over
            _INTERNED.clear()
        found = _INTERNED.setdefault(target, target)
    return found


def host_port(host: str | None, port: int | str | None, default_port: int) -> str:
    """``host:port``, IPv6 hosts in brackets; a Unix socket directory reads as ``localhost``."""
    name = host or "localhost"
    if name.startswith("/"):
        name = "localhost"
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return f"{name}:{port or default_port}"


def postgres_target(host: str | None, port: int | str | None, database: str | None) -> Target:
    return intern_target(
        Target(
            f"postgres://{host_port(host, port, 5432)}",
            "postgres",
            database or None,
            "public",
            fold_case=True,
            dollar_params=True,
        )
    )


def sqlite_target(path: str | None) -> Target | None:
    """None for in-memory and temporary databases (``:memory:``, ``""``, ``file::memory:``)."""
    if not path or path == ":memory:" or "mode=memory" in path or path.startswith("file::memory"):
        return None
    if path.startswith("file:"):
        path = path[len("file:") :].split("?", 1)[0]
    return intern_target(Target(f"sqlite://{os.path.abspath(path)}", "sqlite", None, "main"))


def mongodb_target(host: str, port: int) -> str:
    """The namespace of a MongoDB server."""
    return f"mongodb://{host_port(host, port, 27017)}"
