"""Property tests of the text parsing behind environment variables and flags."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage_sdk.config import config_keys, load_config, redact
from lineage_sdk.exceptions import ConfigError

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Text an environment variable can hold: no NUL, no lone surrogates.
env_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
spaces = st.text(" \t", max_size=3)


@st.composite
def spaced(draw: st.DrawFn, items: list[str]) -> str:
    return ",".join(draw(spaces) + item + draw(spaces) for item in items)


@SETTINGS
@given(
    st.lists(st.integers(1, 10**12), max_size=8)
    .map(sorted)
    .flatmap(lambda ints: st.tuples(st.just(ints), spaced([str(i) for i in ints])))
)
def test_int_lists_round_trip(case):
    ints, text = case
    config = load_config(environ={"LINEAGE_COLLECTOR_RETRY_DELAYS_MS": text})
    expected = ints if text.strip(" ,\t") else [1000, 5000, 30000]  # blank = unset
    assert config.section("collector").retry_delays_ms == expected


name_item = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters=","),
    min_size=1,
    max_size=12,
)


@SETTINGS
@given(
    st.lists(name_item, min_size=1, max_size=6, unique=True).flatmap(
        lambda names: st.tuples(st.just(names), spaced(names))
    )
)
def test_string_lists_round_trip(case):
    names, text = case
    config = load_config(environ={"LINEAGE_EXPORTERS": text})
    assert config.exporters == names


@SETTINGS
@given(
    st.sampled_from(["true", "false", "1", "0", "yes", "no", "on", "off"]).flatmap(
        lambda word: st.tuples(st.just(word), st.tuples(*[st.booleans() for _ in word]))
    ),
    spaces,
    spaces,
)
def test_bool_words_in_any_case(case, before, after):
    word, upper = case
    text = before + "".join(c.upper() if u else c for c, u in zip(word, upper, strict=True)) + after
    config = load_config(environ={"LINEAGE_RABBITMQ_TLS_VERIFY": text})
    assert config.section("rabbitmq").tls_verify is (word in ("true", "1", "yes", "on"))


@SETTINGS
@given(st.integers(1, 2**62), spaces, spaces, st.sampled_from(["", "+"]))
def test_ints_round_trip(value, before, after, sign):
    text = f"{before}{sign}{value}{after}"
    config = load_config(environ={"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": text})
    assert config.pipeline.max_queue_size == value


@SETTINGS
@given(env_text.filter(lambda t: t.strip() and not re.fullmatch(r"\s*[+-]?[0-9]+\s*", t)))
def test_non_ints_are_named_errors(text):
    with pytest.raises(ConfigError) as info:
        load_config(environ={"LINEAGE_PIPELINE_MAX_QUEUE_SIZE": text})
    assert info.value.key == "lineage.pipeline.max_queue_size"
    assert "LINEAGE_PIPELINE_MAX_QUEUE_SIZE" in str(info.value)
    assert "must be an integer >= 1" in str(info.value)


@SETTINGS
@given(env_text.filter(lambda t: t.strip() != ""))
def test_strings_round_trip_exactly(text):
    config = load_config(environ={"LINEAGE_PRODUCER_JOB_NAMESPACE": text})
    assert config.producer.job_namespace == text


@SETTINGS
@given(
    st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True),
    st.sampled_from(["URI", "USERNAME", "PASSWORD", "DATABASE", "TIMEOUT_MS"]),
)
def test_connection_names_are_lower_cased(name, key):
    environ = {f"LINEAGE_CONNECTIONS_{name}_URI": "mongodb://h/db"}
    environ[f"LINEAGE_CONNECTIONS_{name}_{key}"] = "77" if key == "TIMEOUT_MS" else "v77"
    config = load_config(environ=environ)
    assert list(config.named("connections")) == [name.lower()]
    value = getattr(config.named("connections")[name.lower()], key.lower())
    assert value == (77 if key == "TIMEOUT_MS" else "v77")


plain_keys = [key for key in config_keys() if not key.templated]


@SETTINGS
@given(st.dictionaries(st.sampled_from([key.env_var for key in plain_keys]), env_text, max_size=6))
def test_any_env_text_loads_or_gives_a_config_error(environ):
    # whatever the text, the result is a config or one ConfigError, never another exception
    error: ConfigError | None = None
    try:
        load_config(environ=environ)
    except ConfigError as exc:
        error = exc
    if error is not None:
        assert error.key.startswith("lineage.")
        assert error.source is not None
        assert error.source.startswith("environment variable LINEAGE_")
        assert "\n" not in str(error)  # values are shown with repr: one line, always


secret_text = st.text(
    st.characters(
        whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters="!$%&'()*+;=-._~/:"
    ),
    min_size=1,
    max_size=20,
)


@SETTINGS
@given(
    st.sampled_from(["amqp", "amqps", "http", "https", "mongodb", "neo4j+s", "postgresql"]),
    st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
    secret_text,
    st.from_regex(r"[a-z][a-z0-9.]{0,15}", fullmatch=True),
)
def test_redact_hides_any_url_password(scheme, user, password, host):
    secret = "Zq9" + password  # a marker that cannot appear in the rest of the URL
    url = f"{scheme}://{user}:{secret}@{host}:5672/vhost"
    hidden = redact(url)
    assert secret not in hidden
    assert hidden == f"{scheme}://{user}:***@{host}:5672/vhost"
    assert redact(hidden) == hidden
