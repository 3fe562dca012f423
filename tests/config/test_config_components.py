"""Configuration per component: a process validates only what it builds, plugins bring tables."""

from __future__ import annotations

import importlib
import textwrap

import pytest

import lineage_sdk
from lineage_sdk.config import load_config, refresh_registry
from lineage_sdk.config.reference import render
from lineage_sdk.config.sections import registered_sections
from lineage_sdk.exceptions import ConfigError
from lineage_sdk.sdk.exporters import InMemoryExporter, create_exporter

BAD_COLLECTOR = {"LINEAGE_COLLECTOR_RETRY_DELAYS_MS": "5000,1000"}


@pytest.fixture
def restore_sdk():
    yield
    lineage_sdk.shutdown(5.0)


def test_an_application_records_lineage_despite_a_bad_collector_setting(restore_sdk):
    config = load_config(environ={**BAD_COLLECTOR, "LINEAGE_EXPORTERS": "memory"})
    sdk = lineage_sdk.configure(config, strict=True)
    assert sdk is not None
    (exporter,) = sdk.exporters
    assert isinstance(exporter, InMemoryExporter)

    @lineage_sdk.track_lineage(job_name="app_job")
    def job() -> int:
        return 1

    assert job() == 1
    assert sdk.force_flush(10.0)
    assert [e["eventType"] for e in exporter.events] == ["START", "COMPLETE"]


def test_the_collector_still_refuses_the_same_setting():
    config = load_config(environ=BAD_COLLECTOR)
    with pytest.raises(ConfigError) as info:
        config.section("collector")
    assert info.value.key == "lineage.collector.retry_delays_ms"
    assert info.value.source == "environment variable LINEAGE_COLLECTOR_RETRY_DELAYS_MS"


def test_an_application_validates_the_exporters_it_uses(restore_sdk):
    environ = {"LINEAGE_RABBITMQ_URL": "http://broker:5672"}
    unused = load_config(environ={**environ, "LINEAGE_EXPORTERS": "memory"})
    assert lineage_sdk.configure(unused, strict=True) is not None
    used = load_config(environ={**environ, "LINEAGE_EXPORTERS": "rabbitmq"})
    with pytest.raises(ConfigError) as info:
        lineage_sdk.configure(used, strict=True)
    assert info.value.key == "lineage.rabbitmq.url"
    assert lineage_sdk.configure(used) is None  # not strict: logged, lineage off, no raise


def test_an_unknown_table_is_refused_with_a_hint(tmp_path):
    path = tmp_path / "lineage.toml"
    path.write_text('[lineage.rabitmq]\nurl = "amqp://h"\n')
    with pytest.raises(ConfigError, match=r"did you mean rabbitmq\?"):
        load_config(path=path, environ={})


def test_a_table_named_apart_is_its_components_config_class():
    """pyproject.toml names the table of each component that imports a driver, the engine or
    the OpenTelemetry SDK in lineage_sdk.config_sections too, so that listing the keys imports
    no component: it must be the component's own config_class (NO_SETTINGS: it has none)."""
    apart = {".".join(spec.path): spec for spec in registered_sections().values() if spec.config}
    assert {"rabbitmq", "http", "store.sql", "store.memory", "instrumentation.pika"} <= set(apart)
    for table, spec in apart.items():
        component = spec.entry_point.load()
        assert spec.model() is getattr(component, "config_class", None), table


PLUGIN = '''
from typing import ClassVar

from pydantic import Field

from lineage_sdk.config import Section
from lineage_sdk.sdk.exporters import InMemoryExporter


class PigeonConfig(Section):
    """The `pigeon` exporter: carrier pigeons from a loft."""

    loft: str = Field(default="roof", description="Where the pigeons live.")
    birds: int = Field(default=3, ge=1, description="Pigeons in the loft.")


class PigeonExporter(InMemoryExporter):
    config_class: ClassVar[type[Section]] = PigeonConfig

    def __init__(self, settings: PigeonConfig) -> None:
        super().__init__()
        self.settings = settings

    @classmethod
    def from_config(cls, config):
        return cls(config.section("pigeon", PigeonConfig))
'''


@pytest.fixture
def pigeon_plugin(tmp_path, monkeypatch):
    """A real third-party distribution on sys.path, registering the `pigeon` exporter."""
    (tmp_path / "lineage_pigeon.py").write_text(textwrap.dedent(PLUGIN))
    dist = tmp_path / "lineage_pigeon-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lineage-pigeon\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[lineage_sdk.exporters]\npigeon = lineage_pigeon:PigeonExporter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    refresh_registry()
    yield tmp_path
    monkeypatch.undo()
    importlib.invalidate_caches()
    refresh_registry()


def test_a_plugin_exporter_gets_its_own_table_variables_and_reference(pigeon_plugin):
    path = pigeon_plugin / "lineage.toml"
    path.write_text('[lineage]\nexporters = ["pigeon"]\n\n[lineage.pigeon]\nloft = "attic"\n')
    from_file = create_exporter("pigeon", load_config(path=path, environ={}))
    assert from_file.settings.loft == "attic"  # type: ignore[attr-defined]
    from_env = create_exporter(
        "pigeon", load_config(path=path, environ={"LINEAGE_PIGEON_BIRDS": "12"})
    )
    assert (from_env.settings.loft, from_env.settings.birds) == ("attic", 12)  # type: ignore[attr-defined]
    page = render()
    assert "## `[lineage.pigeon]`" in page
    assert "`LINEAGE_PIGEON_BIRDS`" in page and "Pigeons in the loft." in page


def test_a_plugin_table_rejects_unknown_keys_with_a_hint(pigeon_plugin):
    path = pigeon_plugin / "lineage.toml"
    path.write_text('[lineage.pigeon]\nlofts = "attic"\n')
    config = load_config(path=path, environ={})  # nothing builds the pigeon exporter yet
    with pytest.raises(ConfigError) as info:
        create_exporter("pigeon", config)
    assert info.value.key == "lineage.pigeon.lofts"
    assert "did you mean loft?" in str(info.value)
    bad = load_config(environ={"LINEAGE_PIGEON_BIRDS": "0"})
    with pytest.raises(ConfigError, match=r"lineage\.pigeon\.birds"):
        create_exporter("pigeon", bad)


def test_without_the_plugin_its_table_is_unknown(tmp_path):
    path = tmp_path / "lineage.toml"
    path.write_text('[lineage.pigeon]\nloft = "attic"\n')
    with pytest.raises(ConfigError, match=r"lineage\.pigeon"):
        load_config(path=path, environ={})
