"""Every key's environment variable and flag, lists, booleans, connections and typo warnings."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from lineage_sdk.config import (
    LineageConfig,
    config_keys,
    env_for_flags,
    env_var_for,
    flag_for,
    load_config,
    overrides_from_flags,
)
from lineage_sdk.config.keys import ConfigKey
from lineage_sdk.exceptions import ConfigError

CONNECTION = "edge_case_2"
# An entry of an array of tables ([[lineage.alerts.webhook]]) is named by its position.
POSITION = "0"
LISTED = ("alerts.webhook.",)
WEBHOOK_SECRET = "whsec_" + "QUJD" * 8  # 24 bytes, the shortest a Standard Webhooks key is


def _get(config: LineageConfig, path: str) -> Any:
    return config.get(path)


def _non_default(key: ConfigKey) -> tuple[str, Any]:
    """A valid value different from the default, as (text for env/flags, expected value)."""
    base = key.type.removesuffix(" | None")
    default = key.default
    if base == "bool":
        return ("false", False) if default else ("true", True)
    if base == "int":
        value = 7 if default != 7 else 9  # small: within every range of the schema
        return str(value), value
    if base == "list[str]" and key.path.endswith("urls"):  # each item must be a URL
        return " amqp://a/%2F, amqp://b:5673/v ,,", ["amqp://a/%2F", "amqp://b:5673/v"]
    if base == "list[str]" and key.path.endswith(".on"):  # each item must be a cause
        return " run_failed, quality_failed ,,", ["run_failed", "quality_failed"]
    if base == "list[str]":
        return " alpha, beta ,,", ["alpha", "beta"]
    if base == "list[int]":
        return "7, 70,700", [7, 70, 700]
    if " | " in base:  # choice
        choices = [choice.strip() for choice in base.split("|")]
        other = next(choice for choice in choices if choice != default)
        return other.upper(), other  # choices are case-insensitive in text
    assert base == "str"
    if key.path.endswith(".key_hash"):  # an API key's hash has one form
        return "SHA256:" + "ab" * 32, "sha256:" + "ab" * 32
    if key.path.endswith(("older_than", "retry_for")):  # an age: 90d, 12h, ...
        return "90d", "90d"
    if key.path.endswith(".secret"):  # a webhook secret has one form
        return WEBHOOK_SECRET, WEBHOOK_SECRET
    if key.path == "alerts.store":  # a SQLAlchemy URL of SQLite or PostgreSQL
        return "sqlite:///watch.db", "sqlite:///watch.db"
    if isinstance(default, str):
        return default + "-x", default + "-x"
    if key.path.endswith("url"):
        return "https://lineage.example:8443/base", "https://lineage.example:8443/base"
    return "value with spaces/é", "value with spaces/é"


def _concrete_keys() -> list[ConfigKey]:
    return [
        key.for_name(POSITION if key.path.startswith(LISTED) else CONNECTION)
        for key in config_keys()
    ]


def _ids(keys: list[ConfigKey]) -> list[str]:
    return [key.path for key in keys]


def _base_env(key: ConfigKey) -> dict[str, str]:
    # a connection needs its uri, an API key its hash and a grant; every other key is set alone
    if key.path.startswith("connections.") and not key.path.endswith(".uri"):
        return {f"LINEAGE_CONNECTIONS_{CONNECTION.upper()}_URI": "mongodb://h/db"}
    if key.path.startswith("api.keys."):
        prefix = f"LINEAGE_API_KEYS_{CONNECTION.upper()}_"
        base = {prefix + "KEY_HASH": "sha256:" + "0" * 64, prefix + "READ": "*"}
        return {k: v for k, v in base.items() if k != key.env_var}
    if key.path.startswith("alerts.webhook."):  # a rule needs its URL and its secret
        prefix = f"LINEAGE_ALERTS_WEBHOOK_{POSITION}_"
        base = {prefix + "URL": "https://hooks.example/x", prefix + "SECRET": WEBHOOK_SECRET}
        return {k: v for k, v in base.items() if k != key.env_var}
    return {}


def _base_flags(key: ConfigKey) -> dict[str, str]:
    """_base_env as flags."""
    return {
        var.removeprefix("LINEAGE_").lower().replace("_", "-"): text
        for var, text in _base_env(key).items()
    }


def test_every_key_is_listed_with_its_names():
    keys = config_keys()
    assert len(keys) > 60
    paths = [key.path for key in keys]
    assert len(paths) == len(set(paths))
    assert "store.document.collection_name" in paths
    assert "connections.<name>.uri" in paths
    by_path = {key.path: key for key in keys}
    doc = by_path["store.document.collection_name"]
    assert doc.env_var == "LINEAGE_STORE_DOCUMENT_COLLECTION_NAME"
    assert doc.flag == "--store-document-collection-name"
    assert doc.toml_key == "lineage.store.document.collection_name"
    assert doc.section == "lineage.store.document"
    assert doc.default == "audit_lineage_events"
    assert doc.type == "str"
    assert doc.description
    assert by_path["exporters"].env_var == "LINEAGE_EXPORTERS"
    assert by_path["exporters"].flag == "--exporters"
    assert by_path["rabbitmq.url"].flag == "--rabbitmq-url"
    assert by_path["pipeline.overflow"].type == "drop_newest | drop_oldest | block"
    assert by_path["collector.retry_delays_ms"].default == [1000, 5000, 30000]
    assert by_path["connections.<name>.uri"].required
    assert by_path["instrumentation.disabled_instrumentations"].aliases == (
        "LINEAGE_DISABLED_INSTRUMENTATIONS",
    )
    for key in keys:
        assert key.description, key.path
        assert key.env_var == "LINEAGE_" + key.path.replace(".", "_").upper()


def test_secrets_have_no_default_shown():
    secrets = {key.path: key for key in config_keys() if key.secret}
    assert {"http.api_key", "store.openlineage_http.api_key", "connections.<name>.password"} <= set(
        secrets
    )
    assert all(key.default is None for key in secrets.values())


@pytest.mark.parametrize("key", _concrete_keys(), ids=_ids(_concrete_keys()))
def test_every_env_var_round_trips(key: ConfigKey):
    text, expected = _non_default(key)
    defaults = LineageConfig()
    if not key.path.startswith(("connections.", "api.keys.", *LISTED)):  # named tables
        assert _get(defaults, key.path) != expected
    config = load_config(environ={**_base_env(key), key.env_var: text})
    assert _get(config, key.path) == expected


@pytest.mark.parametrize("key", _concrete_keys(), ids=_ids(_concrete_keys()))
def test_every_flag_round_trips(key: ConfigKey):
    text, expected = _non_default(key)
    base = overrides_from_flags(_base_flags(key)) if _base_env(key) else {}
    overrides = {**base, **overrides_from_flags({key.flag: text})}
    assert list(overrides_from_flags({key.flag: text})) == [key.path]
    via_overrides = load_config(environ={}, overrides=overrides)
    assert _get(via_overrides, key.path) == expected
    # lineage-instrument turns flags into env vars: same result
    env = env_for_flags({key.flag.removeprefix("--"): text})
    assert env == {key.env_var: text}
    assert load_config(environ={**_base_env(key), **env}) == via_overrides


def test_env_var_and_flag_for_paths():
    assert env_var_for("store.document.collection_name") == "LINEAGE_STORE_DOCUMENT_COLLECTION_NAME"
    assert env_var_for("lineage.exporters") == "LINEAGE_EXPORTERS"
    assert env_var_for("connections.default_mongo.uri") == "LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI"
    assert flag_for("rabbitmq.url") == "--rabbitmq-url"
    with pytest.raises(ConfigError, match=r"did you mean rabbitmq\.url"):
        env_var_for("rabbitmq.ulr")


def test_env_for_flags_formats_typed_values():
    assert env_for_flags(
        {
            "--exporters": ["console", "file"],
            "enabled": False,
            "pipeline-max-queue-size": 5,
            "http-url": None,
        }
    ) == {
        "LINEAGE_EXPORTERS": "console,file",
        "LINEAGE_ENABLED": "false",
        "LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "5",
    }


def test_unknown_flag_names_the_nearest():
    with pytest.raises(ConfigError) as info:
        overrides_from_flags({"--rabbitmq-ulr": "amqp://h"})
    assert "--rabbitmq-ulr" in str(info.value)
    assert "--rabbitmq-url" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("console,file", ["console", "file"]),
        (" console , file ", ["console", "file"]),
        ("console,,file,", ["console", "file"]),
        ("console", ["console"]),
        (",", []),
    ],
)
def test_lists_are_comma_separated(text, expected):
    assert load_config(environ={"LINEAGE_EXPORTERS": text}).exporters == expected


def test_list_of_ints():
    config = load_config(environ={"LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "1000,5000"})
    assert config.section("collector").retry_delays_ms == [1000, 5000]


@pytest.mark.parametrize("word", ["true", "TRUE", "True", "1", "yes", "YES", "on", "On", " true "])
def test_true_words(word):
    assert (
        load_config(
            environ={
                "LINEAGE_RABBITMQ_TLS_VERIFY": "false",
                "LINEAGE_RABBITMQ_DECLARE_EXCHANGE": word,
            }
        )
        .section("rabbitmq")
        .declare_exchange
        is True
    )
    assert (
        load_config(environ={"LINEAGE_RABBITMQ_TLS_VERIFY": word}).section("rabbitmq").tls_verify
        is True
    )


@pytest.mark.parametrize("word", ["false", "FALSE", "False", "0", "no", "NO", "off", "Off"])
def test_false_words(word):
    assert load_config(environ={"LINEAGE_ENABLED": word}).enabled is False


def test_empty_variable_counts_as_unset(write_toml):
    path = write_toml('[lineage]\nexporters = ["file"]\n[lineage.http]\nurl = "http://h"\n')
    config = load_config(
        path=path,
        environ={
            "LINEAGE_EXPORTERS": "",
            "LINEAGE_HTTP_URL": " ",
            "LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "",
        },
    )
    assert config.exporters == ["file"]
    assert config.section("http").url == "http://h"
    assert config.pipeline.max_queue_size == LineageConfig().pipeline.max_queue_size


def test_optional_override_empty_text_means_none(write_toml):
    path = write_toml('[lineage.http]\nurl = "http://h"\n')
    assert (
        load_config(path=path, environ={}, overrides={"http.url": ""}).section("http").url is None
    )


@pytest.mark.parametrize(
    ("var", "name", "field", "value"),
    [
        ("LINEAGE_CONNECTIONS_DEFAULT_MONGO_URI", "default_mongo", "uri", "mongodb://h/x"),
        ("LINEAGE_CONNECTIONS_A_TIMEOUT_MS", "a", "timeout_ms", 42),
        ("LINEAGE_CONNECTIONS_MY_DB_USERNAME", "my_db", "username", "bob"),
        ("LINEAGE_CONNECTIONS_X_PASSWORD_DATABASE", "x_password", "database", "lineage"),
        ("LINEAGE_CONNECTIONS_TIMEOUT_MS", None, None, None),  # no name: not a connection key
    ],
)
def test_connection_variables(var, name, field, value):
    environ = {var: str(value) if value is not None else "5"}
    if name is None:
        assert load_config(environ=environ).named("connections") == {}
        return
    if field != "uri":
        environ[f"LINEAGE_CONNECTIONS_{name.upper()}_URI"] = "neo4j://g:7687"
    config = load_config(environ=environ)
    assert list(config.named("connections")) == [name]
    assert getattr(config.named("connections")[name], field) == value


def test_typo_warning_names_closest_variable(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(
            environ={"LINEAGE_PIPELNE_OVERFLOW": "drop_oldest", "LINEAGE_EXPORTER": "console"}
        )
    assert config == LineageConfig()  # a warning, not an error, and the typo changes nothing
    messages = [record.getMessage() for record in caplog.records]
    assert any(
        "LINEAGE_PIPELNE_OVERFLOW" in m and "LINEAGE_PIPELINE_OVERFLOW" in m for m in messages
    )
    assert any("LINEAGE_EXPORTER " in m and "LINEAGE_EXPORTERS" in m for m in messages)
    assert all(record.levelno == logging.WARNING for record in caplog.records)


def test_connection_key_typo_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        load_config(environ={"LINEAGE_CONNECTIONS_MAIN_URL": "mongodb://h"}).named("connections")
    assert any("LINEAGE_CONNECTIONS_MAIN_URI" in record.getMessage() for record in caplog.records)


def test_unrelated_variables_do_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        load_config(
            environ={
                "LINEAGE_SHARED_DIR": "/x",
                "LINEAGE_TEST_MONGODB_URI": "mongodb://h",
                "LINEAGE_SOMETHING_ELSE_ENTIRELY": "1",
                "PATH": "/bin",
                "LINEAGE_CONFIG": "",
            }
        )
    assert caplog.records == []
