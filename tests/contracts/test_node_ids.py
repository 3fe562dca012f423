"""Node ids (``dataset:<namespace>:<name>``) round-trip for the naming spec's namespaces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage_sdk.collector.store import node_id, parse_node_id


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dataset:postgres://h:5432:db.s.t", ("DATASET", "postgres://h:5432", "db.s.t")),
        (
            "dataset:s3://lake:reports/daily_revenue",
            ("DATASET", "s3://lake", "reports/daily_revenue"),
        ),
        ("dataset:file:///tmp:x", ("DATASET", "file:///tmp", "x")),
        ("dataset:kafka://k:9092:orders", ("DATASET", "kafka://k:9092", "orders")),
        (
            "dataset:rabbitmq://127.0.0.1:5672:ex:rk",
            ("DATASET", "rabbitmq://127.0.0.1:5672", "ex:rk"),
        ),
        ("job:my-ns:a:b", ("JOB", "my-ns", "a:b")),
        ("job:ns:name with spaces", ("JOB", "ns", "name with spaces")),
    ],
)
def test_parse_node_id(text, expected):
    assert parse_node_id(text) == expected


@pytest.mark.parametrize(
    "bad", ["", "dataset", "dataset:", "table:ns:n", "job:ns", "dataset:s3://lake", "job::n"]
)
def test_bad_node_ids_are_rejected_with_a_reason(bad):
    with pytest.raises(ValueError, match="node id"):
        parse_node_id(bad)


hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True)
names = st.text(min_size=1, max_size=30).filter(lambda s: not s[0].isdigit() and "\x00" not in s)


@given(
    scheme=st.sampled_from(["postgres", "kafka", "s3", "rabbitmq"]),
    host=hosts,
    port=st.one_of(st.none(), st.integers(1, 65535)),
    name=names,
)
def test_scheme_namespaces_round_trip(scheme, host, port, name):
    namespace = f"{scheme}://{host}" + (f":{port}" if port else "")
    assert parse_node_id(node_id("DATASET", namespace, name)) == ("DATASET", namespace, name)


@given(
    namespace=st.from_regex(r"[a-zA-Z0-9_.-]{1,20}", fullmatch=True),
    name=st.text(min_size=1, max_size=30),
)
def test_plain_namespaces_round_trip(namespace, name):
    assert parse_node_id(node_id("JOB", namespace, name)) == ("JOB", namespace, name)
