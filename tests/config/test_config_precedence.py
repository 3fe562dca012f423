"""Which source wins: defaults < TOML file < OPENLINEAGE_* < LINEAGE_* < overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage_sdk.config import LineageConfig, load_config
from lineage_sdk.exceptions import ConfigError

ISSUE_EXAMPLE = """\
[lineage]
enabled = true
collector_topic = "platform.lineage.events"
exporters = ["rabbitmq"]          # console | file | memory | rabbitmq | http, several allowed

[lineage.producer]
job_namespace = "my-service-ns"
producer_uri = "https://github.com/my-org/my-service"

[lineage.store]
backend = "composite"
backends = ["document", "graph"]

    [lineage.store.document]
    collection_name = "audit_lineage_events"
    document_connection_name = "default_mongo"

    [lineage.store.graph]
    graph_connection_name = "analytics_graph"

[lineage.connections.default_mongo]
uri = "mongodb://127.0.0.1:27017/lineage"
"""

FILE = """\
[lineage]
exporters = ["file"]
[lineage.producer]
job_namespace = "from-file"
[lineage.pipeline]
max_queue_size = 10
"""


def test_defaults_without_any_source():
    assert load_config(environ={}) == LineageConfig()


def test_issue_example_loads(write_toml):
    config = load_config(path=write_toml(ISSUE_EXAMPLE), environ={})
    assert config.producer.job_namespace == "my-service-ns"
    assert config.producer.producer_uri == "https://github.com/my-org/my-service"
    assert config.section("store").backend == "composite"
    assert config.section("store").backends == ["document", "graph"]
    assert config.section("store.document").collection_name == "audit_lineage_events"
    assert config.section("store.graph").graph_connection_name == "analytics_graph"
    assert config.named("connections")["default_mongo"].uri == "mongodb://127.0.0.1:27017/lineage"
    assert config.exporters == ["rabbitmq"]
    # keys the file does not set keep their defaults
    assert config.pipeline == LineageConfig().pipeline


@pytest.mark.parametrize(
    ("environ", "overrides", "expected"),
    [
        ({}, {}, "from-file"),
        ({"OPENLINEAGE_NAMESPACE": "from-ol"}, {}, "from-ol"),
        (
            {"OPENLINEAGE_NAMESPACE": "from-ol", "LINEAGE_PRODUCER_JOB_NAMESPACE": "from-env"},
            {},
            "from-env",
        ),
        (
            {"OPENLINEAGE_NAMESPACE": "from-ol", "LINEAGE_PRODUCER_JOB_NAMESPACE": "from-env"},
            {"producer.job_namespace": "from-override"},
            "from-override",
        ),
        ({}, {"lineage.producer.job_namespace": "from-override"}, "from-override"),
    ],
)
def test_precedence_chain(write_toml, environ, overrides, expected):
    config = load_config(path=write_toml(FILE), environ=environ, overrides=overrides)
    assert config.producer.job_namespace == expected
    assert config.pipeline.max_queue_size == 10  # untouched file keys survive higher layers


def test_layers_merge_key_by_key(write_toml):
    config = load_config(
        path=write_toml(FILE),
        environ={"LINEAGE_PIPELINE_OVERFLOW": "drop_oldest"},
        overrides={"pipeline.block_timeout_ms": 7},
    )
    assert config.pipeline.max_queue_size == 10
    assert config.pipeline.overflow == "drop_oldest"
    assert config.pipeline.block_timeout_ms == 7
    assert config.exporters == ["file"]


def test_env_overrides_file(write_toml):
    config = load_config(path=write_toml(FILE), environ={"LINEAGE_EXPORTERS": "console,memory"})
    assert config.exporters == ["console", "memory"]


def test_file_from_lineage_config_env(write_toml):
    path = write_toml(FILE, name="custom.toml")
    config = load_config(environ={"LINEAGE_CONFIG": str(path)})
    assert config.producer.job_namespace == "from-file"


def test_path_argument_beats_lineage_config(write_toml):
    chosen = write_toml(FILE, name="chosen.toml")
    other = write_toml('[lineage.producer]\njob_namespace = "other"\n', name="other.toml")
    config = load_config(path=chosen, environ={"LINEAGE_CONFIG": str(other)})
    assert config.producer.job_namespace == "from-file"


def test_lineage_toml_in_working_directory(monkeypatch, tmp_path):
    (tmp_path / "lineage.toml").write_text(FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_config(environ={}).producer.job_namespace == "from-file"
    other = tmp_path / "other.toml"
    other.write_text('[lineage.producer]\njob_namespace = "named"\n', encoding="utf-8")
    assert load_config(environ={"LINEAGE_CONFIG": str(other)}).producer.job_namespace == "named"


def test_missing_named_file_is_an_error(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(environ={"LINEAGE_CONFIG": str(missing)})
    message = str(info.value)
    assert str(missing) in message
    assert "does not exist" in message
    assert "LINEAGE_CONFIG" in message


def test_file_without_lineage_table_is_ignored(write_toml):
    path = write_toml("[tool.other]\nx = 1\n")
    assert load_config(path=path, environ={}) == LineageConfig()


def test_openlineage_url_selects_http_exporter():
    config = load_config(
        environ={
            "OPENLINEAGE_URL": "http://marquez:5000",
            "OPENLINEAGE_ENDPOINT": "api/v2/lineage",
            "OPENLINEAGE_API_KEY": "k3y",
        }
    )
    assert config.exporters == ["http"]
    assert config.section("http").url == "http://marquez:5000"
    assert config.section("http").endpoint == "api/v2/lineage"
    assert config.section("http").api_key == "k3y"


def test_openlineage_url_keeps_exporters_from_file(write_toml):
    config = load_config(path=write_toml(FILE), environ={"OPENLINEAGE_URL": "http://m:5000"})
    assert config.exporters == ["file"]
    assert config.section("http").url == "http://m:5000"


def test_openlineage_url_keeps_lineage_exporters():
    config = load_config(
        environ={"OPENLINEAGE_URL": "http://m:5000", "LINEAGE_EXPORTERS": "console,http"}
    )
    assert config.exporters == ["console", "http"]


def test_lineage_http_url_beats_openlineage_url():
    config = load_config(
        environ={"OPENLINEAGE_URL": "http://ol:5000", "LINEAGE_HTTP_URL": "https://lineage:443"}
    )
    assert config.section("http").url == "https://lineage:443"


@pytest.mark.parametrize(
    ("value", "enabled"),
    [
        ("true", False),
        ("TRUE", False),
        ("1", False),
        ("yes", False),
        ("on", False),
        ("false", True),
        ("0", True),
        ("", True),
    ],
)
def test_openlineage_disabled(value, enabled):
    assert load_config(environ={"OPENLINEAGE_DISABLED": value}).enabled is enabled


def test_openlineage_disabled_false_does_not_reenable_file(write_toml):
    path = write_toml("[lineage]\nenabled = false\n")
    assert load_config(path=path, environ={"OPENLINEAGE_DISABLED": "false"}).enabled is False


def test_openlineage_disabled_beats_file_but_not_lineage_enabled(write_toml):
    path = write_toml("[lineage]\nenabled = true\n")
    assert load_config(path=path, environ={"OPENLINEAGE_DISABLED": "true"}).enabled is False
    assert (
        load_config(
            path=path, environ={"OPENLINEAGE_DISABLED": "true", "LINEAGE_ENABLED": "true"}
        ).enabled
        is True
    )


def test_disabled_instrumentations_alias():
    config = load_config(environ={"LINEAGE_DISABLED_INSTRUMENTATIONS": "pika,requests"})
    assert config.section("instrumentation").disabled_instrumentations == ["pika", "requests"]
    both = load_config(
        environ={
            "LINEAGE_DISABLED_INSTRUMENTATIONS": "pika",
            "LINEAGE_INSTRUMENTATION_DISABLED_INSTRUMENTATIONS": "other",
        }
    )
    assert both.section("instrumentation").disabled_instrumentations == ["other"]


def test_connections_merge_file_env_and_overrides(write_toml):
    path = write_toml(
        '[lineage.connections.default_mongo]\nuri = "mongodb://h:27017/db"\nusername = "u"\n'
    )
    config = load_config(
        path=path,
        environ={
            "LINEAGE_CONNECTIONS_DEFAULT_MONGO_PASSWORD": "pw",
            "LINEAGE_CONNECTIONS_GRAPH_URI": "neo4j://g:7687",
        },
        overrides={"connections.default_mongo.timeout_ms": "250"},
    )
    mongo = config.named("connections")["default_mongo"]
    assert (mongo.uri, mongo.username, mongo.password, mongo.timeout_ms) == (
        "mongodb://h:27017/db",
        "u",
        "pw",
        250,
    )
    assert config.named("connections")["graph"].uri == "neo4j://g:7687"


def test_typed_overrides_pass_through():
    config = load_config(
        environ={},
        overrides={
            "exporters": ("console",),
            "pipeline.max_queue_size": 3,
            "enabled": False,
        },
    )
    assert (config.exporters, config.pipeline.max_queue_size, config.enabled) == (
        ["console"],
        3,
        False,
    )


def test_result_is_frozen():
    config = load_config(environ={})
    with pytest.raises(Exception, match="frozen"):
        config.enabled = False  # type: ignore[misc]


def test_os_environ_is_the_default(monkeypatch):
    monkeypatch.setenv("LINEAGE_PRODUCER_JOB_NAMESPACE", "from-os-environ")
    assert load_config().producer.job_namespace == "from-os-environ"


def test_path_accepts_pathlike_and_str(write_toml):
    path: Path = write_toml(FILE)
    assert load_config(path=str(path), environ={}) == load_config(path=path, environ={})
