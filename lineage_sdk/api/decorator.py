"""``@track_lineage``: record each call of a function as an OpenLineage run."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar, overload

from lineage_sdk.models.dataset import LineageDataset, facets_to_dicts
from lineage_sdk.sdk.provider import STATE, get_sdk
from lineage_sdk.sdk.scope import RunScope

__all__ = ["track_lineage"]

P = ParamSpec("P")
R = TypeVar("R")


def _split_facets(
    facets: Mapping[str, Any] | None, owner: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``facets=`` holds run and job facets together; the schema URL tells which is which."""
    run_facets: dict[str, Any] = {}
    job_facets: dict[str, Any] = {}
    for key, facet in facets_to_dicts(facets, owner=owner).items():
        schema = str(facet.get("_schemaURL", ""))
        (job_facets if schema.rstrip("/").endswith("JobFacet") else run_facets)[key] = facet
    return run_facets, job_facets


def _datasets(
    values: Iterable[LineageDataset] | None, what: str, job_name: str
) -> tuple[LineageDataset, ...]:
    if values is None:
        return ()
    if isinstance(values, LineageDataset):
        return (values,)
    out = tuple(values)
    for value in out:
        if not isinstance(value, LineageDataset):
            raise TypeError(
                f"track_lineage(job_name={job_name!r}): {what} must be LineageDataset objects, "
                f"got {type(value).__name__}"
            )
    return out


@overload
def track_lineage(
    job_name: str,
    inputs: Iterable[LineageDataset] | None = ...,
    outputs: Iterable[LineageDataset] | None = ...,
    job_namespace: str | None = ...,
    facets: Mapping[str, Any] | None = ...,
    *,
    run_facets: Mapping[str, Any] | None = ...,
    job_facets: Mapping[str, Any] | None = ...,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


@overload
def track_lineage(
    job_name: Callable[P, R],
) -> Callable[P, R]: ...


def track_lineage(
    job_name: str | Callable[..., Any],
    inputs: Iterable[LineageDataset] | None = None,
    outputs: Iterable[LineageDataset] | None = None,
    job_namespace: str | None = None,
    facets: Mapping[str, Any] | None = None,
    *,
    run_facets: Mapping[str, Any] | None = None,
    job_facets: Mapping[str, Any] | None = None,
) -> Any:
    """Record every call of the decorated function as a lineage run of job ``job_name``.

    Works on functions, ``async def`` functions, generators and async generators, keeping their
    signature, name and docstring. Inside, ``current_run().add_output(...)`` adds datasets found at
    run time. Exceptions propagate unchanged after the FAIL event is recorded. With lineage
    disabled the wrapper costs one attribute check. Used bare (``@track_lineage``), the job is
    named after the function's qualified name.

    ``facets`` holds run and job facets together (a ``...JobFacet`` schema URL goes on the job);
    ``run_facets`` and ``job_facets`` say where explicitly, which a key used on both needs (the
    ``tags`` facet: ``TagsRunFacet`` and ``TagsJobFacet``). The explicit ones win on a clash.
    """
    if callable(job_name):
        func = job_name
        return track_lineage(f"{func.__module__}.{func.__qualname__}")(func)
    if not isinstance(job_name, str) or not job_name:
        raise ValueError(f"track_lineage: job_name must be a non-empty string, got {job_name!r}")
    if job_namespace is not None and (not isinstance(job_namespace, str) or not job_namespace):
        raise ValueError(
            f"track_lineage(job_name={job_name!r}): "
            "job_namespace must be a non-empty string or None"
        )
    input_sets = _datasets(inputs, "inputs", job_name)
    output_sets = _datasets(outputs, "outputs", job_name)
    owner = f"job {job_name}"
    split_run, split_job = _split_facets(facets, owner)
    all_run = {**split_run, **facets_to_dicts(run_facets, owner=f"run of {owner}")}
    all_job = {**split_job, **facets_to_dicts(job_facets, owner=owner)}
    name = job_name

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        def scope() -> RunScope | None:
            sdk = STATE.sdk or get_sdk()
            if sdk is None:
                return None
            return RunScope(sdk, name, job_namespace, input_sets, output_sets, all_run, all_job)

        if inspect.isasyncgenfunction(func):
            return functools.wraps(func)(_wrap_async_gen(func, scope))
        if inspect.isgeneratorfunction(func):
            return functools.wraps(func)(_wrap_gen(func, scope))
        if inspect.iscoroutinefunction(func):
            return functools.wraps(func)(_wrap_coroutine(func, scope))
        return functools.wraps(func)(_wrap_function(func, scope))

    return decorate


def _wrap_function(
    func: Callable[P, R], make_scope: Callable[[], RunScope | None]
) -> Callable[P, R]:
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            scope = make_scope()
        except Exception:  # noqa: BLE001 - lineage must never break the call
            scope = None
        if scope is None:
            return func(*args, **kwargs)
        return scope.call(func, *args, **kwargs)

    return wrapper


def _wrap_coroutine(
    func: Callable[..., Any], make_scope: Callable[[], RunScope | None]
) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            scope = make_scope()
        except Exception:  # noqa: BLE001
            scope = None
        if scope is None:
            return await func(*args, **kwargs)
        return await scope.acall(func, *args, **kwargs)

    return wrapper


def _wrap_gen(
    func: Callable[..., Generator[Any, Any, Any]], make_scope: Callable[[], RunScope | None]
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        gen = func(*args, **kwargs)
        try:
            scope = make_scope()
        except Exception:  # noqa: BLE001
            scope = None
        if scope is None:
            return (yield from gen)
        # The run is current only while the generator's own code runs, not between steps.
        send_value: Any = None
        throw: BaseException | None = None
        while True:
            scope.activate()
            try:
                value = gen.throw(throw) if throw is not None else gen.send(send_value)
            except StopIteration as stop:
                scope.deactivate()
                scope.end()
                return stop.value
            except BaseException as exc:
                scope.deactivate()
                scope.end(exc)
                raise
            scope.deactivate()
            throw = None
            try:
                send_value = yield value
            except GeneratorExit:
                gen.close()
                scope.end()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the consumer: forward it
                throw = exc
                send_value = None

    return wrapper


def _wrap_async_gen(
    func: Callable[..., AsyncGenerator[Any, Any]], make_scope: Callable[[], RunScope | None]
) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        agen = func(*args, **kwargs)
        try:
            scope = make_scope()
        except Exception:  # noqa: BLE001
            scope = None
        if scope is None:
            async for item in agen:
                yield item
            return
        send_value: Any = None
        throw: BaseException | None = None
        while True:
            scope.activate()
            try:
                if throw is not None:
                    value = await agen.athrow(throw)
                else:
                    value = await agen.asend(send_value)
            except StopAsyncIteration:
                scope.deactivate()
                scope.end()
                return
            except BaseException as exc:
                scope.deactivate()
                scope.end(exc)
                raise
            scope.deactivate()
            throw = None
            try:
                send_value = yield value
            except GeneratorExit:
                await agen.aclose()
                scope.end()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the consumer: forward it
                throw = exc
                send_value = None

    return wrapper
