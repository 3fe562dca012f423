"""SQL statements to datasets, with ``openlineage-sql`` (the OpenLineage project's Rust parser).

``analyze(statement, target, producer)`` returns the statement's input and output datasets. The
result is cached by ``(statement text, target, producer)`` in a bounded LRU shared by every thread
and connection, so a statement is parsed once per process however often it runs (a repeated
statement costs one dictionary lookup; threads meeting a new one together wait for one parse).

- Tables read are inputs, tables written (INSERT, UPDATE, DELETE, MERGE, CREATE TABLE AS, ...) are
  outputs, named by the connection's :class:`~lineage_instrumentation.db._naming.Target`.
- With exactly one output, the parser's column lineage becomes the output's ``columnLineage``
  facet. The parser only names a SELECT's outputs (``_0`` for an unnamed one); INSERT, UPDATE and
  CREATE TABLE AS map them to columns by position, as SQL does (:mod:`._columns`), with each
  input field's transformation (IDENTITY, TRANSFORMATION, AGGREGATION). An INSERT without a
  column list uses the target's columns when a CREATE TABLE seen earlier told them (an analysis
  that used them is redone when they change); a statement not read so gets no column lineage
  rather than a guess. An explicit INSERT column list, or the columns a CREATE TABLE AS names,
  are also the output's ``schema`` facet (names only: the statement does not say the types).
- A statement the parser cannot read is counted in :func:`sql_stats` and yields no datasets; it
  is never an error for the application.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lineage_instrumentation.db._columns import ALIAS_PREFIX, SCHEMAS, Plan, ddl_effect, plan
from lineage_instrumentation.db._naming import Target
from lineage_sdk.models.dataset import LineageDataset

__all__ = [
    "COLUMN_LINEAGE_FACET_URL",
    "SCHEMA_FACET_URL",
    "Analysis",
    "SqlStats",
    "analyze",
    "clear_cache",
    "sql_stats",
]

_LOG = logging.getLogger("lineage_instrumentation.db")

COLUMN_LINEAGE_FACET_URL = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet"
)
SCHEMA_FACET_URL = (
    "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
)
CACHE_SIZE = 2048  # distinct statements remembered; an application has far fewer in practice
_WAIT_SECONDS = 2.0  # the longest a thread waits for another's parse of the same statement
_MAX_STATEMENT = 100_000  # longer statements (bulk VALUES lists) are not parsed

_PERCENT_PARAM = re.compile(r"%%|%\(\w+\)[sbt]|%[sbt]")
_INSERT_COLUMNS = re.compile(
    r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+[^\s(]+\s*\(([^)]*)\)", re.IGNORECASE
)
_SYNTHETIC = re.compile(r"_\d+")
_CTAS_COLUMNS = re.compile(
    r"^(\s*CREATE\s+(?:\w+\s+)*?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[^\s(]+)\s*\([^()]*\)\s*(AS\b)",
    re.IGNORECASE,
)
# The statement's kind: its first keyword after any leading WITH ... clause (a rough read: the
# positional plan reads the statement properly).
_HEAD = re.compile(r"^\s*(?:WITH\b.*?\)\s*)?(INSERT|UPDATE|CREATE)\b", re.IGNORECASE | re.DOTALL)
# System catalogs are the database's own bookkeeping (drivers and SQLAlchemy query them on
# connect), never a dataset of the program: by schema, and by the name of an unqualified table.
_SYSTEM_SCHEMAS = {
    "postgres": {"pg_catalog", "information_schema"},
    "mysql": {"information_schema", "mysql", "performance_schema", "sys"},
    "mssql": {"sys", "information_schema"},
}
_SYSTEM_PREFIXES = {"postgres": "pg_", "sqlite": "sqlite_"}


def _is_system(table: Any, dialect: str) -> bool:
    schema = (table.schema or "").lower()
    if schema in _SYSTEM_SCHEMAS.get(dialect, ("information_schema",)):
        return True
    prefix = _SYSTEM_PREFIXES.get(dialect)
    return prefix is not None and not table.schema and table.name.lower().startswith(prefix)


@dataclass(frozen=True, slots=True)
class Analysis:
    """What a statement reads and writes; ``error`` is set when the parser could not read it."""

    inputs: tuple[LineageDataset, ...]
    outputs: tuple[LineageDataset, ...]
    error: str | None = None
    # The known-columns epoch this analysis read (None: it read none): stale when it moved.
    schema_epoch: int | None = None
    # What the statement teaches of its tables' columns: (name, columns), None to forget.
    ddl: tuple[tuple[str, tuple[str, ...] | None], ...] = ()


@dataclass(frozen=True, slots=True)
class SqlStats:
    """Counters of the SQL analysis since the process started (or :func:`clear_cache`).

    ``unparseable``: distinct statements the parser could not read (each is skipped: it yields no
    datasets); ``parsed``: distinct statements read; ``cache_hits``: executions answered from the
    cache; ``parse_seconds``: time spent parsing, all on first sight of a statement.
    """

    parsed: int
    unparseable: int
    cache_hits: int
    cached: int
    parse_seconds: float


_EMPTY = Analysis((), ())


class _Cache:
    __slots__ = ("hits", "lock", "parse_ns", "parsed", "pending", "store", "unparseable")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.store: OrderedDict[tuple[str, Target, str], Analysis] = OrderedDict()
        # Statements being parsed now, by key: threads meeting one wait for its parse.
        self.pending: dict[tuple[str, Target, str], threading.Event] = {}
        self.hits = 0
        self.parsed = 0
        self.unparseable = 0
        self.parse_ns = 0


_CACHE = _Cache()


def sql_stats() -> SqlStats:
    """The SQL analysis counters: how many statements were parsed, or could not be."""
    c = _CACHE
    with c.lock:
        return SqlStats(c.parsed, c.unparseable, c.hits, len(c.store), c.parse_ns / 1e9)


def clear_cache() -> None:
    """Forget every analysed statement and every table's known columns, and reset the counters
    (tests, benchmarks)."""
    c = _CACHE
    with c.lock:
        c.store.clear()
        c.hits = c.parsed = c.unparseable = c.parse_ns = 0
    SCHEMAS.clear()


def analyze(statement: str, target: Target, producer: str) -> Analysis:
    """The datasets ``statement`` reads and writes on ``target``: cached, never raises.

    The cache is the process's: every thread and connection to the same target shares it. When
    several threads meet a new statement at once, one parses it and the others wait for its
    result (up to :data:`_WAIT_SECONDS`; past that, they parse it themselves rather than stall
    the application), so a statement is parsed once per process.
    """
    key = (statement, target, producer)
    c = _CACHE
    with c.lock:
        found = c.store.get(key)
        # stale when it read the columns known then, and those have changed since
        if found is not None and (
            found.schema_epoch is None or found.schema_epoch == SCHEMAS.epoch
        ):
            c.store.move_to_end(key)
            c.hits += 1
            if not found.ddl:
                return found
        else:
            found = None
            pending = c.pending.get(key)
            if pending is None:
                c.pending[key] = threading.Event()
    if found is not None:  # a DDL statement run again teaches (or unteaches) again
        SCHEMAS.apply(target.namespace, found.ddl)
        return found
    if pending is not None:  # another thread is parsing it: its answer, not a second parse
        if pending.wait(_WAIT_SECONDS):
            with c.lock:
                found = c.store.get(key)
                if found is not None:
                    c.hits += 1
                    return found
        return _parse(statement, target, producer, key, owner=False)
    return _parse(statement, target, producer, key, owner=True)


def _parse(
    statement: str, target: Target, producer: str, key: tuple[str, Target, str], *, owner: bool
) -> Analysis:
    c = _CACHE
    try:
        started = time.perf_counter_ns()
        try:
            result = _analyze(statement, target, producer)
        except Exception as exc:  # noqa: BLE001 - a parser bug must not reach the application
            result = Analysis((), (), f"{type(exc).__name__}: {exc}")
        elapsed = time.perf_counter_ns() - started
        with c.lock:
            c.parse_ns += elapsed
            if result.error is None:
                c.parsed += 1
            else:
                c.unparseable += 1
                _LOG.debug(
                    "SQL not understood, no lineage from it: %s (%.200s)", result.error, statement
                )
            c.store[key] = result
            if len(c.store) > CACHE_SIZE:
                c.store.popitem(last=False)
        if result.ddl:
            SCHEMAS.apply(target.namespace, result.ddl)
    finally:
        if owner:  # waiters wake (even if the parse was interrupted: they parse themselves)
            with c.lock:
                done = c.pending.pop(key, None)
            if done is not None:
                done.set()
    return result


def _parser_text(statement: str, target: Target) -> str:
    """The statement with driver placeholders the parser's dialect reads."""
    if "%" not in statement:
        return statement
    if target.dollar_params:
        counter = iter(range(1, 1 << 30))
        return _PERCENT_PARAM.sub(
            lambda m: "%" if m.group(0) == "%%" else f"${next(counter)}", statement
        )
    return _PERCENT_PARAM.sub(lambda m: "%" if m.group(0) == "%%" else "?", statement)


def _analyze(statement: str, target: Target, producer: str) -> Analysis:
    if len(statement) > _MAX_STATEMENT:
        return Analysis((), (), f"statement longer than {_MAX_STATEMENT} characters")
    from openlineage_sql import parse

    text = _parser_text(statement, target)
    meta = parse([text], dialect=target.dialect)
    errors = list(meta.errors)
    if errors and not meta.in_tables and not meta.out_tables:
        # CREATE TABLE t (a, b) AS SELECT ...: the parser reads it without the column list
        # (the positional plan reads the list from the statement itself).
        bare, found = _CTAS_COLUMNS.subn(r"\1 \2", text, count=1)
        if found:
            meta = parse([bare], dialect=target.dialect)
            errors = list(meta.errors)
    if errors and not meta.in_tables and not meta.out_tables:
        return Analysis((), (), str(errors[0].message))
    if not meta.in_tables and not meta.out_tables:
        return _EMPTY
    names: dict[tuple[str, str], None] = {}
    inputs = _datasets(meta.in_tables, target, names)
    outputs = _datasets(meta.out_tables, target, names)
    epoch: int | None = None
    created: tuple[str, ...] | None = None
    if len(outputs) == 1:
        epoch = SCHEMAS.epoch  # read before the columns it knows
        facets, created, dependent = _output_facets(
            statement, text, meta, target, producer, inputs, outputs[0].name
        )
        if not dependent:
            epoch = None
        if facets:
            only = outputs[0]
            outputs = (LineageDataset(only.namespace, only.name, facets),)
    ddl = _ddl(text, target, inputs, outputs, created)
    return Analysis(inputs, outputs, str(errors[0].message) if errors else None, epoch, ddl)


def _ddl(
    text: str,
    target: Target,
    inputs: tuple[LineageDataset, ...],
    outputs: tuple[LineageDataset, ...],
    created: tuple[str, ...] | None,
) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """The columns a DDL statement teaches (CREATE TABLE) or makes unknown (ALTER, DROP)."""
    try:
        effect = ddl_effect(text, target.dialect, target.fold_case)
    except Exception as exc:  # noqa: BLE001 - what is known of the tables is forgotten
        _LOG.debug("DDL not read: %r (%.200s)", exc, text)
        effect = "drop", ()
    if effect is None:
        return ()
    kind, columns = effect
    if len(outputs) == 1 and kind == "learn":
        return ((outputs[0].name, columns),)
    if len(outputs) == 1 and kind == "as" and created is not None:
        return ((outputs[0].name, created),)
    # ALTER TABLE a RENAME TO b reads a (an input) and writes b; CREATE only its own table
    changed = (*inputs, *outputs) if kind == "drop" else outputs
    return tuple((d.name, None) for d in changed)


def _part(value: str | None, quoted: Any, target: Target) -> str | None:
    if value is None:
        return None
    return value.lower() if target.fold_case and not quoted else value


def table_name(table: Any, target: Target) -> str:
    """The dataset name of a parser ``DbTableMeta``: the parts the target's naming has, with the
    connection's database and default schema where the statement leaves them out."""
    quotes = table.quote_style
    name = _part(table.name, quotes and quotes.name, target) or ""
    schema = _part(table.schema, quotes and quotes.schema, target)
    database = _part(table.database, quotes and quotes.database, target)
    if target.default_schema is None:  # database.table systems (MySQL): a qualifier is the db
        parts = [database or schema or target.database, name]
    else:
        parts = [database or target.database, schema or target.default_schema, name]
    return ".".join(p for p in parts if p)


def _column(name: str, target: Target) -> str:
    return name.lower() if target.fold_case else name


def _datasets(
    tables: Iterable[Any], target: Target, seen: dict[tuple[str, str], None]
) -> tuple[LineageDataset, ...]:
    out: list[LineageDataset] = []
    local: set[str] = set()
    for table in tables:
        if _is_system(table, target.dialect):
            continue
        name = table_name(table, target)
        if not name or name in local:
            continue
        local.add(name)
        seen[(target.namespace, name)] = None
        out.append(LineageDataset(target.namespace, name))
    return tuple(out)


def _insert_columns(statement: str, target: Target) -> list[str] | None:
    found = _INSERT_COLUMNS.match(statement)
    if found is None:
        return None
    columns = []
    for raw in found.group(1).split(","):
        col = raw.strip()
        if not col:
            return None
        quoted = col[0] in '"`['
        col = col.strip('"`[]')
        columns.append(col.lower() if target.fold_case and not quoted else col)
    return columns


def _output_facets(
    statement: str,
    text: str,
    meta: Any,
    target: Target,
    producer: str,
    inputs: tuple[LineageDataset, ...],
    output: str,
) -> tuple[dict[str, Any], tuple[str, ...] | None, bool]:
    """``schema`` and ``columnLineage`` of the one output, the columns a ``CREATE TABLE AS``
    gives its table (None: not all known), and whether known columns were read.

    Input fields only of tables the statement names, never of a CTE or alias the parser could
    not resolve. INSERT, UPDATE and CREATE TABLE AS map expressions to columns by position
    (:mod:`._columns`); a statement of those kinds that is not read so gets no column lineage
    (rather than names that may be wrong); others keep the parser's output names."""
    known = {d.name for d in inputs} | {output}
    namespace = target.namespace
    source = None
    if len(inputs) == 1:
        in_columns = SCHEMAS.get(namespace, inputs[0].name)
        if in_columns is not None:
            source = (_column(meta.in_tables[0].name, target), in_columns)
    head = _HEAD.match(text)
    kind = head.group(1).upper() if head else ""
    target_columns = SCHEMAS.get(namespace, output) if kind == "INSERT" else None
    try:
        found = plan(text, target.dialect, target.fold_case, target_columns, source)
    except Exception as exc:  # noqa: BLE001 - a bug here loses column lineage, not the tables
        _LOG.debug("statement not read for column lineage: %r (%.200s)", exc, statement)
        found = None
        kind = kind or "?"  # no guess from the parser's names either
    columns = _insert_columns(statement, target) if kind == "INSERT" else None
    if found is not None:
        dependent = found.schema_dependent
    else:  # not read: it may be once a table's columns are known (``*``, no column list)
        dependent = "*" in text or (kind == "INSERT" and columns is None)
    facets: dict[str, Any] = {}
    created = found.created if found is not None else None
    if columns or created:
        facets["schema"] = {
            "_producer": producer,
            "_schemaURL": SCHEMA_FACET_URL,
            "fields": [{"name": col} for col in (columns or created or ())],
        }
    if found is not None:
        fields = _positional_fields(found, target, known)
    elif kind in ("INSERT", "UPDATE", "?"):
        fields = {}
    else:
        fields = _named_fields(meta.column_lineage, target, known)
    if fields:
        facets["columnLineage"] = {
            "_producer": producer,
            "_schemaURL": COLUMN_LINEAGE_FACET_URL,
            "fields": fields,
        }
    return facets, created, dependent


def _input_field(source: Any, target: Target, known: set[str]) -> dict[str, Any] | None:
    if source.origin is None:
        return None
    name = table_name(source.origin, target)
    if name not in known:
        return None
    return {"namespace": target.namespace, "name": name, "field": _column(source.name, target)}


def _named_fields(lineage: Iterable[Any], target: Target, known: set[str]) -> dict[str, Any]:
    """The parser's own output names (CREATE TABLE AS it could not map by position, MERGE)."""
    fields: dict[str, Any] = {}
    for edge in lineage:
        column = _column(edge.descendant.name, target)
        if _SYNTHETIC.fullmatch(column):
            continue
        sources = [f for f in (_input_field(s, target, known) for s in edge.lineage) if f]
        if sources:
            fields[column] = {"inputFields": sources}
    return fields


def _positional_fields(found: Plan, target: Target, known: set[str]) -> dict[str, Any]:
    """Each written column's input fields: the parse of the plan's rewritten query gives those
    of each expression (by its alias), the plan which column it writes and how. A column that
    several branches (UNION, ...) write has the input fields of each, and an input field read
    differently by two branches both transformations."""
    if not found.outputs:
        return {}
    from openlineage_sql import parse

    by_alias = {
        edge.descendant.name: edge.lineage
        for edge in parse([found.query], dialect=target.dialect).column_lineage
        if edge.descendant.name.startswith(ALIAS_PREFIX)
    }
    fields: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for out in found.outputs:
        transformation: dict[str, Any] = {"type": "DIRECT", "subtype": out.subtype}
        if out.description:
            transformation["description"] = out.description
        transformation["masking"] = out.masking
        column = fields.setdefault(out.column, {})
        for source in by_alias.get(out.alias, ()):
            field = _input_field(source, target, known)
            if field is None:
                continue
            have = column.setdefault((field["name"], field["field"]), field)
            transformations = have.setdefault("transformations", [])
            if transformation not in transformations:
                transformations.append(transformation)
    return {
        name: {"inputFields": list(sources.values())} for name, sources in fields.items() if sources
    }
