"""A misspelt exporter, store or instrumentor name is answered with the nearest real one
wherever the name is resolved: the configuration check, the SDK's exporter factory, the
collector's store factory and the instrumentors' selection (one helper,
``lineage_sdk.config.names``)."""

from __future__ import annotations

import logging

import pytest

from lineage_instrumentation.auto import load_instrumentors
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.config.names import (
    EXPORTER_GROUP,
    INSTRUMENTOR_GROUP,
    STORE_GROUP,
    check_component_names,
    closest,
    component_names,
    did_you_mean,
)
from lineage_sdk.config.reference import render
from lineage_sdk.config.schema import LineageConfig
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.exporters import create_exporter


def test_closest_and_did_you_mean():
    assert closest("rabbitmg", ["console", "rabbitmq", "http"]) == "rabbitmq"
    assert closest("zzzz", ["console", "rabbitmq"]) is None
    assert did_you_mean("grahp", ["graph", "sql"]) == " (did you mean 'graph'?)"
    assert did_you_mean("zzzz", ["graph", "sql"]) == ""


def test_component_names_come_from_entry_points():
    assert {"console", "file", "memory", "rabbitmq", "http"} <= set(component_names(EXPORTER_GROUP))
    assert {"sql", "document", "graph", "logging"} <= set(component_names(STORE_GROUP))
    assert {"pika", "aio_pika", "psycopg"} <= set(component_names(INSTRUMENTOR_GROUP))


def test_the_applications_own_exporter_error_says_did_you_mean():
    with pytest.raises(ConfigError) as info:
        create_exporter("rabbitmg", LineageConfig())
    message = str(info.value)
    assert "lineage.exporters='rabbitmg'" in message
    assert "unknown exporter 'rabbitmg' (did you mean 'rabbitmq'?)" in message
    assert "one of console, file, http, memory, rabbitmq" in message


def test_validating_every_table_checks_the_exporter_names():
    LineageConfig(exporters=["console", "rabbitmq"]).validate_sections()
    with pytest.raises(ConfigError, match=r"unknown exporter 'htp' \(did you mean 'http'\?\)"):
        LineageConfig(exporters=["console", "htp"]).validate_sections()


@pytest.mark.parametrize(
    ("store", "key", "near"),
    [
        ({"backend": "sqll"}, "store.backend", "sql"),
        ({"backend": "composite", "backends": ["sql", "documnet"]}, "store.backends", "document"),
    ],
)
def test_the_store_factory_says_did_you_mean(store, key, near):
    with pytest.raises(ConfigError) as info:
        LineageManager(LineageConfig(store=store)).build()
    assert info.value.key == key
    assert f"(did you mean {near!r}?)" in str(info.value)
    assert "composite" in str(info.value)  # no entry point, still a name the user may give


def test_an_unknown_name_with_no_near_one_lists_the_names():
    with pytest.raises(ConfigError) as info:
        check_component_names("exporters", ["kafka"], group=EXPORTER_GROUP)
    assert "did you mean" not in str(info.value)
    assert "unknown exporter 'kafka'; one of console" in str(info.value)


def test_a_misspelt_disabled_instrumentor_is_logged_with_did_you_mean(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_instrumentation"):
        load_instrumentors(["all"])  # everything disabled: nothing to say
        assert not caplog.records
        # every real name (so nothing is patched here) and a misspelt one, which is named
        assert load_instrumentors([*component_names(INSTRUMENTOR_GROUP), "Pikka"]) == []
    [record] = [r for r in caplog.records if "did you mean" in r.getMessage()]
    assert "unknown instrumentor 'pikka' (did you mean 'pika'?)" in record.getMessage()
    assert "disables nothing" in record.getMessage()


def test_the_reference_says_never_logged_once_per_secret():
    rows = [line for line in render().splitlines() if "never logged" in line.lower()]
    assert rows
    assert all(row.lower().count("never logged") == 1 for row in rows), rows
