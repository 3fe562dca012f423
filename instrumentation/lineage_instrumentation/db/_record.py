"""Where discovered datasets go: into the current run, or into a run per database transaction.

Inside a lineage run (a ``@track_lineage`` function, a consumed message, or any span that is a
run), a statement's datasets join that run, each once. Outside any run nothing is recorded,
unless the instrumentor's ``outside_run`` is ``run_per_transaction``: then the first statement of
a database transaction opens a run of the program's job, and the transaction's end closes it
(commit: COMPLETE; rollback, or a statement that failed: FAIL; still open at exit: ABORT). A
statement outside a transaction (autocommit) is a run of its own. Two statements of one run that
write (or read) the same table give one dataset with their facets merged (:mod:`._merge`).

Everything here runs on the application's thread and never raises into it: a failure of the
instrumentation is logged once per kind and the statement goes on without lineage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from lineage_instrumentation.config import DbInstrumentationConfig
from lineage_instrumentation.db._merge import merge_datasets
from lineage_instrumentation.db._naming import Target
from lineage_instrumentation.db._sql import Analysis, analyze
from lineage_instrumentation.instrumentor import register_exit_hook
from lineage_instrumentation.instrumentor import warn_once as log_once
from lineage_instrumentation.jobs import job_type_facet, program_job_name
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.models.dataset import LineageDataset
from lineage_sdk.sdk.provider import STATE, LineageSDK
from lineage_sdk.sdk.runs import CURRENT_RUN, LineageRun
from lineage_sdk.sdk.scope import RunScope
from lineage_sdk.sdk.suppression import is_instrumentation_suppressed

__all__ = [
    "EXTRACTION_ERROR_FACET_URL",
    "DbKind",
    "TransactionRolledBack",
    "add_datasets",
    "current_lineage_run",
    "record_analysis",
    "seen_in_current_run",
    "statement_key",
    "warn_once",
]

_LOG = logging.getLogger("lineage_instrumentation.db")
EXTRACTION_ERROR_FACET_URL = (
    "https://openlineage.io/spec/facets/1-1-0/ExtractionErrorRunFacet.json"
    "#/$defs/ExtractionErrorRunFacet"
)
_MAX_SCANNED = 256  # datasets compared per add: a run with more keeps memory bounded
_MAX_RUN_MEMOS = 1024
_MAX_STATEMENTS_PER_RUN = 1000
_MAX_ERRORS_LISTED = 10
_EMPTY: Mapping[str, Any] = {}
_warned: set[str] = set()


class TransactionRolledBack(Exception):
    """The reason a transaction's run FAILs when the application rolled the transaction back."""


def warn_once(what: str, exc: BaseException) -> None:
    """Log a failure of the instrumentation itself once per kind: lineage is lost, not the app."""
    log_once(_LOG, _warned, "database", what, exc)


def current_lineage_run(sdk: LineageSDK) -> LineageRun | None:
    """The innermost run: the SDK's own (``current_run()``), or a span of any tracer that is one."""
    run = CURRENT_RUN.get()
    if run is not None:
        return run
    span_id = trace.get_current_span().get_span_context().span_id
    return sdk.processor.active_run(span_id) if span_id else None


def _other_spans(sdk: LineageSDK) -> bool:
    """Whether a span of another tracer may be the current run (any run open at all)."""
    return sdk.processor.active_run_count() > 0


def _add_unique(run: LineageRun, datasets: tuple[LineageDataset, ...], outputs: bool) -> None:
    for dataset in datasets:
        existing = run.outputs if outputs else run.inputs
        if len(existing) > _MAX_SCANNED:
            return
        for index, have in enumerate(existing):
            if have is dataset or (
                have.name == dataset.name and have.namespace == dataset.namespace
            ):
                merged = merge_datasets(have, dataset)
                if merged is not None:
                    _replace(run, outputs, index, merged)
                break
        else:
            if outputs:
                run.add_output(dataset)
            else:
                run.add_input(dataset)


def _replace(run: LineageRun, outputs: bool, index: int, dataset: LineageDataset) -> None:
    """Put ``dataset`` at ``index`` of the run's outputs (or inputs). A declared tuple becomes a
    list first, as ``add_output`` does; the worker only reads the lists when the run ends."""
    with _MEMOS_LOCK:
        current = run.outputs if outputs else run.inputs
        if not isinstance(current, list):
            current = list(current)
            if outputs:
                run.outputs = current
            else:
                run.inputs = current
        current[index] = dataset


def add_datasets(
    run: LineageRun, inputs: tuple[LineageDataset, ...], outputs: tuple[LineageDataset, ...]
) -> None:
    """Add datasets the run does not have yet; one it has (same namespace and name) gets the
    new one's facets merged in (the union of ``columnLineage`` fields and ``schema`` columns)."""
    if inputs:
        _add_unique(run, inputs, False)
    if outputs:
        _add_unique(run, outputs, True)


class _RunMemo:
    """What one run has seen: its statements' keys (so a repeated one costs a set lookup) and the
    statements the parser could not read (its ``extractionError`` facet)."""

    __slots__ = ("failed", "seen")

    def __init__(self) -> None:
        self.seen: set[object] = set()
        self.failed: list[dict[str, Any]] = []


_MEMOS: dict[str, _RunMemo] = {}
_MEMOS_LOCK = threading.Lock()


def _memo(run: LineageRun) -> _RunMemo:
    memo = _MEMOS.get(run.run_id)
    if memo is None:
        with _MEMOS_LOCK:
            memo = _MEMOS.get(run.run_id)
            if memo is None:
                memo = _MEMOS[run.run_id] = _RunMemo()
                while len(_MEMOS) > _MAX_RUN_MEMOS:
                    del _MEMOS[next(iter(_MEMOS))]
    return memo


def statement_key(statement: str, target: Target) -> int:
    """A statement's key in a run's memo. Targets are interned, so their id names one for good;
    the memo keeps the hash alone, not the text (runs of dynamic SQL would otherwise hold every
    statement they ran)."""
    return hash((statement, id(target)))


def seen_in_current_run(statement: str, target: Target) -> bool:
    """True when the current run has recorded ``statement`` already: the drivers' fast path."""
    run = CURRENT_RUN.get()
    if run is None:
        return False
    memo = _MEMOS.get(run.run_id)
    return memo is not None and hash((statement, id(target))) in memo.seen


def record_analysis(run: LineageRun, key: object, analysis: Analysis, statement: str) -> None:
    """Add what a statement read and wrote to ``run``, once per distinct statement per run."""
    memo = _memo(run)
    if key in memo.seen:
        return
    if len(memo.seen) < _MAX_STATEMENTS_PER_RUN:
        memo.seen.add(key)
    add_datasets(run, analysis.inputs, analysis.outputs)
    if analysis.error is not None and len(memo.failed) < _MAX_ERRORS_LISTED:
        memo.failed.append(
            {
                "errorMessage": analysis.error,
                "task": statement[:1000],
                "taskNumber": len(memo.seen) - 1,
            }
        )
        sdk = STATE.sdk
        producer = sdk.builder.producer if sdk is not None else ""
        run.add_run_facets(
            {
                "extractionError": {
                    "_producer": producer,
                    "_schemaURL": EXTRACTION_ERROR_FACET_URL,
                    "totalTasks": len(memo.seen),
                    "failedTasks": len(memo.failed),
                    "errors": list(memo.failed),
                }
            }
        )


class _TransactionRun:
    __slots__ = ("error", "scope")

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        self.error: BaseException | None = None


class DbKind:
    """One database instrumentor's live state: on or off, its options, its open transactions.

    Options given to ``instrument()`` win; otherwise ``[lineage.instrumentation.<name>]`` is read
    once per configured SDK.
    """

    __slots__ = (
        "_job_facets",
        "_lock",
        "_resolved",
        "active",
        "job_name_override",
        "name",
        "outside_run_override",
        "transactions",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.active = False
        self.outside_run_override: str | None = None
        self.job_name_override: str | None = None
        self._resolved: tuple[LineageSDK | None, str, str] = (None, "ignore", "")
        self._job_facets: dict[str, Mapping[str, Any]] = {}
        self.transactions: dict[object, _TransactionRun] = {}
        self._lock = threading.Lock()

    def configure(self, outside_run: Any, job_name: Any, sdk: LineageSDK | None) -> None:
        """Check the ``instrument()`` options and the configuration table; ConfigError if bad."""
        source = f"{self.name} instrument()"
        if outside_run is not None and outside_run not in ("ignore", "run_per_transaction"):
            raise ConfigError(
                f"instrumentation.{self.name}.outside_run",
                outside_run,
                "ignore or run_per_transaction",
                source=source,
            )
        if job_name is not None and (not isinstance(job_name, str) or not job_name):
            raise ConfigError(
                f"instrumentation.{self.name}.job_name",
                job_name,
                "a non-empty string",
                source=source,
            )
        self.outside_run_override = outside_run
        self.job_name_override = job_name
        self._resolved = (None, "ignore", "")
        if sdk is not None:
            self.settings(sdk, strict=True)

    def settings(self, sdk: LineageSDK, *, strict: bool = False) -> tuple[str, str]:
        """``(outside_run, job_name)`` for ``sdk``."""
        cached_sdk, mode, job = self._resolved
        if cached_sdk is sdk:
            return mode, job
        try:
            cfg = sdk.config.section(f"instrumentation.{self.name}", DbInstrumentationConfig)
            mode, job = cfg.outside_run, cfg.job_name or ""
        except ConfigError as exc:
            if strict:
                raise
            warn_once(f"reading [lineage.instrumentation.{self.name}]", exc)
            mode, job = "ignore", ""
        mode = self.outside_run_override or mode
        job = self.job_name_override or job or program_job_name()
        self._resolved = (sdk, mode, job)
        return mode, job

    # --- statements ----------------------------------------------------------------------------

    def idle(self) -> bool:
        """True when nothing could be recorded now: no SDK, or outside any run with
        ``outside_run = "ignore"``. The drivers' cheapest check, before anything else."""
        return CURRENT_RUN.get() is None and self.quiet_outside_runs()

    def quiet_outside_runs(self) -> bool:
        """True when a statement outside ``current_run()`` records nothing: no SDK, or
        ``outside_run = "ignore"`` and no span of another tracer is a run."""
        sdk = STATE.sdk
        if sdk is None:
            return True
        resolved = self._resolved
        return (
            resolved[0] is sdk
            and resolved[1] == "ignore"
            and not sdk.processor.active_run_count()  # _other_spans, inline: the hot path
        )

    def statement(
        self,
        connection: object,
        statement: str,
        target: Target | None,
        error: BaseException | None = None,
        in_transaction: Callable[[Any], bool] | None = None,
    ) -> None:
        """A SQL statement ran on ``connection`` (``error``: what the driver raised); its
        datasets come from the parser. Never raises.

        ``in_transaction(connection)`` says, after a statement, whether a transaction is still
        open (only asked when a run per transaction is kept; None: assume it is).
        """
        if target is None:
            self.observe(connection, None, None, statement, error, in_transaction)
            return
        try:
            sdk = STATE.sdk
            if sdk is None:
                return
            run = CURRENT_RUN.get()
            if run is None:
                resolved = self._resolved
                if resolved[0] is sdk and resolved[1] == "ignore" and not _other_spans(sdk):
                    return  # outside any run, nothing to record
            key = statement_key(statement, target)
            if run is not None and error is None:  # a run that has seen this statement already
                memo = _MEMOS.get(run.run_id)
                if memo is not None and key in memo.seen:
                    return
        except Exception as exc:  # noqa: BLE001 - telemetry never breaks the statement
            warn_once("recording a statement", exc)
            return
        self.observe(
            connection,
            key,
            lambda producer: analyze(statement, target, producer),
            statement,
            error,
            in_transaction,
        )

    def observe(
        self,
        transaction: object,
        key: object,
        analysis: Callable[[str], Analysis] | None,
        statement: str,
        error: BaseException | None = None,
        in_transaction: Callable[[Any], bool] | None = None,
    ) -> None:
        """An operation ran in ``transaction`` (a connection, or a session's key); ``analysis``
        (given the producer URI) tells its datasets, ``key`` identifies it within a run. Never
        raises."""
        try:
            sdk = STATE.sdk
            if sdk is None or is_instrumentation_suppressed():
                return
            run = current_lineage_run(sdk)
            if run is not None:
                if error is None and analysis is not None:
                    memo = _MEMOS.get(run.run_id)
                    if memo is None or key not in memo.seen:
                        record_analysis(run, key, analysis(sdk.builder.producer), statement)
                return
            if self.settings(sdk)[0] != "run_per_transaction":
                return
            tx = self._transaction(transaction, sdk)
            if error is None and analysis is not None:
                record_analysis(tx.scope.run, key, analysis(sdk.builder.producer), statement)
            elif error is not None and tx.error is None:
                tx.error = error
            if in_transaction is not None and not in_transaction(transaction):
                self.end_transaction(transaction, committed=True)  # FAIL if it had an error
        except Exception as exc:  # noqa: BLE001 - telemetry never breaks the statement
            warn_once("recording a statement", exc)

    def _transaction(self, key: object, sdk: LineageSDK) -> _TransactionRun:
        tx = self.transactions.get(key)
        if tx is None:
            _mode, job = self.settings(sdk)
            producer = sdk.builder.producer
            facets = self._job_facets.get(producer)
            if facets is None:
                facets = self._job_facets[producer] = {
                    "jobType": job_type_facet(producer, "BATCH", "QUERY")
                }
            scope = RunScope(sdk, job, None, (), (), _EMPTY, facets, span_kind=SpanKind.CLIENT)
            tx = _TransactionRun(scope)
            with self._lock:
                if not self.transactions:
                    _register_exit_hook()
                self.transactions[key] = tx
        return tx

    def end_transaction(
        self, connection: object, *, committed: bool, error: BaseException | None = None
    ) -> None:
        """The transaction of ``connection`` ended: end its run, if one is open. Never raises."""
        try:
            with self._lock:
                tx = self.transactions.pop(connection, None)
            if tx is None:
                return
            failure = error or tx.error
            if failure is None and not committed:
                failure = TransactionRolledBack("the transaction was rolled back")
            tx.scope.end(failure)
        except Exception as exc:  # noqa: BLE001
            warn_once("ending a transaction's run", exc)

    def end_all(self) -> None:
        """End every open transaction's run as ABORT: at exit, or when uninstrumented.

        The database has not committed these transactions (it rolls back one whose connection
        the exiting program drops), so COMPLETE would claim writes that never happened; FAIL
        would claim an error nobody saw. ABORT is OpenLineage's word for a run that was abandoned
        (a transaction that already saw a failed statement still ends as FAIL)."""
        with self._lock:
            open_runs, self.transactions = list(self.transactions.values()), {}
        for tx in open_runs:
            try:
                if tx.error is not None:
                    tx.scope.end(tx.error)
                    continue
                sdk = STATE.sdk
                run = tx.scope.run
                if sdk is not None:
                    sdk.processor.abort_run(run.span_id, time.time_ns())
                tx.scope.span.end()  # the trace's span ends too; the processor queues nothing
            except Exception as exc:  # noqa: BLE001
                warn_once("ending a transaction's run", exc)


_KINDS: list[DbKind] = []
_EXIT_HOOK: list[bool] = []


def _end_everything() -> None:
    for kind in _KINDS:
        kind.end_all()


def _register_exit_hook() -> None:
    if not _EXIT_HOOK:
        _EXIT_HOOK.append(True)
        register_exit_hook(_end_everything)


def new_kind(name: str) -> DbKind:
    """The state object of the instrumentor ``name`` (one per instrumentor class)."""
    kind = DbKind(name)
    _KINDS.append(kind)
    return kind
