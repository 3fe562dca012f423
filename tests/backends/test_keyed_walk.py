"""The one lineage walk (``collector.keyed.walk_keys``): pure logic over an edge step given by
hand, so plain dictionaries."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from lineage_sdk.collector.keyed import walk_keys
from lineage_sdk.collector.store import NodeType

#: (job, dataset, io): a chain src -> a -> [j1] -> b -> [j2] -> c, and j3 reading b.
EDGES = {
    ("j0", "src", "in"),
    ("j0", "a", "out"),
    ("j1", "a", "in"),
    ("j1", "b", "out"),
    ("j2", "b", "in"),
    ("j2", "c", "out"),
    ("j3", "b", "in"),
    ("j3", "d", "out"),
}


def step(end: NodeType, keys: Collection[str], io: Literal["in", "out"]) -> list[tuple[str, str]]:
    at = 0 if end == "JOB" else 1
    return sorted((job, ds) for job, ds, way in EDGES if way == io and (job, ds)[at] in keys)


def test_the_level_hook_hears_every_ways_reads_before_they_are_made() -> None:
    heard: list[tuple[NodeType, list[tuple[str, frozenset[str]]]]] = []
    made: list[tuple[NodeType, str, frozenset[str]]] = []

    def hook(end: NodeType, asks: list[tuple[Literal["in", "out"], set[str]]]) -> None:
        heard.append((end, [(io, frozenset(keys)) for io, keys in asks]))

    def recording(
        end: NodeType, keys: Collection[str], io: Literal["in", "out"]
    ) -> list[tuple[str, str]]:
        made.append((end, io, frozenset(keys)))
        return step(end, keys, io)

    plain = walk_keys(step, ("DATASET", "b"), "both", 3, None)
    hooked = walk_keys(recording, ("DATASET", "b"), "both", 3, None, before_step=hook)
    assert (hooked.jobs, hooked.datasets, hooked.edges) == (plain.jobs, plain.datasets, plain.edges)
    assert plain.jobs == {"j0", "j1", "j2", "j3"} and plain.datasets == {"src", "a", "b", "c", "d"}
    # The first step, from b: upstream reads its writers ("out"), downstream its readers ("in").
    assert heard[0] == ("DATASET", [("out", frozenset({"b"})), ("in", frozenset({"b"}))])
    # Every read made was heard first, in its step, and nothing heard went unread.
    steps, reads = iter(heard), iter(made)
    for end, asks in steps:
        assert [next(reads) for _ in asks] == [(end, io, keys) for io, keys in asks]
    assert next(reads, None) is None
