"""Alert rules: `[[lineage.alerts.webhook]]` and `[lineage.alerts]` from TOML, environment
variables and flags; `check` refusing a bad rule by its key without ever showing the secret; and
the Rule objects the worker matches causes with."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from standardwebhooks import Webhook
from typer.testing import CliRunner

from lineage_sdk.collector.cli import app
from lineage_sdk.collector.watch.model import CAUSE_KINDS, Cause, CauseKind
from lineage_sdk.collector.watch.rules import (
    DEFAULT_STORE_URL,
    AlertsConfig,
    Rule,
    WebhookConfig,
    alerts_settings,
    rule_key,
    rules_of,
)
from lineage_sdk.config import load_config
from lineage_sdk.config.keys import env_var_for, flag_for, overrides_from_flags
from lineage_sdk.exceptions import ConfigError

CLI = [sys.executable, "-m", "lineage_sdk.collector.cli"]
SECRET = "whsec_" + base64.b64encode(bytes(range(7, 39))).decode()  # 32 bytes
OTHER = "whsec_" + base64.b64encode(bytes(range(100, 124))).decode()  # 24 bytes
URL = "https://hooks.example.com/lineage"


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stray ./lineage.toml, no LINEAGE_* variable of the machine."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("LINEAGE_", "OPENLINEAGE")):
            monkeypatch.delenv(name)


@pytest.fixture
def toml(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "lineage.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def _rule(**keys: object) -> str:
    """One [[lineage.alerts.webhook]] table of the given keys (TOML values)."""
    lines = ["[[lineage.alerts.webhook]]"]
    for key, value in keys.items():
        if isinstance(value, str):
            lines.append(f'{key} = "{value}"')
        elif isinstance(value, list):
            lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _refusal(path: Path, environ: dict[str, str] | None = None) -> ConfigError:
    """The error of loading and checking ``path`` as `check` does."""

    def load_and_check() -> None:
        config = load_config(path=path, environ=environ or {}, openlineage_client=False)
        config.validate_sections()
        rules_of(config)

    with pytest.raises(ConfigError) as caught:
        load_and_check()
    return caught.value


def _cause(kind: CauseKind = "run_failed", namespace: str = "shop") -> Cause:
    return Cause(
        id="00000000-0000-5000-8000-000000000001",
        kind=kind,
        subject=f"job:{namespace}:load",
        namespace=namespace,
        time=datetime(2026, 12, 6, 3, 0, tzinfo=UTC),
    )


# -- the tables, read ----------------------------------------------------------------------------


def test_rules_from_toml_in_order_with_defaults(toml: Callable[[str], Path]) -> None:
    path = toml(
        _rule(url=URL, secret=SECRET, on=["run_failed", "schema_breaking"], namespaces=["shop"])
        + _rule(url="http://127.0.0.1:8080/hook", secret=OTHER, depth=2)
        + '[lineage.alerts]\nretry_for = "30m"\ngrace = 5\n'
    )
    config = load_config(path=path, environ={}, openlineage_client=False)
    first, second = rules_of(config)
    assert (first.url, first.secret, first.depth) == (URL, SECRET, 10)
    assert first.on == frozenset({"run_failed", "schema_breaking"})
    assert first.namespaces == ("shop",)
    assert (second.url, second.depth, second.namespaces) == ("http://127.0.0.1:8080/hook", 2, None)
    assert second.on == frozenset(CAUSE_KINDS)  # every cause unless `on` says which
    settings = alerts_settings(config)
    assert settings.retry_window == timedelta(minutes=30)
    assert settings.retry_for_seconds == 1800
    assert (settings.grace, settings.timeout_s) == (5, 10.0)


def test_no_rules_and_default_settings() -> None:
    config = load_config(environ={}, openlineage_client=False)
    assert rules_of(config) == ()
    settings = alerts_settings(config)
    assert settings == AlertsConfig()
    assert settings.retry_window == timedelta(hours=1)
    assert settings.grace == 3


def test_env_vars_set_and_add_rules(toml: Callable[[str], Path]) -> None:
    """A rule is named by its position: the file's first table is 0; a variable can keep the
    secret out of the file, and a position the file has no table for adds a rule."""
    path = toml(_rule(url=URL, on=["run_failed"]))
    environ = {
        "LINEAGE_ALERTS_WEBHOOK_0_SECRET": SECRET,
        "LINEAGE_ALERTS_WEBHOOK_0_NAMESPACES": "shop, team.*",
        "LINEAGE_ALERTS_WEBHOOK_10_URL": "https://ten.example/x",
        "LINEAGE_ALERTS_WEBHOOK_10_SECRET": OTHER,
        "LINEAGE_ALERTS_WEBHOOK_2_URL": "https://two.example/x",
        "LINEAGE_ALERTS_WEBHOOK_2_SECRET": OTHER,
        "LINEAGE_ALERTS_WEBHOOK_2_ON": "run_stale,quality_failed",
        "LINEAGE_ALERTS_WEBHOOK_2_DEPTH": "4",
        "LINEAGE_ALERTS_RETRY_FOR": "2h",
    }
    config = load_config(path=path, environ=environ, openlineage_client=False)
    rules = rules_of(config)
    assert [rule.url for rule in rules] == [URL, "https://two.example/x", "https://ten.example/x"]
    assert [rule.index for rule in rules] == [0, 2, 10]  # by position, not as text
    assert rules[0].secret == SECRET
    assert rules[0].namespaces == ("shop", "team.*")
    assert rules[1].on == frozenset({"run_stale", "quality_failed"})
    assert rules[1].depth == 4
    assert alerts_settings(config).retry_window == timedelta(hours=2)
    assert env_var_for("alerts.webhook.0.secret") == "LINEAGE_ALERTS_WEBHOOK_0_SECRET"


def test_flags_name_rules_by_position_too() -> None:
    assert flag_for("alerts.webhook.3.url") == "--alerts-webhook-3-url"
    overrides = overrides_from_flags(
        {"--alerts-webhook-0-url": URL, "--alerts-webhook-0-secret": SECRET}
    )
    assert overrides == {"alerts.webhook.0.url": URL, "alerts.webhook.0.secret": SECRET}
    (rule,) = rules_of(load_config(environ={}, overrides=overrides, openlineage_client=False))
    assert (rule.url, rule.secret) == (URL, SECRET)


def test_a_rule_given_in_code() -> None:
    from lineage_sdk.config import LineageConfig

    config = LineageConfig.model_validate(
        {"alerts": {"webhook": [{"url": URL, "secret": SECRET, "on": ["quality_failed"]}]}}
    )
    (rule,) = rules_of(config)
    assert rule.on == frozenset({"quality_failed"})


# -- refusals, each naming its key -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "key", "says"),
    [
        (_rule(url=URL), "lineage.alerts.webhook[0].secret", "required"),
        (_rule(secret=SECRET), "lineage.alerts.webhook[0].url", "required"),
        (_rule(url="ftp://x.example/y", secret=SECRET), "lineage.alerts.webhook[0].url", "http"),
        (_rule(url="hooks.example.com", secret=SECRET), "lineage.alerts.webhook[0].url", "http"),
        (
            _rule(url=URL, secret=SECRET, on=["run_faild"]),
            "lineage.alerts.webhook[0].on",
            "did you mean run_failed",
        ),
        (_rule(url=URL, secret=SECRET, on=[]), "lineage.alerts.webhook[0].on", "at least one"),
        (
            _rule(url=URL, secret=SECRET, namespaces=[]),
            "lineage.alerts.webhook[0].namespaces",
            "leave it out",
        ),
        (_rule(url=URL, secret=SECRET, depth=-1), "lineage.alerts.webhook[0].depth", ">= 0"),
        (_rule(url=URL, secret=SECRET, sekret="x"), "lineage.alerts.webhook[0].sekret", "unknown"),
        (
            '[lineage.alerts.webhook]\nurl = "https://x.example/"\n',
            "lineage.alerts.webhook",
            "array of tables",
        ),
        ('[lineage.alerts]\nretry_for = "soon"\n', "lineage.alerts.retry_for", "positive age"),
        ('[lineage.alerts]\nstore = "mongodb://h/db"\n', "lineage.alerts.store", "SQLAlchemy"),
        ("[lineage.alerts]\ngrace = 0\n", "lineage.alerts.grace", ">= 1"),
    ],
)
def test_bad_rules_are_refused_naming_the_key(
    toml: Callable[[str], Path], table: str, key: str, says: str
) -> None:
    if table.startswith("[["):  # after a good rule: the second, named by its position
        error = _refusal(toml(_rule(url="https://first.example/", secret=SECRET) + table))
        key = key.replace("[0]", "[1]")
    else:
        error = _refusal(toml(table))
    assert error.key == key, str(error)
    assert says in error.allowed, str(error)
    assert SECRET not in str(error)
    assert SECRET.removeprefix("whsec_") not in str(error)


@pytest.mark.parametrize(
    ("secret", "says"),
    [
        (SECRET.removeprefix("whsec_"), "whsec_ and base64"),  # the bare base64
        ("whsec_" + base64.b64encode(b"short").decode(), "24 to 64 random bytes"),
        ("whsec_" + base64.b64encode(bytes(65)).decode(), "24 to 64 random bytes"),
        ("whsec_not base64 at all!!", "standard base64"),
        ("whsec_", "24 to 64"),
        ("whsec_" + "-_" * 16, "standard base64"),  # URL-safe base64 is not the spec's
    ],
)
def test_a_secret_not_of_the_whsec_form_is_refused_unshown(
    toml: Callable[[str], Path], secret: str, says: str
) -> None:
    error = _refusal(toml(_rule(url=URL, secret=secret)))
    assert error.key == "lineage.alerts.webhook[0].secret"
    assert says in error.allowed
    assert error.value == "***"
    body = secret.removeprefix("whsec_")
    assert not body or body not in str(error)


def test_a_bad_secret_in_a_variable_is_refused_unshown() -> None:
    bare = SECRET.removeprefix("whsec_")
    environ = {"LINEAGE_ALERTS_WEBHOOK_0_URL": URL, "LINEAGE_ALERTS_WEBHOOK_0_SECRET": bare}
    with pytest.raises(ConfigError) as caught:
        rules_of(load_config(environ=environ, openlineage_client=False))
    error = caught.value
    assert error.key == "lineage.alerts.webhook[0].secret"
    assert error.source == "environment variable LINEAGE_ALERTS_WEBHOOK_0_SECRET"
    assert bare not in str(error)


def test_a_variable_must_name_a_position() -> None:
    with pytest.raises(ConfigError) as caught:
        rules_of(
            load_config(
                environ={"LINEAGE_ALERTS_WEBHOOK_MAIN_SECRET": SECRET}, openlineage_client=False
            )
        )
    assert caught.value.key == "lineage.alerts.webhook"
    assert "LINEAGE_ALERTS_WEBHOOK_0_<KEY>" in caught.value.allowed
    assert SECRET not in str(caught.value)
    with pytest.raises(ConfigError, match="by position"):
        rules_of(
            load_config(environ={"LINEAGE_ALERTS_WEBHOOK_01_URL": URL}, openlineage_client=False)
        )


def test_one_rule_per_url(toml: Callable[[str], Path]) -> None:
    error = _refusal(toml(_rule(url=URL, secret=SECRET) + _rule(url=URL, secret=OTHER)))
    assert error.key == "lineage.alerts.webhook[1].url"
    assert "lineage.alerts.webhook[0]" in error.allowed
    assert OTHER not in str(error)


# -- `lineage-collector check`: refuses, names the key, never shows the secret -------------------


def _check(path: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OPENLINEAGE"))}
    env.update(extra_env or {})
    return subprocess.run(
        [*CLI, "check", "--config", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (_rule(url=URL), "lineage.alerts.webhook[0].secret"),  # the secret is missing
        (_rule(url="ftp://x.example/", secret=SECRET), "lineage.alerts.webhook[0].url"),
        (_rule(url=URL, secret=SECRET, on=["run_exploded"]), "lineage.alerts.webhook[0].on"),
        (_rule(url=URL, secret=SECRET.removeprefix("whsec_")), "lineage.alerts.webhook[0].secret"),
        (_rule(url=URL, secrett=SECRET), "lineage.alerts.webhook[0].secrett"),  # pasted astray
        (
            _rule(url=URL, secret=SECRET) + _rule(url=URL, secret=SECRET),
            "lineage.alerts.webhook[1].url",
        ),
    ],
)
def test_check_refuses_a_bad_rule_without_the_secret(
    toml: Callable[[str], Path], table: str, key: str
) -> None:
    result = _check(toml(table))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert key in output, output
    assert "Traceback" not in output
    for text in (SECRET, SECRET.removeprefix("whsec_"), SECRET.removeprefix("whsec_")[:16]):
        assert text not in output


def test_check_refuses_a_bad_rule_given_by_variables(toml: Callable[[str], Path]) -> None:
    result = _check(
        toml("[lineage]\n"),
        {
            "LINEAGE_ALERTS_WEBHOOK_0_URL": "gopher://x.example/",
            "LINEAGE_ALERTS_WEBHOOK_0_SECRET": SECRET,
        },
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "lineage.alerts.webhook[0].url" in output
    assert "LINEAGE_ALERTS_WEBHOOK_0_URL" in output
    assert SECRET.removeprefix("whsec_")[:16] not in output


def test_the_secret_is_in_no_repr_and_no_log(
    toml: Callable[[str], Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = toml(_rule(url=f"[the hook]({URL})", secret=SECRET))  # a Markdown link: one warning
    config = load_config(path=path, environ={}, openlineage_client=False)
    (rule,) = rules_of(config)
    (table,) = config.named("alerts.webhook", WebhookConfig).values()
    assert rule.url == URL
    for text in (repr(rule), str(rule), repr(table), str(table), caplog.text, rule.key):
        assert SECRET.removeprefix("whsec_")[:16] not in text
    assert "Markdown link" in caplog.text


def test_alerts_secret_prints_a_usable_secret() -> None:
    result = CliRunner().invoke(app, ["alerts", "secret"])
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    Webhook(secret)  # the receivers' library takes it
    assert CliRunner().invoke(app, ["alerts", "secret"]).stdout.strip() != secret
    config = load_config(
        environ={"LINEAGE_ALERTS_WEBHOOK_0_URL": URL, "LINEAGE_ALERTS_WEBHOOK_0_SECRET": secret},
        openlineage_client=False,
    )
    assert rules_of(config)[0].secret == secret  # and the configuration takes it


# -- Rule --------------------------------------------------------------------------------------------


def test_a_rule_matches_its_kinds_and_namespaces() -> None:
    rule = Rule(URL, SECRET, frozenset({"run_failed", "quality_failed"}), ("shop", "team.*"), 3)
    assert rule.matches(_cause("run_failed", "shop"))
    assert rule.matches(_cause("quality_failed", "team.a.b"))  # `*` spans dots
    assert rule.matches(_cause("run_failed", "team."))
    assert not rule.matches(_cause("run_stale", "shop"))  # not in `on`
    assert not rule.matches(_cause("run_failed", "shopping"))  # a name is whole
    assert not rule.matches(_cause("run_failed", "my.team.a"))
    every = Rule(URL, SECRET, frozenset(CAUSE_KINDS), None, 10)
    assert all(every.matches(_cause(kind, "anything/at all")) for kind in CAUSE_KINDS)
    star = Rule(URL, SECRET, frozenset(CAUSE_KINDS), ("*",), 10)
    assert star.matches(_cause("run_failed", "x"))
    assert rule.depth == 3


def test_the_key_comes_from_the_url_alone() -> None:
    a = Rule(URL, SECRET, frozenset({"run_failed"}), None, 1)
    b = Rule(URL, OTHER, frozenset(CAUSE_KINDS), ("shop",), 9)
    c = Rule(URL + "/other", SECRET, frozenset({"run_failed"}), None, 1)
    assert a.key == b.key == rule_key(URL) == rule_key(f" {URL} ")
    assert a.key != c.key
    assert a.key == hashlib.sha256(URL.encode()).hexdigest()[:16]  # the same in every process
    tokened = Rule(
        "https://user:pw@h.example/x?token=abc123", SECRET, frozenset(CAUSE_KINDS), None, 1
    )
    assert "abc123" not in tokened.key
    assert "pw@" not in tokened.shown
    assert "abc123" not in tokened.shown


def test_store_url_defaults(toml: Callable[[str], Path]) -> None:
    config = load_config(environ={}, openlineage_client=False)
    assert alerts_settings(config).store_url(config) == "sqlite:///lineage.db"  # the sql store's
    given = {"LINEAGE_ALERTS_STORE": "postgresql+psycopg://u@h/watch"}
    config = load_config(environ=given, openlineage_client=False)
    assert alerts_settings(config).store_url(config) == "postgresql+psycopg://u@h/watch"
    other = {"LINEAGE_STORE_BACKEND": "memory"}
    config = load_config(environ=other, openlineage_client=False)
    assert alerts_settings(config).store_url(config) == DEFAULT_STORE_URL
    in_memory = {"LINEAGE_STORE_SQL_URL": "sqlite://"}
    config = load_config(environ=in_memory, openlineage_client=False)
    assert alerts_settings(config).store_url(config) == DEFAULT_STORE_URL


def test_check_shows_the_rules_and_the_watch_store_never_the_secret(
    toml: Callable[[str], Path], tmp_path: Path
) -> None:
    """The alerts' row of ``check`` (the broker is pointed at a closed port: no server is
    touched, and its failed row does not hide the alerts' row)."""
    path = toml(
        _rule(url="https://user:pw@hooks.example.com/x", secret=SECRET)
        + f'[lineage.alerts]\nstore = "sqlite:///{tmp_path / "watch.db"}"\n'
    )
    done = _check(path, {"LINEAGE_RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/"})
    assert done.returncode == 1, done.stdout + done.stderr
    shown = " ".join((done.stdout + done.stderr).split())
    assert "alerts" in shown and "1 rule(s)" in shown and "created at start" in shown
    assert SECRET not in shown and SECRET.removeprefix("whsec_")[:12] not in shown
    assert "pw@" not in shown
    assert not (tmp_path / "watch.db").exists()  # check changes nothing
