"""Column lineage over HTTP (``GET /api/v1/column-lineage``, checked against Marquez's
openapi.yml and our own OpenAPI document) and in the ``lineage columns`` CLI, from events posted
to a real server with the sql store on SQLite. One server for the module."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from api_helpers import PG, run_cli, run_event, validate_openapi_response
from jsonschema.exceptions import ValidationError
from openapi_check import validate_operation

from lineage_sdk.cli import main as cli_main
from lineage_sdk.collector.api import ApiServer, create_app
from lineage_sdk.collector.manager import LineageManager
from lineage_sdk.config.schema import LineageConfig

COLUMN_SCHEMA = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def writes(job: str, src: str, dst: str, fields: dict[str, Any], seconds: float) -> Any:
    event = run_event(job, inputs=[(PG, src)], outputs=[(PG, dst)], seconds=seconds)
    event["outputs"][0]["facets"] = {
        "columnLineage": {
            "_producer": event["producer"],
            "_schemaURL": COLUMN_SCHEMA,
            "fields": fields,
        }
    }
    return event


def direct(src: str, *cols: str, subtype: str = "IDENTITY") -> dict[str, Any]:
    return {
        "inputFields": [
            {
                "namespace": PG,
                "name": src,
                "field": col,
                "transformations": [{"type": "DIRECT", "subtype": subtype, "masking": False}],
            }
            for col in cols
        ]
    }


EVENTS = [
    writes(
        "stage",
        "raw.orders",
        "stg.orders",
        {"id": direct("raw.orders", "id"), "amount": direct("raw.orders", "amount")},
        1,
    ),
    writes(
        "mart",
        "stg.orders",
        "mart.daily",
        {
            "total": direct("stg.orders", "amount", subtype="AGGREGATION"),
            "orders": {  # the older facet form
                "inputFields": [{"namespace": PG, "name": "stg.orders", "field": "id"}],
                "transformationDescription": "COUNT(id)",
                "transformationType": "AGGREGATE",
            },
        },
        2,
    ),
    writes("export", "mart.daily", "export.csv", {"total": direct("mart.daily", "total")}, 3),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The API over a fresh SQLite store, the events posted once; (url, config file)."""
    folder = tmp_path_factory.mktemp("columns")
    db = folder / "lineage.db"
    toml = folder / "lineage.toml"
    toml.write_text(
        f'[lineage.store]\nbackend = "sql"\n[lineage.store.sql]\nurl = "sqlite:///{db}"\n',
        encoding="utf-8",
    )
    config = LineageConfig.model_validate(
        {"store": {"backend": "sql", "sql": {"url": f"sqlite:///{db}"}}}
    )
    manager = LineageManager(config)
    manager.connect_sync()
    api = ApiServer(create_app(manager)).start()
    try:
        posted = httpx.post(f"{api.url}/api/v1/lineage/batch", json=EVENTS, timeout=30)
        assert posted.status_code == 200, posted.text
        yield api.url, toml
    finally:
        api.stop()
        manager.close_sync()


def fid(dataset: str, field: str) -> str:
    return f"datasetField:{PG}:{dataset}:{field}"


def validate_column_lineage(body: Any) -> None:
    """Marquez's column-lineage answer, with field nodes only (as these roots give)."""
    validate_operation("getColumnLineage", body)
    assert {node["type"] for node in body["graph"]} <= {"DATASET_FIELD"}


def get(url: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/column-lineage", params=params, timeout=30)


def test_upstream_of_a_field_is_marquez_shaped_and_documented(server):
    url, _ = server
    response = get(url, nodeId=fid("export.csv", "total"), depth=5)
    assert response.status_code == 200, response.text
    body = response.json()
    validate_column_lineage(body)
    openapi = httpx.get(f"{url}/openapi.json").json()
    validate_openapi_response(openapi, "/api/v1/column-lineage", "get", 200, body)
    ids = [n["id"] for n in body["graph"]]
    assert ids[0] == fid("export.csv", "total")  # the root first
    assert set(ids) == {
        fid("export.csv", "total"),
        fid("mart.daily", "total"),
        fid("stg.orders", "amount"),
        fid("raw.orders", "amount"),
    }
    nodes = {n["id"]: n for n in body["graph"]}
    mart = nodes[fid("mart.daily", "total")]["data"]
    assert mart["inputFields"] == [
        {
            "namespace": PG,
            "dataset": "stg.orders",
            "field": "amount",
            "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION", "masking": False}],
        }
    ]
    # Marquez's default is upstream only: nothing derived from the root's inputs elsewhere
    assert fid("mart.daily", "orders") not in nodes


def test_depth_downstream_dataset_roots_and_old_form(server):
    url, _ = server
    one = get(url, nodeId=fid("export.csv", "total"), depth=1).json()
    assert len(one["graph"]) == 2
    down = get(url, nodeId=fid("raw.orders", "id"), depth=5, withDownstream="true").json()
    validate_column_lineage(down)
    assert {n["id"] for n in down["graph"]} == {
        fid("raw.orders", "id"),
        fid("stg.orders", "id"),
        fid("mart.daily", "orders"),
    }
    orders = next(n for n in down["graph"] if n["id"] == fid("mart.daily", "orders"))
    assert orders["data"]["inputFields"][0]["transformationDescription"] == "COUNT(id)"
    job = get(url, nodeId="job:shop:mart", depth=1).json()  # the fields the job writes
    validate_column_lineage(job)
    whole = get(url, nodeId=f"dataset:{PG}:mart.daily", depth=1).json()
    assert job == whole
    validate_column_lineage(whole)
    assert [n["id"] for n in whole["graph"][:2]] == [
        fid("mart.daily", "orders"),
        fid("mart.daily", "total"),
    ]


@pytest.mark.parametrize(
    ("params", "status", "reason"),
    [
        ({"nodeId": "run:shop:stage"}, 400, "invalid_node_id"),
        ({"nodeId": "job:shop:nothing"}, 404, "not_found"),
        ({"nodeId": "datasetField:ns"}, 400, "invalid_node_id"),
        ({"nodeId": fid("stg.orders", "nope")}, 404, "not_found"),
        ({"nodeId": f"dataset:{PG}:no.such"}, 404, "not_found"),
    ],
)
def test_bad_and_unknown_nodes(server, params, status, reason):
    response = get(server[0], **params)
    assert response.status_code == status
    assert response.json()["reason"] == reason
    assert get(server[0], nodeId=fid("a", "b"), depth=-1).status_code == 422


def test_the_openapi_check_can_fail():
    node = {
        "id": fid("a", "b"),
        "type": "DATASET_FIELD",
        "data": {"namespace": PG, "dataset": "a", "field": "b", "inputFields": [{"field": 1}]},
        "inEdges": [],
        "outEdges": [],
    }
    with pytest.raises(ValidationError):
        validate_column_lineage({"graph": [node]})
    with pytest.raises(ValidationError):
        validate_column_lineage({"graph": [{**node, "type": "COLUMN"}]})


def test_cli_columns_as_a_user_runs_it(server):
    """Real processes: the tree from the store, the JSON over HTTP (the same as the API's), and a
    dataset without its prefix, downstream only."""
    url, toml = server
    store = ["--config", str(toml)]
    result = run_cli(*store, "columns", f"dataset:{PG}:export.csv:total", "--depth", "5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert not ANSI.search(out)
    assert out.startswith("upstream of field")
    assert "downstream of field" in out
    for text in ("mart.daily.total", "stg.orders.amount", "raw.orders.amount", "AGGREGATION"):
        assert text in out, text
    as_json = run_cli("--url", url, "columns", fid("export.csv", "total"), "--upstream", "--json")
    assert as_json.returncode == 0, as_json.stderr
    from_api = get(url, nodeId=fid("export.csv", "total"), depth=5).json()
    assert orjson.loads(as_json.stdout) == from_api
    down = run_cli(*store, "columns", f"{PG}:stg.orders", "--downstream", "-d", "1")
    assert down.returncode == 0, down.stderr
    assert down.stdout.count("downstream of field") == 2 and "upstream of" not in down.stdout


@pytest.mark.parametrize(
    ("target", "code", "message"),
    [
        (f"dataset:{PG}:no.such", 1, "no column lineage is recorded"),
        ("job:shop:stage", 2, "takes a dataset or a field"),
        ("datasetField:ns", 2, "must be datasetField"),
        ("dataset:", 2, "node id"),
    ],
)
def test_cli_bad_input_is_one_line_without_traceback(server, capsys, target, code, message):
    """Through the console script's entry point, in this process (the real runs above cover
    the process itself): exit code, one line on stderr, no traceback."""
    url, toml = server
    for args in (["--url", url], ["--config", str(toml)]):
        with pytest.raises(SystemExit) as exit_:
            cli_main([*args, "columns", target])
        captured = capsys.readouterr()
        assert exit_.value.code == code, (args, captured.err)
        assert message in captured.err
        assert "Traceback" not in captured.err and captured.out == ""
        assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_cli_reading_the_store_loads_no_web_framework_and_answers_as_the_api(server):
    _, toml = server
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from lineage_sdk.cli import StoreSource\n"
        "source = StoreSource(Path(sys.argv[1]))\n"
        "import orjson\n"
        f"answer = source.column_lineage({fid('export.csv', 'total')!r}, 5, False)\n"
        "source.close()\n"
        "web = {m.split('.')[0] for m in sys.modules} & {'fastapi', 'starlette', 'uvicorn'}\n"
        "print(sorted(web))\n"
        "print(orjson.dumps(answer).decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(toml)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    web, answer = result.stdout.strip().splitlines()
    assert web == "[]"
    # read straight from the store, the same answer as over HTTP
    url = server[0]
    assert orjson.loads(answer) == get(url, nodeId=fid("export.csv", "total"), depth=5).json()
