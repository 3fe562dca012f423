"""Bad values: one ConfigError naming key, source, value and what is allowed; secrets hidden."""

from __future__ import annotations

import logging

import pytest

from lineage_sdk.config import LineageConfig, load_config, load_config_or_disabled, redact
from lineage_sdk.exceptions import ConfigError

SECRET = "hunter2-S3CRET"


def load_all(**kwargs):
    """Load and validate every table, as `lineage-collector check` does: a component's table is
    otherwise validated only when the component is built."""
    config = load_config(**kwargs)
    config.validate_sections()
    return config


ENV_CASES = [
    # (environ, key, shown value, allowed phrase)
    (
        {"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "lots"},
        "lineage.pipeline.max_queue_size",
        "'lots'",
        "must be an integer >= 1",
    ),
    (
        {"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "0"},
        "lineage.pipeline.max_queue_size",
        "'0'",
        "must be an integer >= 1",
    ),
    (
        {"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "1.5"},
        "lineage.pipeline.max_queue_size",
        "'1.5'",
        "must be an integer >= 1",
    ),
    (
        {"LINEAGE_PIPELINE_OVERFLOW": "sideways"},
        "lineage.pipeline.overflow",
        "'sideways'",
        "must be one of drop_newest, drop_oldest, block",
    ),
    (
        {"LINEAGE_ENABLED": "maybe"},
        "lineage.enabled",
        "'maybe'",
        "must be a boolean: true/false, 1/0, yes/no or on/off",
    ),
    (
        {"LINEAGE_COLLECTOR_HEALTH_PORT": "70000"},
        "lineage.collector.health_port",
        "'70000'",
        "must be an integer between 0 and 65535",
    ),
    (
        {"LINEAGE_RABBITMQ_EVENTS_PER_MESSAGE": "0"},
        "lineage.rabbitmq.events_per_message",
        "'0'",
        "must be an integer between 1 and 10000",
    ),
    (
        {"LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "1000,soon"},
        "lineage.collector.retry_delays_ms",
        "'1000,soon'",
        "must be a list of integers",
    ),
    (
        {"LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "5000,1000"},
        "lineage.collector.retry_delays_ms",
        "'5000,1000'",
        "increasing order",
    ),
    (
        {"LINEAGE_CONSOLE_STREAM": "stdin"},
        "lineage.console.stream",
        "'stdin'",
        "must be one of stdout, stderr",
    ),
    (
        {"LINEAGE_RABBITMQ_URL": "http://broker:5672"},
        "lineage.rabbitmq.url",
        "'http://broker:5672'",
        "amqp:// or amqps://",
    ),
    (
        {"LINEAGE_HTTP_URL": "marquez:5000"},
        "lineage.http.url",
        "'marquez:5000'",
        "http:// or https://",
    ),
    (
        {"LINEAGE_EXPORTERS": "console,console"},
        "lineage.exporters",
        "'console,console'",
        "must not list an exporter twice",
    ),
    (
        {"LINEAGE_STORE_BACKEND": "composite"},
        "lineage.store.backends",
        "[]",
        "must list at least one store when backend = 'composite'",
    ),
    ({"LINEAGE_PRODUCER_JOB_NAMESPACE": "   "}, None, None, None),  # blank = unset: no error
    (
        {
            "LINEAGE_CONNECTIONS_MAIN_TIMEOUT_MS": "-1",
            "LINEAGE_CONNECTIONS_MAIN_URI": "mongodb://h",
        },
        "lineage.connections.main.timeout_ms",
        "'-1'",
        "must be an integer >= 1",
    ),
]


def _assert_clean(message: str) -> None:
    # never a raw pydantic dump
    assert "validation error" not in message.lower()
    assert "pydantic" not in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("environ", "key", "shown", "allowed"),
    ENV_CASES,
    ids=[next(iter(case[0])) + "=" + next(iter(case[0].values())) for case in ENV_CASES],
)
def test_bad_environment_value(environ, key, shown, allowed):
    if key is None:
        load_all(environ=environ)
        return
    with pytest.raises(ConfigError) as info:
        load_all(environ=environ)
    err = info.value
    message = str(err)
    assert err.key == key
    assert f"{key}={shown}" in message
    assert allowed in message
    assert err.source is not None
    assert err.source.startswith("environment variable LINEAGE_")
    assert err.source.removeprefix("environment variable ") in environ
    assert err.__cause__ is None
    assert err.__suppress_context__
    _assert_clean(message)


FILE_CASES = [
    # (toml, key, shown value, allowed phrase)
    (
        '[lineage.pipeline]\noverflow = "sideways"\n',
        "lineage.pipeline.overflow",
        "'sideways'",
        "must be one of drop_newest, drop_oldest, block",
    ),
    (
        '[lineage.pipeline]\nmax_queue_size = "many"\n',
        "lineage.pipeline.max_queue_size",
        "'many'",
        "must be an integer >= 1",
    ),
    (
        "[lineage.pipeline]\nmax_queue_size = true\n",
        "lineage.pipeline.max_queue_size",
        "True",
        "must be an integer >= 1",
    ),
    (
        "[lineage.pipeline]\nmax_queue_size = 2.5\n",
        "lineage.pipeline.max_queue_size",
        "2.5",
        "must be an integer >= 1",
    ),
    ('[lineage]\nenabled = "perhaps"\n', "lineage.enabled", "'perhaps'", "must be a boolean"),
    (
        '[lineage]\nexporters = "console"\n',
        "lineage.exporters",
        "'console'",
        "must be a list of strings",
    ),
    (
        "[lineage.pipeline]\nmax_queue = 5\n",
        "lineage.pipeline.max_queue",
        "5",
        "unknown key (did you mean max_queue_size?); known keys in [lineage.pipeline]: "
        "max_queue_size, max_export_batch_size",
    ),
    (
        "[lineage.pipelines]\nmax_queue_size = 5\n",
        "lineage.pipelines",
        "'<table>'",
        "unknown key (did you mean pipeline?); known keys in [lineage]: enabled, collector_topic",
    ),
    ("[lineage]\npipeline = 5\n", "lineage.pipeline", "5", "must be a table ([lineage.pipeline])"),
    ("enabled = false\n", "enabled", "False", "keys must be inside a [lineage] table"),
    ("lineage = 3\n", "lineage", "3", "must be a table ([lineage])"),
    (
        '[lineage.connections.main]\nusername = "bob"\n',
        "lineage.connections.main.uri",
        "None",
        "required: every [lineage.connections.main] table needs uri",
    ),
    (
        "[lineage.connections.main]\n",
        "lineage.connections.main.uri",
        "None",
        "required: every [lineage.connections.main] table needs uri",
    ),
    ("[lineage.connections]\nmain = 1\n", "lineage.connections.main", "1", "must be a table"),
    (
        '[lineage.store]\nbackend = "composite"\nbackends = ["sql", "sql"]\n',
        "lineage.store.backends",
        "['sql', 'sql']",
        "must not list a store twice",
    ),
    (
        "[lineage.collector]\nretry_delays_ms = [1000, 0]\n",
        "lineage.collector.retry_delays_ms",
        "[1000, 0]",
        ">= 1 in increasing order",
    ),
    (
        '[lineage.producer]\njob_namespace = ""\n',
        "lineage.producer.job_namespace",
        "''",
        "must be a non-empty string",
    ),
    (
        "[lineage.producer]\njob_namespace = 2024-01-01\n",
        "lineage.producer.job_namespace",
        "datetime.date(2024, 1, 1)",
        "must be a non-empty string",
    ),
]


@pytest.mark.parametrize(
    ("toml", "key", "shown", "allowed"),
    FILE_CASES,
    ids=[case[1] + ":" + case[3][:20] for case in FILE_CASES],
)
def test_bad_file_value(write_toml, toml, key, shown, allowed):
    path = write_toml(toml)
    with pytest.raises(ConfigError) as info:
        load_all(path=path, environ={})
    message = str(info.value)
    assert info.value.key == key
    assert f"{key}={shown}" in message
    assert allowed in message
    assert info.value.source == f"file {path}"
    assert str(path) in message
    _assert_clean(message)


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        ('[lineage]\nenabled = true\nexporters = ["console"\n', 3),
        ("[lineage]\nenabled = true\n\n\nthis is not toml\n", 5),
        ("[lineage]\nenabled = yes\n", 2),
        ("[lineage]\nenabled = true\nenabled = false\n", 3),
    ],
)
def test_toml_syntax_error_names_file_and_line(write_toml, toml, line):
    path = write_toml(toml)
    with pytest.raises(ConfigError) as info:
        load_all(path=path, environ={})
    message = str(info.value)
    assert str(path) in message
    assert "TOML syntax error at " in message
    assert f"line {line}," in message or f"after line {line}:" in message
    _assert_clean(message)


def test_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "lineage.toml"
    path.write_bytes(b"[lineage]\nenabled = \xff\n")
    with pytest.raises(ConfigError, match="must be UTF-8 encoded TOML"):
        load_all(path=path, environ={})


def test_file_that_is_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_all(path=tmp_path, environ={})


def test_bad_override_names_override():
    with pytest.raises(ConfigError) as info:
        load_all(environ={}, overrides={"pipeline.overflow": "sideways"})
    assert "lineage.pipeline.overflow='sideways'" in str(info.value)
    assert "override 'pipeline.overflow'" in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_all(environ={}, overrides={"pipeline.max_queue_size": True})
    assert "must be an integer >= 1" in str(info.value)


def test_unknown_override_key():
    with pytest.raises(ConfigError) as info:
        load_all(environ={}, overrides={"rabitmq.url": "amqp://h"})
    assert "lineage.rabitmq.url" in str(info.value)
    assert "did you mean rabbitmq.url" in str(info.value)


def test_bad_openlineage_disabled():
    with pytest.raises(ConfigError) as info:
        load_all(environ={"OPENLINEAGE_DISABLED": "maybe"})
    assert "OPENLINEAGE_DISABLED" in str(info.value)
    assert "'maybe'" in str(info.value)


def test_bad_openlineage_url():
    with pytest.raises(ConfigError) as info:
        load_all(environ={"OPENLINEAGE_URL": "ftp://x"})
    assert "lineage.http.url='ftp://x' (from environment variable OPENLINEAGE_URL)" in str(
        info.value
    )


def test_several_problems_reported_as_one_message(write_toml):
    path = write_toml('[lineage.pipeline]\noverflow = "x"\nmax_queue_size = 0\n')
    with pytest.raises(ConfigError) as info:
        load_all(path=path, environ={})
    assert "(and 1 more problem)" in str(info.value)


# ------------------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amqp://user:secret@host:5672/%2F", "amqp://user:***@host:5672/%2F"),
        ("amqps://u:p%40ss@h", "amqps://u:***@h"),
        ("mongodb://admin:pa:ss/wd@h1,h2/db", "mongodb://admin:***@h1,h2/db"),
        ("amqp://guest@host", "amqp://guest@host"),
        ("amqp://host:5672/vhost", "amqp://host:5672/vhost"),
        (
            "postgresql://u@h/db?password=abc&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        (
            "failed: connect to amqp://a:b@h1 then http://c:d@h2 ",
            "failed: connect to amqp://a:***@h1 then http://c:***@h2 ",
        ),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("plain text", "plain text"),
    ],
)
def test_redact(text, expected):
    assert redact(text) == expected


def test_url_password_hidden_in_error():
    with pytest.raises(ConfigError) as info:
        load_all(environ={"LINEAGE_RABBITMQ_URL": f"http://guest:{SECRET}@broker:5672"})
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value.value)
    assert "http://guest:***@broker:5672" in str(info.value)


def test_unknown_secret_key_hidden_in_error(write_toml):
    path = write_toml(f'[lineage.rabbitmq]\npassword = "{SECRET}"\n')
    with pytest.raises(ConfigError) as info:
        load_all(path=path, environ={})
    assert "lineage.rabbitmq.password='***'" in str(info.value)
    assert SECRET not in str(info.value)


def test_syntax_error_does_not_echo_file_content(write_toml):
    path = write_toml(f'[lineage.connections.x]\nuri = "mongodb://u:{SECRET}@h\n')
    with pytest.raises(ConfigError) as info:
        load_all(path=path, environ={})
    assert SECRET not in str(info.value)
    assert "line 2" in str(info.value)


def test_secret_in_bad_override_hidden():
    with pytest.raises(ConfigError) as info:
        load_all(environ={}, overrides={"http.url": f"ftp://me:{SECRET}@h"})
    assert SECRET not in str(info.value)


# ----------------------------------------------------------------------- load_config_or_disabled


def test_or_disabled_logs_once_and_disables(caplog):
    environ = {
        "LINEAGE_PIPELINE_OVERFLOW": "sideways",
        "LINEAGE_RABBITMQ_URL": f"amqp://u:{SECRET}@h",
    }
    with caplog.at_level(logging.DEBUG, logger="lineage_sdk"):
        config = load_config_or_disabled(environ=environ)
    assert config.enabled is False
    assert config == LineageConfig(enabled=False)
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(errors) == 1
    record = errors[0]
    assert record.name == "lineage_sdk"
    assert record.exc_info is None  # a message, not a traceback
    message = record.getMessage()
    assert "LINEAGE_PIPELINE_OVERFLOW" in message
    assert "'sideways'" in message
    assert "must be one of drop_newest, drop_oldest, block" in message
    assert "DISABLED" in message
    assert SECRET not in caplog.text


def test_or_disabled_on_syntax_error(write_toml, caplog):
    path = write_toml("[lineage\n")
    with caplog.at_level(logging.ERROR, logger="lineage_sdk"):
        config = load_config_or_disabled(path=path, environ={})
    assert config.enabled is False
    assert len(caplog.records) == 1
    assert "line 1" in caplog.records[0].getMessage()


def test_or_disabled_passes_good_config_through(write_toml, caplog):
    path = write_toml('[lineage]\nexporters = ["console"]\n')
    with caplog.at_level(logging.DEBUG, logger="lineage_sdk"):
        config = load_config_or_disabled(
            path=path, environ={"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": "9"}
        )
    assert config.enabled is True
    assert config.exporters == ["console"]
    assert config.pipeline.max_queue_size == 9
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_or_disabled_never_raises_on_unexpected_failure(caplog):
    class Exploding(dict[str, str]):
        def get(self, *args, **kwargs):
            raise RuntimeError(f"boom amqp://u:{SECRET}@h")

    with caplog.at_level(logging.ERROR, logger="lineage_sdk"):
        config = load_config_or_disabled(environ=Exploding())
    assert config.enabled is False
    assert len(caplog.records) == 1
    assert "RuntimeError" in caplog.records[0].getMessage()
    assert SECRET not in caplog.text
