"""The OpenLineage client's openlineage.yml and OPENLINEAGE__* variables, mapped onto our exporters.

Every test points the working directory, HOME and OPENLINEAGE_CONFIG at tmp_path: the user's
real home and configuration folders are never read or written.
"""

from __future__ import annotations

import gzip
import logging
import os
import sys
from pathlib import Path

import orjson
import pytest

from lineage_sdk import LineageDataset, configure, shutdown, track_lineage
from lineage_sdk.config import LineageConfig, load_config, load_config_or_disabled
from lineage_sdk.config.openlineage_client import MAPPING
from lineage_sdk.config.reference import render
from lineage_sdk.exceptions import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conformance import validate_event
from http_recorder import Recorder

SECRET = "ol-S3CRET-api-key-value"
HEADER_SECRET = "hdr-S3CRET-value"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory and HOME under tmp_path; no OPENLINEAGE_*/LINEAGE_* leak in."""
    work = tmp_path / "work"
    work.mkdir()
    user = tmp_path / "home"
    user.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(user))
    for name in list(os.environ):
        if name.startswith(("OPENLINEAGE", "LINEAGE_")):
            monkeypatch.delenv(name)
    return user


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lineage_sdk.config"]


HTTP_YML = f"""\
transport:
  type: http
  url: http://marquez.example:5000
  endpoint: api/v1/lineage
  timeout: 2.5
  auth:
    type: api_key
    apiKey: {SECRET}
"""


# ----------------------------------------------------------------------------- where the file is


def test_file_in_working_directory(home: Path):
    write(Path("openlineage.yml"), HTTP_YML)
    config = load_config(environ={"HOME": str(home)})
    assert config.exporters == ["http"]
    http = config.section("http")
    assert (http.url, http.endpoint, http.timeout_ms, http.api_key) == (
        "http://marquez.example:5000",
        "api/v1/lineage",
        2500,
        SECRET,
    )


def test_file_in_home(home: Path):
    write(home / ".openlineage" / "openlineage.yml", "transport:\n  type: console\n")
    assert load_config(environ={"HOME": str(home)}).exporters == ["console"]


def test_lookup_order_is_the_clients(home: Path, tmp_path: Path):
    write(home / ".openlineage" / "openlineage.yml", "transport:\n  type: console\n")
    write(Path("openlineage.yml"), "transport:\n  type: noop\n")
    named = write(tmp_path / "elsewhere" / "ol.yml", HTTP_YML)
    env = {"HOME": str(home)}
    assert load_config(environ={**env, "OPENLINEAGE_CONFIG": str(named)}).exporters == ["http"]
    assert load_config(environ=env).exporters == []  # ./openlineage.yml before the home one
    Path("openlineage.yml").unlink()
    assert load_config(environ=env).exporters == ["console"]


def test_missing_openlineage_config_warns_and_searches_on(home: Path, tmp_path: Path, caplog):
    write(Path("openlineage.yml"), "transport:\n  type: console\n")
    missing = tmp_path / "nowhere.yml"
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ={"HOME": str(home), "OPENLINEAGE_CONFIG": str(missing)})
    assert config.exporters == ["console"]
    (message,) = messages(caplog)
    assert "OPENLINEAGE_CONFIG" in message and str(missing) in message


def test_given_environ_without_home_never_reads_a_home_folder(home: Path):
    write(home / ".openlineage" / "openlineage.yml", "transport:\n  type: console\n")
    # The process has HOME (the fixture's); an explicit environ without HOME must not use it.
    assert load_config(environ={}).exporters == ["rabbitmq"]
    # The real environment (environ=None) does use HOME.
    assert load_config().exporters == ["console"]


def test_empty_file_is_nothing(home: Path):
    write(Path("openlineage.yml"), "")
    assert load_config(environ={}) == LineageConfig()


# ---------------------------------------------------------------------------- OPENLINEAGE__ vars


def test_transport_variables():
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__URL": "https://marquez.example",
            "OPENLINEAGE__TRANSPORT__ENDPOINT": "api/v2/lineage",
            "OPENLINEAGE__TRANSPORT__TIMEOUT": "10",
            "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
            "OPENLINEAGE__TRANSPORT__AUTH__API_KEY": SECRET,
            "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
        }
    )
    assert config.exporters == ["http"]
    http = config.section("http")
    assert http.url == "https://marquez.example"
    assert http.endpoint == "api/v2/lineage"
    assert http.timeout_ms == 10000
    assert http.api_key == SECRET
    assert http.compression == "gzip"


def test_json_values_as_the_client_reads_them():
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT": '{"type": "http", "url": "http://a:1"}',
            "OPENLINEAGE__TRANSPORT__URL": "http://ignored:2",  # the whole table replaces it
        }
    )
    assert config.section("http").url == "http://a:1"
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__URL": "http://a:1",
            "OPENLINEAGE__TRANSPORT__AUTH": f'{{"type": "api_key", "apiKey": "{SECRET}"}}',
        }
    )
    assert config.section("http").api_key == SECRET


def test_file_wins_over_variables_key_by_key(home: Path):
    write(Path("openlineage.yml"), "transport:\n  type: http\n  url: http://file:1\n")
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__URL": "http://env:2",
            "OPENLINEAGE__TRANSPORT__TIMEOUT": "7",
        }
    )
    assert config.section("http").url == "http://file:1"
    assert config.section("http").timeout_ms == 7000


@pytest.mark.parametrize(
    ("yml", "env"),
    [
        (HTTP_YML, {}),
        (
            "transport:\n  type: http\n  url: http://file:1\n",
            {"OPENLINEAGE__TRANSPORT__TIMEOUT": "7.5"},
        ),
        (
            None,
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://env:3",
                "OPENLINEAGE__TRANSPORT__ENDPOINT": "custom/path",
                "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
                "OPENLINEAGE__TRANSPORT__AUTH__API_KEY": SECRET,
            },
        ),
    ],
)
def test_same_http_settings_as_the_openlineage_client(home, monkeypatch, yml, env):
    """The reference client, reading the same files and variables, picks the same endpoint."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import HttpTransport

    if yml is not None:
        write(Path("openlineage.yml"), yml)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = OpenLineageClient()
    assert isinstance(client.transport, HttpTransport)
    theirs = client.transport.config
    ours = load_config().section("http")
    assert ours.url == theirs.url
    assert ours.endpoint == theirs.endpoint
    assert ours.timeout_ms == round(theirs.timeout * 1000)
    assert ours.api_key == getattr(theirs.auth, "api_key", None)


# ------------------------------------------------------------------------------------ precedence


def test_lineage_settings_win(home: Path, write_toml):
    write(Path("openlineage.yml"), HTTP_YML)
    toml = write_toml(
        '[lineage]\nexporters = ["console", "http"]\n[lineage.http]\nurl = "http://toml:1"\n'
    )
    config = load_config(path=toml, environ={})
    assert config.exporters == ["console", "http"]
    assert config.section("http").url == "http://toml:1"
    assert config.section("http").api_key == SECRET  # what lineage-sdk does not set still maps
    config = load_config(environ={"LINEAGE_EXPORTERS": "file", "LINEAGE_HTTP_TIMEOUT_MS": "99"})
    assert config.exporters == ["file"]
    assert config.section("http").timeout_ms == 99
    config = load_config(environ={}, overrides={"http.endpoint": "x/y"})
    assert config.section("http").endpoint == "x/y"


def test_openlineage_url_is_ignored_when_a_transport_decides(caplog):
    env = {
        "OPENLINEAGE__TRANSPORT__TYPE": "console",
        "OPENLINEAGE_URL": "http://legacy:5000",
        "OPENLINEAGE_API_KEY": SECRET,
    }
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ=env)
    assert config.exporters == ["console"]
    assert config.section("http").url is None
    found = messages(caplog)
    assert any("OPENLINEAGE_URL is ignored" in m and "transport.type console" in m for m in found)
    assert any("OPENLINEAGE_API_KEY is ignored" in m for m in found)
    assert not any(SECRET in m for m in caplog.messages)


def test_composite_gets_openlineage_url_as_its_http_member():
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__TYPE": "composite",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__LOCAL__TYPE": "console",
            "OPENLINEAGE_URL": "http://legacy:5000",
            "OPENLINEAGE_ENDPOINT": "api/v9/lineage",
        }
    )
    assert config.exporters == ["console", "http"]
    assert config.section("http").url == "http://legacy:5000"
    assert config.section("http").endpoint == "api/v9/lineage"


def test_without_a_transport_openlineage_url_works_as_before():
    config = load_config(
        environ={"OPENLINEAGE_URL": "http://m:5000", "OPENLINEAGE__FACETS__X": "1"}
    )
    assert config.exporters == ["http"]
    assert config.section("http").url == "http://m:5000"


# ----------------------------------------------------------------------------- transport types


def test_console_noop_and_async_http():
    assert load_config(environ={"OPENLINEAGE__TRANSPORT__TYPE": "console"}).exporters == ["console"]
    assert load_config(environ={"OPENLINEAGE__TRANSPORT__TYPE": "noop"}).exporters == []
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__TYPE": "async_http",
            "OPENLINEAGE__TRANSPORT__URL": "http://a:1",
        }
    )
    assert config.exporters == ["http"]
    assert config.section("http").url == "http://a:1"


def test_file_transport(home: Path, tmp_path: Path, caplog):
    target = tmp_path / "events dir" / "ol.jsonl"
    write(
        Path("openlineage.yml"),
        f"transport:\n  type: file\n  log_file_path: {target.as_uri()}\n  append: true\n",
    )
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ={})
    assert config.exporters == ["file"]
    assert config.section("file").path == str(target)
    assert messages(caplog) == []


def test_file_transport_without_append_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(
            environ={
                "OPENLINEAGE__TRANSPORT__TYPE": "file",
                "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": "/tmp/x.jsonl",
                "OPENLINEAGE__TRANSPORT__DEBUG_MODE": "true",
            }
        )
    assert config.section("file").path == "/tmp/x.jsonl"
    found = messages(caplog)
    assert any("transport.append is not set" in m and "one file per event" in m for m in found)
    assert any(
        "transport.debug_mode (from environment variable OPENLINEAGE__TRANSPORT__DEBUG_MODE)" in m
        for m in found
    )


COMPOSITE_YML = f"""\
transport:
  type: composite
  continue_on_failure: false
  transports:
    - name: marquez
      type: http
      url: http://marquez:5000
      compression: gzip
      custom_headers:
        X-Tenant: {HEADER_SECRET}
      retry:
        total: 3
      auth:
        type: api_key
        api_key: {SECRET}
    - type: file
      log_file_path: /tmp/events.jsonl
      append: true
    - name: second
      type: http
      url: http://other:1
"""


def test_composite_list(home: Path, caplog):
    path = write(Path("openlineage.yml"), COMPOSITE_YML)
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ={})
    assert config.exporters == ["http", "file"]
    assert config.section("http").url == "http://marquez:5000"
    assert config.section("http").api_key == SECRET
    assert config.section("file").path == "/tmp/events.jsonl"
    found = messages(caplog)
    source = f"(from file {path.resolve()})"
    for key in (
        "transport.continue_on_failure",
        "transport.transports.marquez.custom_headers",
        "transport.transports.marquez.retry",
        "transport.transports.second",
    ):
        assert any(f"setting {key} {source} is ignored" in m for m in found), (key, found)
    assert len(found) == 4
    assert not any(SECRET in m or HEADER_SECRET in m for m in caplog.messages)


def test_composite_members_from_variables():
    config = load_config(
        environ={
            "OPENLINEAGE__TRANSPORT__TYPE": "composite",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__FIRST__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__FIRST__URL": "http://first:1",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__FIRST__AUTH__TYPE": "api_key",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__FIRST__AUTH__APIKEY": SECRET,
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__SECOND__TYPE": "console",
        }
    )
    assert sorted(config.exporters) == ["console", "http"]
    assert config.section("http").url == "http://first:1"
    assert config.section("http").api_key == SECRET


# ------------------------------------------------------------------------------- ignored keys


def test_every_ignored_key_is_named_once_without_its_value(home: Path, caplog):
    write(
        Path("openlineage.yml"),
        f"""\
transport:
  type: http
  url: http://m:1
  verify: false
  custom_headers:
    Authorization: Bearer {HEADER_SECRET}
    X-Other: {HEADER_SECRET}
  ssl_context:
    caCertPath: /ca.pem
facets:
  environment_variables: [HOME]
tags:
  job:
    team: a
""",
    )
    env = {
        "OPENLINEAGE__FILTERS": f'[{{"type": "exact", "match": "{SECRET}"}}]',
        "OPENLINEAGE__DATASET__NAMESPACE_RESOLVERS__X__TYPE": "hosts",
    }
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ=env)
    assert config.section("http").url == "http://m:1"
    found = messages(caplog)
    for key in (
        "transport.verify",
        "transport.custom_headers",
        "transport.ssl_context",
        "setting facets",
        "setting tags",
        "setting filters (from environment variable OPENLINEAGE__FILTERS)",
        "dataset.namespace_resolvers.x.type (from environment variable "
        "OPENLINEAGE__DATASET__NAMESPACE_RESOLVERS__X__TYPE)",
    ):
        assert sum(key in m for m in found) == 1, (key, found)
    assert len(found) == 7
    assert not any(SECRET in m or HEADER_SECRET in m for m in caplog.messages)


def test_other_auth_types_are_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(
            environ={
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://m:1",
                "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "jwt",
                "OPENLINEAGE__TRANSPORT__AUTH__APIKEY": SECRET,
            }
        )
    assert config.section("http").api_key is None
    found = messages(caplog)
    assert any("transport.auth" in m and "'jwt'" in m for m in found)
    assert not any(SECRET in m for m in caplog.messages)


def test_unsupported_type_is_only_a_warning_when_our_exporters_decide(caplog):
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(
            environ={
                "OPENLINEAGE__TRANSPORT__TYPE": "kafka",
                "OPENLINEAGE__TRANSPORT__TOPIC": "t",
                "LINEAGE_EXPORTERS": "console",
                "OPENLINEAGE_URL": "http://m:1",
            }
        )
    assert config.exporters == ["console"]
    assert config.section("http").url == "http://m:1"  # the ignored transport decides nothing
    found = messages(caplog)
    assert any(
        "'kafka' transport has no lineage-sdk exporter" in m
        and "environment variable LINEAGE_EXPORTERS" in m
        for m in found
    )


# -------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"OPENLINEAGE__TRANSPORT__TYPE": "htpp"},
            "invalid configuration transport.type='htpp' (from environment variable "
            "OPENLINEAGE__TRANSPORT__TYPE): unknown transport type 'htpp' (did you mean 'http'?)",
        ),
        (
            {"OPENLINEAGE__TRANSPORT__TYPE": "kafka"},
            "transport.type='kafka' (from environment variable OPENLINEAGE__TRANSPORT__TYPE): "
            "the 'kafka' transport has no lineage-sdk exporter",
        ),
        (
            {"OPENLINEAGE__TRANSPORT__TYPE": "http"},
            "invalid configuration transport.url=None (from environment variable "
            "OPENLINEAGE__TRANSPORT__TYPE): required: the base URL of the http transport's endpoint",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://m:1",
                "OPENLINEAGE__TRANSPORT__TIMEOUT": "soon",
            },
            "transport.timeout='soon' (from environment variable OPENLINEAGE__TRANSPORT__TIMEOUT)"
            ": must be a number of seconds above 0",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://m:1",
                "OPENLINEAGE__TRANSPORT__COMPRESSION": "brotli",
            },
            "transport.compression='brotli'",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://m:1",
                "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
            },
            "transport.auth.apiKey=None",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "file",
                "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": "s3://bucket/events",
            },
            "transport.log_file_path='s3://bucket/events' (from environment variable "
            "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH): must be a local path or a file:// URL",
        ),
        (
            {"OPENLINEAGE__TRANSPORT__TYPE": "composite"},
            "transport.transports=None",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "composite",
                "OPENLINEAGE__TRANSPORT__TRANSPORTS": "[]",
            },
            "transport.transports='<list>'",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "composite",
                "OPENLINEAGE__TRANSPORT__TRANSPORTS__A__TYPE": "datadog",
            },
            "transport.transports.a.type='datadog'",
        ),
        (
            {"OPENLINEAGE__TRANSPORT__TYPE": "true"},
            "transport.type=True",
        ),
        (
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "composite",
                "OPENLINEAGE__TRANSPORT__TRANSPORTS__A__URL": "http://m:1",
            },
            "transport.transports.a.type=None (from environment variable "
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__A__URL): required: one of http, async_http, "
            "console, file, noop, composite",
        ),
    ],
)
def test_bad_values_are_errors_naming_the_key(env, expected):
    with pytest.raises(ConfigError) as info:
        load_config(environ=env).section("http")
    assert expected in str(info.value)


def test_bad_url_is_reported_with_its_openlineage_key(home: Path):
    path = write(
        Path("openlineage.yml"),
        f"transport:\n  type: http\n  url: ftp://user:{SECRET}@host/\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(environ={}).section("http")
    message = str(info.value)
    assert f"(from file {path.resolve()}, key transport.url)" in message
    assert "lineage.http.url" in message
    assert SECRET not in message


def test_secret_never_in_errors():
    with pytest.raises(ConfigError) as info:
        load_config(
            environ={
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": "http://m:1",
                "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
                "OPENLINEAGE__TRANSPORT__AUTH__API_KEY": "[1, 2]",
            }
        )
    assert "transport.auth.api_key='***'" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("transport:\n  type: http\n  url: [unclosed\n", "YAML syntax error at line 4, column 1"),
        ("transport: {type: http\n", "YAML syntax error"),
        ("- transport\n- http\n", "must be a YAML mapping"),
        ("transport: console\n", "transport='console'"),
        (
            "transport:\n  type: http\n  url: http://m:1\n  auth: api_key\n",
            "transport.auth='api_key'",
        ),
        (
            "transport:\n  url: http://m:1\n  type: file\n  log_file_path: 5\n",
            "transport.log_file_path=5",
        ),
        (
            "transport:\n  type: composite\n  transports:\n    - type: file\n      log_file_path: /x\n      append: maybe\n",
            "transport.transports.0.append='maybe'",
        ),
    ],
)
def test_malformed_file_is_one_error(home: Path, text, expected):
    path = write(Path("openlineage.yml"), text)
    with pytest.raises(ConfigError) as info:
        load_config(environ={})
    message = str(info.value)
    assert expected in message
    assert str(path.resolve()) in message
    # No chained traceback of a YAML or type error reaches the user, only this line.
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None


def test_application_runs_on_disabled_with_one_line(home: Path, caplog):
    write(Path("openlineage.yml"), "transport:\n  type: [http\n")
    with caplog.at_level(logging.DEBUG, logger="lineage_sdk"):
        config = load_config_or_disabled(environ={})
    assert config.enabled is False
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "openlineage.yml" in errors[0].getMessage()
    assert errors[0].exc_info is None


# ------------------------------------------------------------------------------------ the docs


def test_reference_documents_the_mapping():
    page = render()
    assert "## The OpenLineage client's configuration" in page
    for key, kind, ours in MAPPING:
        assert f"| {key} | {kind} | {ours} |" in page.replace("\\|", "|")
    assert "`OPENLINEAGE_CONFIG`" in page
    assert "every lineage-sdk setting wins" in page


# --------------------------------------------------------- events arrive, over loopback HTTP


def _run_two_jobs() -> None:
    @track_lineage(job_name="ol.migrated", inputs=[LineageDataset("file", "/in")])
    def work() -> int:
        return 1

    assert work() == 1
    assert work() == 1


def test_events_arrive_with_openlineage_variables(home: Path, server: Recorder, monkeypatch):
    port = server.server_address[1]
    for name, value in {
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": f"http://127.0.0.1:{port}",
        "OPENLINEAGE__TRANSPORT__ENDPOINT": "api/v1/lineage",
        "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
        "OPENLINEAGE__TRANSPORT__AUTH__API_KEY": SECRET,
        "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
    }.items():
        monkeypatch.setenv(name, value)
    assert configure(load_config()) is not None
    try:
        _run_two_jobs()
    finally:
        shutdown(10)
    assert len(server.requests) == 4
    for path, headers, body in server.requests:
        assert path == "/api/v1/lineage"
        assert headers["Authorization"] == f"Bearer {SECRET}"
        assert headers["Content-Encoding"] == "gzip"
        validate_event(orjson.loads(gzip.decompress(body)))


def test_events_arrive_through_a_composite_file(home: Path, server: Recorder, tmp_path: Path):
    port = server.server_address[1]
    events = tmp_path / "events.jsonl"
    write(
        home / ".openlineage" / "openlineage.yml",
        f"""\
transport:
  type: composite
  transports:
    marquez:
      type: http
      url: http://127.0.0.1:{port}
      endpoint: /custom/ingest
      timeout: 5
    local:
      type: file
      log_file_path: {events}
      append: true
""",
    )
    config = load_config()
    assert config.exporters == ["http", "file"]
    assert configure(config) is not None
    try:
        _run_two_jobs()
    finally:
        shutdown(10)
    sent = [orjson.loads(body) for path, _, body in server.requests if path == "/custom/ingest"]
    written = [orjson.loads(line) for line in events.read_text("utf-8").splitlines()]
    assert len(sent) == 4
    assert sent == written
    for event in sent:
        validate_event(event)


def test_the_collector_and_the_cli_leave_the_client_transport_out(tmp_path: Path, caplog) -> None:
    """An application's openlineage.yml (here a Kafka transport, which has no exporter) in the
    collector's folder neither stops nor warns it: the collector and the ``lineage`` CLI send no
    events, so they load the configuration without the client's transport."""
    client_file = tmp_path / "openlineage.yml"
    client_file.write_text("transport:\n  type: kafka\n  topic: lineage\n", encoding="utf-8")
    environ = {"OPENLINEAGE_CONFIG": str(client_file), "HOME": str(tmp_path)}
    with pytest.raises(ConfigError, match="kafka"):
        load_config(environ=environ)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lineage_sdk.config"):
        config = load_config(environ=environ, openlineage_client=False)
    assert config == load_config(environ={"HOME": str(tmp_path)})
    assert not caplog.records
