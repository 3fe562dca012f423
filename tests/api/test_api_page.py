"""The graph page in a real headless Debian chromium, driven by selenium through chromedriver.

Needs ``apt-get install -y chromium chromium-driver``. Skipped with that reason when chromium is
absent, except under CI (CI set), where its absence is a failure. A screenshot is saved under
``artifacts/`` at the repository root (gitignored) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from api_helpers import HOSTILE_DATASET, HOSTILE_JOB, PG, column_pipeline, run_event

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if not missing:
        return
    message = (
        f"{', '.join(missing)} not installed; run: apt-get update && "
        "apt-get install -y chromium chromium-driver"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """One headless chromium for the module (starting one takes ~3 s); see ``browser``."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager must never download
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium):
    """The module's chromium, on a blank page with its console log emptied for this test."""
    chromium.get("about:blank")
    chromium.get_log("browser")
    return chromium


def _wait(driver, condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {condition}")


def _ready(driver) -> str:
    return _wait(
        driver,
        "return ['ready','error','empty'].includes(document.body.dataset.state)"
        " && document.body.dataset.state",
    )


def _open(driver, url: str, node: str, depth: int = 10) -> None:
    driver.get(f"{url}/#nodeId={quote(node, safe='')}&depth={depth}&direction=both")
    assert _ready(driver) == "ready", driver.find_element("id", "status").text


def _click_node(driver, node: str) -> None:
    """A real mouse click on the node where cytoscape drew it on the canvas."""
    from selenium.webdriver.common.action_chains import ActionChains

    pos = driver.execute_script("return window.lineagePage.nodeClientPosition(arguments[0])", node)
    assert pos is not None, f"{node} is not drawn"
    body = driver.find_element("tag name", "body")
    size = body.size
    (
        ActionChains(driver)
        .move_to_element_with_offset(
            body, int(pos["x"] - size["width"] / 2), int(pos["y"] - size["height"] / 2)
        )
        .click()
        .perform()
    )


def test_graph_page_shows_the_known_graph_and_node_details(api, loaded, browser):
    driver = browser
    _open(driver, api.url, f"dataset:{PG}:stg.orders")

    drawn = set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))
    expected = {
        f"dataset:{PG}:raw.orders",
        "job:shop:extract",
        f"dataset:{PG}:stg.orders",
        "job:shop:clean",
        f"dataset:{PG}:clean.orders",
        "job:shop:audit",
        f"dataset:{PG}:audit.log",
        "job:shop:report",
        f"dataset:{PG}:mart.daily",
        f"job:shop:{HOSTILE_JOB}",
        f"dataset:{PG}:export.csv",
    }
    assert drawn == expected
    listed = {
        b.get_attribute("data-node-id")
        for b in driver.find_elements("css selector", "#node-list button")
    }
    assert listed == expected
    # Jobs and datasets are drawn differently; the failed job is marked; the root too.
    shapes = driver.execute_script(
        "const cy = window.lineagePage.cy;"
        "return cy.nodes().map(n => [n.id(), n.style('shape'), n.hasClass('failed'),"
        " n.hasClass('root')]);"
    )
    by_id = {nid: (shape, failed, root) for nid, shape, failed, root in shapes}
    assert by_id["job:shop:extract"][0] != by_id[f"dataset:{PG}:raw.orders"][0]
    assert by_id["job:shop:clean"][1] is True
    assert by_id["job:shop:extract"][1] is False
    assert by_id[f"dataset:{PG}:stg.orders"][2] is True

    _click_node(driver, "job:shop:clean")
    details = driver.find_element("id", "details-body")
    _wait(driver, "return document.querySelector('#node-details') !== null")
    text = details.text
    assert "clean" in text and "shop" in text and "FAILED" in text
    # The job's recent runs arrive from the API.
    _wait(driver, "return document.querySelectorAll('#details-body .runs li').length > 0")
    assert "FAILED" in driver.find_element("css selector", "#details-body .runs").text

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "graph-page.png"
    assert driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors  # no CSP violation, no failed load, no script error


def test_depth_control_changes_the_graph(api, loaded, browser):
    driver = browser
    _open(driver, api.url, "job:shop:extract", depth=10)
    wide = driver.execute_script("return window.lineagePage.cy.nodes().length")
    depth = driver.find_element("id", "depth-input")
    depth.clear()
    depth.send_keys("0")
    driver.find_element("id", "show-button").click()
    _wait(driver, "return location.hash.includes('depth=0')")
    assert _ready(driver) == "ready"
    narrow = set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))
    assert narrow == {"job:shop:extract", f"dataset:{PG}:raw.orders", f"dataset:{PG}:stg.orders"}
    assert wide > len(narrow)


def test_hostile_names_are_shown_as_text_and_never_run(api, loaded, browser):
    driver = browser
    _open(driver, api.url, f"job:shop:{HOSTILE_JOB}")
    _click_node(driver, f"job:shop:{HOSTILE_JOB}")
    _wait(driver, "return document.querySelector('#node-details') !== null")
    assert HOSTILE_JOB in driver.find_element("id", "details-body").text
    listed = driver.find_element("id", "node-list").text
    assert HOSTILE_JOB in listed
    # Open the report job too, whose input is the <img onerror> dataset.
    _open(driver, api.url, "job:shop:report", depth=1)
    assert HOSTILE_DATASET in driver.find_element("id", "node-list").text
    assert driver.execute_script("return window.__pwned === undefined")
    # And through the search box, whose hits are data too.
    box = driver.find_element("id", "search-input")
    box.send_keys("onerror")
    box.submit()
    _wait(driver, "return document.querySelectorAll('#search-results button').length === 1")
    assert HOSTILE_DATASET in driver.find_element("id", "search-results").text
    injected = (
        "#node-list img, #details-body img, #status img, #search-results img, script[src='x']"
    )
    assert driver.find_elements("css selector", injected) == []
    assert driver.execute_script(
        "return Array.from(document.scripts).every(s => s.src.startsWith(location.origin))"
    )


def test_page_loads_nothing_from_elsewhere(api, loaded, browser):
    driver = browser
    _open(driver, api.url, "job:shop:report")
    origins = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).origin)"
    )
    assert origins and set(origins) == {api.url}


def test_page_without_a_node_lists_jobs_to_choose_from(api, loaded, browser):
    driver = browser
    driver.get(api.url + "/")
    assert _ready(driver) == "empty"
    _wait(driver, "return document.querySelectorAll('#node-list button').length >= 5")
    button = driver.find_element("css selector", '#node-list button[data-node-id="job:shop:audit"]')
    button.click()
    assert _ready(driver) == "ready"
    assert "job%3Ashop%3Aaudit" in driver.current_url


# ---- search, namespaces, runs, fields, column lineage, export, shareable URLs -------------------


@pytest.fixture
def columns(api, loaded):
    """The known pipeline plus two runs carrying schema and columnLineage facets."""
    events = column_pipeline()
    response = api.client.post("/api/v1/lineage/batch", json=events)
    assert response.status_code == 200, response.text
    assert response.json()["summary"]["successful"] == len(events)
    return events


def _details(driver) -> str:
    _wait(driver, "return document.querySelector('#node-details') !== null")
    return driver.find_element("id", "details-body").text


def _server_has_column_lineage(api) -> bool:
    return "/api/v1/column-lineage" in api.client.get("/openapi.json").json()["paths"]


def test_search_box_lists_matches_with_namespaces_and_opens_one(api, columns, browser):
    driver = browser
    _open(driver, api.url, "job:shop:extract")
    box = driver.find_element("id", "search-input")
    box.send_keys("enrich")
    box.submit()
    _wait(driver, "return document.querySelectorAll('#search-results button').length >= 2")
    hits = driver.find_elements("css selector", "#search-results button")
    by_id = {b.get_attribute("data-node-id"): b.text for b in hits}
    # Same answer as the API's search, in the API's order.
    expected = [
        r["nodeId"]
        for r in api.client.get("/api/v1/search", params={"q": "enrich"}).json()["results"]
    ]
    assert [b.get_attribute("data-node-id") for b in hits] == expected
    assert {"job:shop:enrich", f"dataset:{PG}:mart.enriched", f"dataset:{PG}:pub.enriched"} <= set(
        by_id
    )
    assert "shop" in by_id["job:shop:enrich"] and PG in by_id[f"dataset:{PG}:mart.enriched"]
    assert "matches" in driver.find_element("id", "search-status").text
    next(
        b for b in hits if b.get_attribute("data-node-id") == f"dataset:{PG}:mart.enriched"
    ).click()
    _wait(driver, "return location.hash.includes('mart.enriched')")
    assert _ready(driver) == "ready"
    assert (
        driver.execute_script("return window.lineagePage.cy.$('.root').id()")
        == f"dataset:{PG}:mart.enriched"
    )
    # Nothing found is said, not left blank.
    box.clear()
    box.send_keys("no-such-thing-anywhere")
    box.submit()
    _wait(
        driver, "return document.getElementById('search-status').textContent.startsWith('Nothing')"
    )
    assert driver.find_elements("css selector", "#search-results li") == []


def test_namespaces_are_on_the_nodes_in_the_list_and_in_details(api, columns, browser):
    driver = browser
    _open(driver, api.url, "job:shop:enrich", depth=1)
    labels = dict(
        driver.execute_script(
            "return window.lineagePage.cy.nodes().map(n => [n.id(), n.data('label')])"
        )
    )
    assert labels["job:shop:enrich"] == "enrich\nshop"
    assert labels[f"dataset:{PG}:mart.enriched"] == f"mart.enriched\n{PG}"
    listed = driver.find_element(
        "css selector", f'#node-list button[data-node-id="dataset:{PG}:stg.orders"]'
    )
    assert listed.find_element("css selector", ".ns").text == PG
    _click_node(driver, f"dataset:{PG}:stg.orders")
    _wait(driver, f"return location.hash.includes({quote('stg.orders')!r})")
    rows = driver.find_elements("css selector", "#node-details dt, #node-details dd")
    pairs = dict(zip([r.text for r in rows[::2]], [r.text for r in rows[1::2]], strict=True))
    assert pairs["namespace"] == PG and pairs["name"] == "stg.orders"
    assert pairs["source"] == "default"  # Marquez's source of a dataset without dataSource
    # Readable without a mouse or without sight: every control is labelled, every button named.
    unlabelled = driver.execute_script(
        "return Array.from(document.querySelectorAll('input, select'))"
        ".filter(e => e.type !== 'hidden' && !e.closest('[hidden]'))"
        ".filter(e => !(e.id && document.querySelector('label[for=\"' + e.id + '\"]')))"
        ".map(e => e.id || e.outerHTML)"
    )
    assert unlabelled == []
    unnamed = driver.execute_script(
        "return Array.from(document.querySelectorAll('button'))"
        ".filter(b => !b.textContent.trim() && !b.getAttribute('aria-label')).map(b => b.outerHTML)"
    )
    assert unnamed == []


def test_run_list_shows_state_start_duration_and_event_count(api, columns, browser):
    import re

    driver = browser
    _open(driver, api.url, "job:shop:enrich", depth=1)
    _details(driver)
    _wait(
        driver,
        "return /events?$/.test((document.querySelector('#details-body .runs li .events-button') || {}).textContent || '') && document.querySelector('#details-body .runs li .events-button').textContent !== 'events'",
    )
    line = driver.find_element("css selector", "#details-body .runs li").text
    assert re.fullmatch(r"COMPLETED · 2025-03-01 00:06:40 UTC · 1\.5 s · 2 events", line), line
    # The failed job: its state, a 12 s run, its two events; and the events open on demand.
    _open(driver, api.url, "job:shop:clean", depth=1)
    _details(driver)
    _wait(
        driver,
        "return (document.querySelector('#details-body .events-button') || {}).textContent === '2 events'",
    )
    line = driver.find_element("css selector", "#details-body .runs li").text
    assert line == "FAILED · 2025-03-01 00:01:40 UTC · 12.0 s · 2 events", line
    assert "msevents" not in driver.find_element("id", "details-body").text
    button = driver.find_element("css selector", "#details-body .events-button")
    button.click()
    _wait(driver, "return document.querySelector('#details-body pre.event') !== null")
    shown = driver.find_element("css selector", "#details-body pre.event").text
    assert '"eventType": "START"' in shown and '"eventType": "FAIL"' in shown
    assert button.get_attribute("aria-expanded") == "true"


def test_dataset_details_list_its_schema_fields(api, columns, browser):
    driver = browser
    _open(driver, api.url, f"dataset:{PG}:mart.enriched", depth=1)
    _details(driver)
    _wait(driver, "return document.querySelectorAll('table.fields tbody tr').length > 0")
    rows = [
        [td.text for td in tr.find_elements("css selector", "td")]
        for tr in driver.find_elements("css selector", "table.fields tbody tr")
    ]
    assert rows == [
        ["order_id", "INTEGER", "the order"],
        ["amount_eur", "DECIMAL(10,2)", "amount in euros"],
    ]
    # A dataset no event gave a schema says so.
    _open(driver, api.url, f"dataset:{PG}:raw.orders", depth=1)
    _wait(
        driver,
        "return (document.querySelector('.fields-box .hint') || {}).textContent === 'No schema recorded for this dataset.'",
    )


def test_a_field_shows_its_upstream_and_downstream_fields(api, columns, browser):
    driver = browser
    _open(driver, api.url, f"dataset:{PG}:mart.enriched", depth=3)
    _details(driver)
    _wait(
        driver, "return document.querySelector('.field-button[data-field=\"amount_eur\"]') !== null"
    )
    driver.find_element("css selector", '.field-button[data-field="amount_eur"]').click()
    _wait(driver, "return location.hash.includes('field=amount_eur')")
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-fields.png"))
    pressed = driver.find_element("css selector", '.field-button[data-field="amount_eur"]')
    assert pressed.get_attribute("aria-pressed") == "true"
    if not _server_has_column_lineage(api):
        # Until GET /api/v1/column-lineage is served, the page says so and asks nothing.
        _wait(driver, "return document.querySelector('#column-lineage .not-available') !== null")
        assert "not available" in driver.find_element("id", "column-lineage").text
        return
    _wait(driver, "return document.querySelector('#upstream-fields') !== null")
    upstream = {
        li.get_attribute("data-field-id")
        for li in driver.find_elements("css selector", "#upstream-fields li[data-field-id]")
    }
    downstream = {
        li.get_attribute("data-field-id")
        for li in driver.find_elements("css selector", "#downstream-fields li[data-field-id]")
    }
    assert upstream == {f"datasetField:{PG}:stg.orders:amount"}
    assert downstream == {f"datasetField:{PG}:pub.enriched:total"}
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-columns.png"))
    # Following a field opens its dataset with that field chosen.
    driver.find_element("css selector", "#downstream-fields li button").click()
    _wait(
        driver,
        "return location.hash.includes('pub.enriched') && location.hash.includes('field=total')",
    )
    assert _ready(driver) == "ready"


def test_export_downloads_png_and_svg_of_the_drawn_graph(api, columns, browser, tmp_path):
    import xml.etree.ElementTree as ET

    driver = browser
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    _open(driver, api.url, "job:shop:report", depth=1)
    driver.find_element("id", "export-png").click()
    driver.find_element("id", "export-svg").click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and sorted(p.name for p in downloads.iterdir()) != [
        "lineage-report.png",
        "lineage-report.svg",
    ]:
        time.sleep(0.1)
    png = (downloads / "lineage-report.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000
    svg = ET.fromstring((downloads / "lineage-report.svg").read_bytes())
    ns = {"s": "http://www.w3.org/2000/svg"}
    drawn = set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))
    edges = driver.execute_script(
        "return window.lineagePage.cy.edges().map(e => [e.source().id(), e.target().id()])"
    )
    groups = svg.findall("s:g[@class='nodes']/s:g", ns)
    assert {g.get("data-id") for g in groups} == drawn
    assert sorted(
        (line.get("data-source"), line.get("data-target"))
        for line in svg.findall("s:g[@class='edges']/s:line", ns)
    ) == sorted(map(tuple, edges))
    # Jobs as rectangles, datasets as ellipses, names and namespaces as text (the hostile
    # dataset name too: escaped by the serializer, read back intact).
    texts = {
        g.get("data-id"): ["".join(t.itertext()) for t in g.findall("s:text/s:tspan", ns)]
        for g in groups
    }
    assert texts["job:shop:report"] == ["report", "shop"]
    assert texts[f"dataset:{PG}:{HOSTILE_DATASET}"][0].startswith("<img src=x")
    assert all(g.find("s:rect", ns) is not None for g in groups if g.get("class") == "job")
    assert all(g.find("s:ellipse", ns) is not None for g in groups if g.get("class") == "dataset")
    assert driver.execute_script("return window.__pwned === undefined")


def test_depth_direction_and_selection_survive_a_reload(api, columns, browser):
    driver = browser
    driver.get(f"{api.url}/")
    _ready(driver)
    driver.find_element("id", "node-input").send_keys(f"dataset:{PG}:mart.enriched")
    depth = driver.find_element("id", "depth-input")
    depth.clear()
    depth.send_keys("2")
    driver.find_element("css selector", "#direction-input option[value='upstream']").click()
    driver.find_element("id", "show-button").click()
    assert _ready(driver) == "ready"
    _click_node(driver, "job:shop:enrich")
    _wait(driver, "return location.hash.includes('selected=')")
    _click_node(driver, f"dataset:{PG}:stg.orders")
    _wait(
        driver,
        f"return location.hash.includes('selected=' + encodeURIComponent({'dataset:' + PG + ':stg.orders'!r}))",
    )
    _wait(driver, "return document.querySelector('.field-button[data-field=\"amount\"]') !== null")
    driver.find_element("css selector", '.field-button[data-field="amount"]').click()
    _wait(driver, "return location.hash.includes('field=amount')")
    shared = driver.current_url
    before = set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))

    driver.get("about:blank")
    driver.get(shared)  # the link as someone else would open it
    assert _ready(driver) == "ready"
    assert driver.find_element("id", "depth-input").get_attribute("value") == "2"
    assert driver.find_element("id", "direction-input").get_attribute("value") == "upstream"
    assert (
        driver.find_element("id", "node-input").get_attribute("value")
        == f"dataset:{PG}:mart.enriched"
    )
    assert (
        set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))
        == before
    )
    assert driver.execute_script(
        "return window.lineagePage.cy.$(':selected').map(n => n.id())"
    ) == [f"dataset:{PG}:stg.orders"]
    assert "stg.orders" in _details(driver)
    _wait(
        driver,
        "return (document.querySelector('.field-button[aria-pressed=\"true\"]') || {}).textContent === 'amount'",
    )
    assert driver.current_url == shared


def test_declared_edges_are_drawn_dashed(api, loaded, browser):
    """A JobEvent's declared inputs and outputs (static lineage) beside the observed ones."""
    job_event = {
        "eventTime": "2025-03-02T00:00:00Z",
        "producer": "https://example.com/declared",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "shop", "name": "planned", "facets": {}},
        "inputs": [{"namespace": PG, "name": "mart.daily", "facets": {}}],
        "outputs": [{"namespace": PG, "name": "forecast", "facets": {}}],
    }
    assert api.client.post("/api/v1/lineage", json=job_event).status_code == 201
    driver = browser
    _open(driver, api.url, "job:shop:planned", depth=1)
    edges = driver.execute_script(
        "return window.lineagePage.cy.edges().map(e => [e.source().id(), e.target().id(),"
        " e.hasClass('declared'), e.style('line-style')]);"
    )
    by_pair = {(s, t): (declared, style) for s, t, declared, style in edges}
    assert by_pair[(f"dataset:{PG}:mart.daily", "job:shop:planned")] == (True, "dashed")
    assert by_pair[("job:shop:planned", f"dataset:{PG}:forecast")] == (True, "dashed")
    observed = [style for (_s, t), (declared, style) in by_pair.items() if not declared]
    assert observed and set(observed) == {"solid"}  # mart.daily's own run edges


def test_a_lineage_facets_edges_are_drawn_dashed(api, loaded, browser):
    """A run's explicit ``lineage`` facet (issue 32): its edges are declared, so dashed."""
    event = run_event("explicit", namespace="shop", seconds=50)
    ds = {"namespace": PG, "name": "mart.daily", "type": "DATASET"}
    entry = {"namespace": PG, "name": "forecast2", "type": "DATASET", "inputs": [ds]}
    event["job"]["facets"] = {
        "lineage": {
            "_producer": "https://example.com/explicit",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/LineageFacet.json",
            "entries": [entry],
        }
    }
    assert api.client.post("/api/v1/lineage", json=event).status_code == 201
    driver = browser
    _open(driver, api.url, "job:shop:explicit", depth=1)
    edges = driver.execute_script(
        "return window.lineagePage.cy.edges().map(e => [e.source().id(), e.target().id(),"
        " e.hasClass('declared'), e.style('line-style')]);"
    )
    by_pair = {(s, t): (declared, style) for s, t, declared, style in edges}
    assert by_pair[(f"dataset:{PG}:mart.daily", "job:shop:explicit")] == (True, "dashed")
    assert by_pair[("job:shop:explicit", f"dataset:{PG}:forecast2")] == (True, "dashed")


def _drawn(driver) -> set[str]:
    return set(driver.execute_script("return window.lineagePage.cy.nodes().map(n => n.id())"))


def test_time_slider_draws_the_past_and_the_url_keeps_it(api, browser):
    """hist:first writes hist:mid at t=0..1, hist:second reads it at t=100..101: the slider's
    start (the first event) draws the graph before hist:second existed; a reload keeps asOf."""
    from selenium.webdriver.common.keys import Keys

    events = [
        run_event(
            job,
            namespace="hist",
            event_type=kind,
            run_id=run,
            inputs=[src],
            outputs=[dst],
            seconds=at + delta,
        )
        for job, run, src, dst, at in (
            ("first", "01900000-0000-7000-8000-0000000000f1", ("hist", "src"), ("hist", "mid"), 0),
            (
                "second",
                "01900000-0000-7000-8000-0000000000f2",
                ("hist", "mid"),
                ("hist", "late"),
                100,
            ),
        )
        for kind, delta in (("START", 0), ("COMPLETE", 1))
    ]
    assert api.client.post("/api/v1/lineage/batch", json=events).status_code == 200
    driver = browser
    _open(driver, api.url, "dataset:hist:mid")
    assert "job:hist:second" in _drawn(driver)
    assert driver.find_element("id", "asof-now").get_attribute("disabled") is not None

    driver.find_element("id", "asof-range").send_keys(Keys.HOME)  # a real key on the slider
    _wait(driver, "return location.hash.includes('asOf=')")
    _wait(
        driver,
        "return document.body.dataset.state === 'ready'"
        " && !window.lineagePage.cy.nodes().some(n => n.id() === 'job:hist:second')",
    )
    assert _drawn(driver) == {"dataset:hist:src", "job:hist:first", "dataset:hist:mid"}
    assert driver.find_element("id", "asof-input").get_attribute("value").startswith("20")

    shared = driver.current_url
    driver.get("about:blank")
    driver.get(shared)
    assert _ready(driver) == "ready"
    assert _drawn(driver) == {"dataset:hist:src", "job:hist:first", "dataset:hist:mid"}
    assert "as of" in driver.find_element("id", "status").text
    assert driver.current_url == shared

    driver.find_element("id", "asof-now").click()
    _wait(driver, "return !location.hash.includes('asOf=')")
    _wait(
        driver,
        "return document.body.dataset.state === 'ready'"
        " && window.lineagePage.cy.nodes().some(n => n.id() === 'job:hist:second')",
    )
    assert driver.find_element("id", "asof-input").get_attribute("value") == ""


# ---- bounded reads: one hop, expand on click, the node limit (#16 item 8) ----------------------


def _hop(api, node: str, depth: int = 1) -> dict[str, dict]:
    answer = api.client.get(
        "/api/v1/lineage", params={"nodeId": node, "depth": depth, "direction": "both"}
    ).json()
    return {n["id"]: n for n in answer["graph"]}


def _with_more(api, views: list[str], drawn: set[str]) -> set[str]:
    """The drawn nodes with a neighbour not drawn, as the views one hop deeper show them:
    those the page outlines."""
    neighbours: dict[str, set[str]] = {}
    for view in views:
        for n in _hop(api, view, depth=2).values():
            for e in n["inEdges"] + n["outEdges"]:
                neighbours.setdefault(e["origin"], set()).add(e["destination"])
                neighbours.setdefault(e["destination"], set()).add(e["origin"])
    return {nid for nid in drawn if neighbours.get(nid, set()) - drawn}


def _outlined(driver) -> set[str]:
    """The outlined nodes once the page has asked what lies beyond the drawn ones."""
    _wait(driver, "return document.body.dataset.lookahead === 'done'")
    return _marked(driver)


def _positions(driver) -> dict[str, tuple[float, float]]:
    return {
        nid: (x, y)
        for nid, x, y in driver.execute_script(
            "return window.lineagePage.cy.nodes().map(n => [n.id(), n.position('x'),"
            " n.position('y')])"
        )
    }


def _marked(driver) -> set[str]:
    return set(
        driver.execute_script("return window.lineagePage.cy.$('node.more').map(n => n.id())")
    )


def test_page_opens_one_hop_and_a_click_adds_the_next(api, loaded, browser):
    """No depth in the link: one hop. A node with neighbours not drawn is outlined; a click
    adds one hop around it without moving what was drawn; a reload draws the same graph."""
    driver = browser
    clean, stg, daily = "job:shop:clean", f"dataset:{PG}:stg.orders", f"dataset:{PG}:mart.daily"
    driver.get(f"{api.url}/#nodeId={quote(clean, safe='')}")
    assert _ready(driver) == "ready"
    assert "depth=1" in driver.current_url
    assert driver.find_element("id", "depth-input").get_attribute("value") == "1"
    known = _hop(api, clean)
    first = set(known)
    assert _drawn(driver) == first
    # stg.orders is also read by audit, which no view around clean reaches (audit is neither up
    # nor downstream of clean); mart.daily is read by the hostile job, two hops down.
    assert "job:shop:audit" not in known
    outlined = _outlined(driver)
    assert daily in outlined and clean not in outlined
    assert outlined == _with_more(api, [clean], set(known))
    assert driver.find_element("id", "truncated-notice").get_attribute("hidden") is not None
    before = _positions(driver)

    _click_node(driver, stg)
    _wait(driver, f"return location.hash.includes('expand=' + encodeURIComponent({stg!r}))")
    assert _ready(driver) == "ready"
    known = {**_hop(api, stg), **known}
    assert "job:shop:audit" in known
    _wait(driver, f"return window.lineagePage.cy.nodes().length === {len(known)}")
    assert _drawn(driver) == set(known)
    after = _positions(driver)
    assert {nid: after[nid] for nid in before} == before  # nothing already drawn moved
    # The click also opened its details; it is no longer outlined.
    assert "stg.orders" in _details(driver)
    outlined = _outlined(driver)
    assert stg not in outlined
    assert outlined == _with_more(api, [clean, stg], set(known))
    drawn_edges = set(
        map(
            tuple,
            driver.execute_script(
                "return window.lineagePage.cy.edges().map(e => [e.source().id(), e.target().id()])"
            ),
        )
    )
    assert (stg, "job:shop:audit") in drawn_edges
    assert "expanded" in driver.find_element("id", "status").text

    # The details panel expands too (chosen from the node list, without the mouse on the graph).
    assert daily in outlined
    driver.find_element("css selector", f'#node-list button[data-node-id="{daily}"]').click()
    _wait(driver, "return document.querySelector('#details-body .expand-button') !== null")
    driver.find_element("css selector", "#details-body .expand-button").click()
    _wait(driver, f"return location.hash.includes({quote(daily, safe='')!r})")
    known = {**_hop(api, daily), **known}
    assert f"job:shop:{HOSTILE_JOB}" in known
    _wait(driver, f"return window.lineagePage.cy.nodes().length === {len(known)}")
    assert _drawn(driver) == set(known)
    assert driver.execute_script("return window.__pwned === undefined")

    shared = driver.current_url
    driver.get("about:blank")
    driver.get(shared)
    assert _ready(driver) == "ready"
    assert _drawn(driver) == set(known)
    assert _outlined(driver) == _with_more(api, [clean, stg, daily], set(known))
    assert {stg, daily} & _marked(driver) == set()
    assert driver.current_url == shared
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-expanded.png"))
    # "Collapse expansions" goes back to the one hop, the URL too.
    driver.find_element("id", "collapse").click()
    _wait(driver, "return !location.hash.includes('expand=')")
    assert _ready(driver) == "ready"
    assert _drawn(driver) == first
    assert driver.find_element("id", "collapse").get_attribute("disabled") is not None
    # Another node drops the expansions; an explicit depth in the link still works.
    _open(driver, api.url, "job:shop:report", depth=2)
    assert "expand=" not in driver.current_url
    assert _drawn(driver) == {
        n["id"]
        for n in api.client.get(
            # the page's walk: both directed ways (the API's default is Marquez's undirected one)
            "/api/v1/lineage",
            params={"nodeId": "job:shop:report", "depth": 2, "direction": "both"},
        ).json()["graph"]
    }
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def test_an_answer_cut_at_the_node_limit_is_said_so(api, loaded, browser):
    """nodeLimit=3 (in the link) over the whole pipeline: three nodes, nearest first, and the
    notice. The server cuts the answer itself once it knows nodeLimit (truncated: true); a
    server that does not is cut by the page, nearest first too."""
    driver = browser
    stg = f"dataset:{PG}:stg.orders"
    answer = api.client.get(
        "/api/v1/lineage", params={"nodeId": stg, "depth": 10, "nodeLimit": 3}
    ).json()
    if "truncated" in answer:  # the bounded API: the answer says it was cut
        assert answer["truncated"] is True and len(answer["graph"]) <= 3
    driver.get(f"{api.url}/#nodeId={quote(stg, safe='')}&depth=10&direction=both&nodeLimit=3")
    assert _ready(driver) == "ready"
    drawn = _drawn(driver)
    assert 1 < len(drawn) <= 3 and stg in drawn
    assert drawn <= set(_hop(api, stg))  # nearest first: the chosen node and its neighbours
    notice = driver.find_element("id", "truncated-notice")
    assert notice.is_displayed()
    assert notice.text.startswith(
        f"Showing {len(drawn)} nodes; the neighbourhood was cut at the node limit (3 per answer)"
    )
    assert "expand nodes to see more" in notice.text
    # And how many it left out (the API's omittedNodes for the page's walk, both ways).
    omitted = _view(api, stg, nodeLimit="3")["omittedNodes"]
    assert omitted > 0
    left = f"{omitted} node{'s' if omitted != 1 else ''} of the view left out"
    assert f": {left}" in notice.text, notice.text
    assert "nodeLimit=3" in driver.current_url
    # Without the limit the same view is whole, and the notice goes.
    _open(driver, api.url, stg, depth=10)
    assert not driver.find_element("id", "truncated-notice").is_displayed()
    assert len(_drawn(driver)) == 11


STAR = 6000


@pytest.fixture
def star(api):
    """One job writing STAR datasets (ten runs of STAR/10 outputs), read by one more job."""
    per_run = STAR // 10
    for part in range(10):
        outputs = [("star", f"out.{part * per_run + i:05d}") for i in range(per_run)]
        event = run_event("hub", namespace="star", outputs=outputs, seconds=part)
        response = api.client.post("/api/v1/lineage", json=event)
        assert response.status_code == 201, response.text
    reader = run_event(
        "reader", namespace="star", inputs=[("star", "out.00000")], outputs=[("star", "sink")]
    )
    assert api.client.post("/api/v1/lineage", json=reader).status_code == 201
    return "job:star:hub"


def test_a_wide_neighbourhood_is_drawn_to_the_node_limit_and_stays_responsive(api, star, browser):
    driver = browser
    started = time.monotonic()
    driver.get(f"{api.url}/#nodeId={quote(star, safe='')}")
    assert _ready(driver) == "ready", driver.find_element("id", "status").text
    took = time.monotonic() - started
    drawn = _drawn(driver)
    assert star in drawn
    assert 500 < len(drawn) <= 1000  # the node limit, of STAR + 1 one hop away
    assert driver.find_element("id", "truncated-notice").is_displayed()
    assert len(driver.find_elements("css selector", "#node-list button")) == len(drawn)
    # The page answers at once: a frame is painted, a click opens details, a search runs.
    frame = driver.execute_async_script(
        "const done = arguments[0], t0 = performance.now();"
        "requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));"
    )
    assert frame < 500, frame
    # A leaf drawn inside the graph's box (1,000 in one column do not all fit on screen).
    leaf = sorted(n for n in drawn if n.startswith("dataset:star:"))[500]
    driver.execute_script(
        "const cy = window.lineagePage.cy; cy.zoom(1); cy.center(cy.getElementById(arguments[0]));",
        leaf,
    )
    t0 = time.monotonic()
    _click_node(driver, leaf)
    _wait(driver, f"return location.hash.includes({quote(leaf, safe='')!r})", timeout=10)
    assert _ready(driver) == "ready"
    clicked = time.monotonic() - t0
    assert len(_drawn(driver)) <= 2000  # one more answer, cut at the limit too
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-star.png"))
    print(f"\nstar of {STAR}: ready in {took:.2f} s, frame {frame:.0f} ms, click {clicked:.2f} s")
    assert took < 30 and clicked < 10


def test_a_dataset_opened_by_another_name_shows_its_node_and_its_names(api, browser):
    """Issue 32, item 2: a Spark location opens its Hive table, whose details list the other
    names (and the address then names the table)."""
    from test_api_symlink_names import T2, TABLE2, events

    posted = api.client.post("/api/v1/lineage/batch", json=events())
    assert posted.status_code == 200, posted.text
    driver = browser
    _open(driver, api.url, f"dataset:{T2[0]}:{T2[1]}", depth=1)
    _details(driver)
    _wait(
        driver,
        "return [...document.querySelectorAll('#node-details dt')]"
        ".some(function (d) { return d.textContent === 'also named'; })",
    )
    details = driver.find_element("id", "node-details").text
    assert f"{TABLE2[0]}:{TABLE2[1]}" in details or TABLE2[1] in details, details
    assert f"{T2[0]}:{T2[1]}" in details, details
    assert quote(f"dataset:{TABLE2[0]}:{TABLE2[1]}", safe="") in driver.current_url


# ---- views (granularity), the time window, runs as nodes (#33 item 4) ---------------------------


def _view(api, node: str, depth: int = 10, **params: str) -> dict:
    """The API's answer the page asks for (both directed ways, the page's walk)."""
    response = api.client.get(
        "/api/v1/lineage",
        params={"nodeId": node, "depth": depth, "direction": "both", **params},
    )
    assert response.status_code == 200, response.text
    return response.json()


def _choose_view(driver, granularity: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "granularity-input")).select_by_value(granularity)
    if granularity == "job":  # the default view is not written in the URL
        _wait(driver, "return !location.hash.includes('granularity=')")
    else:
        _wait(driver, f"return location.hash.includes('granularity={granularity}')")
    assert _ready(driver) == "ready", driver.find_element("id", "status").text


def _click_edge(driver, source: str, target: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    pos = driver.execute_script(
        "return window.lineagePage.edgeClientPosition(arguments[0], arguments[1])", source, target
    )
    assert pos is not None, f"{source} -> {target} is not drawn"
    body = driver.find_element("tag name", "body")
    size = body.size
    (
        ActionChains(driver)
        .move_to_element_with_offset(
            body, int(pos["x"] - size["width"] / 2), int(pos["y"] - size["height"] / 2)
        )
        .click()
        .perform()
    )


def test_the_view_switch_draws_datasets_alone_then_runs(api, loaded, browser):
    """job -> dataset: no job node, each edge names the jobs that made it (on the edge, in its
    panel and in the dataset's); -> run: runs drawn as their own shape with their state; the
    URL keeps the view."""
    driver = browser
    stg, raw = f"dataset:{PG}:stg.orders", f"dataset:{PG}:raw.orders"
    _open(driver, api.url, stg)
    assert "job:shop:extract" in _drawn(driver)
    assert "granularity=" not in driver.current_url  # the default view leaves links as they were

    _choose_view(driver, "dataset")
    _wait(driver, "return !window.lineagePage.cy.nodes().some(n => n.id().startsWith('job:'))")
    answer = _view(api, stg, granularity="dataset")
    expected = {n["id"] for n in answer["graph"]}
    assert expected and all(nid.startswith("dataset:") for nid in expected)
    assert _drawn(driver) == expected
    edges = {
        (s, t): label
        for s, t, label in driver.execute_script(
            "return window.lineagePage.cy.edges().map(e => [e.source().id(), e.target().id(),"
            " e.data('label')])"
        )
    }
    assert edges[(raw, stg)] == "extract"
    assert edges[(stg, f"dataset:{PG}:clean.orders")] == "clean"
    # The chosen dataset's panel lists where it comes from, through which job.
    _wait(driver, "return document.querySelector('#edges-in li') !== null")
    came = driver.find_element("css selector", f'#edges-in li[data-node-id="{raw}"]').text
    assert came == "raw.orders via extract"
    # An edge clicked opens its own panel: its ends and its jobs, each one click from its lineage.
    _click_edge(driver, raw, stg)
    _wait(driver, "return document.querySelector('#edge-jobs li') !== null")
    assert [
        li.get_attribute("data-node-id")
        for li in driver.find_elements("css selector", "#edge-jobs li")
    ] == ["job:shop:extract"]
    panel = driver.find_element("id", "edge-details").text
    assert "raw.orders" in panel and "stg.orders" in panel
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-datasets.png"))
    shared = driver.current_url
    driver.get("about:blank")
    driver.get(shared)
    assert _ready(driver) == "ready"
    assert driver.find_element("id", "granularity-input").get_attribute("value") == "dataset"
    assert _drawn(driver) == expected

    _choose_view(driver, "run")
    _wait(driver, "return window.lineagePage.cy.nodes().some(n => n.id().startsWith('run:'))")
    answer = _view(api, stg, granularity="run")
    runs = {n["id"]: n for n in answer["graph"] if n["type"] == "RUN"}
    assert runs and _drawn(driver) == {n["id"] for n in answer["graph"]}
    assert not any(nid.startswith("job:") for nid in _drawn(driver))
    clean_run = f"run:{loaded['runs']['clean']}"
    extract_run = f"run:{loaded['runs']['extract']}"
    assert {clean_run, extract_run} <= set(runs)
    looks = {
        nid: (shape, cls, failed, label)
        for nid, shape, cls, failed, label in driver.execute_script(
            "return window.lineagePage.cy.nodes().map(n => [n.id(), n.style('shape'),"
            " n.hasClass('run'), n.hasClass('failed'), n.data('label')])"
        )
    }
    assert looks[clean_run][0] != looks[stg][0] and looks[clean_run][1] is True
    assert looks[clean_run][2] is True and looks[extract_run][2] is False  # FAILED is marked
    assert looks[clean_run][3] == "clean\nFAILED\n2025-03-01 00:01:40"
    assert looks[extract_run][3] == "extract\nCOMPLETED\n2025-03-01 00:00:00"
    assert driver.find_element("css selector", "#legend li[data-view='run']").is_displayed()
    assert not driver.find_element("css selector", "#legend li[data-view='parent']").is_displayed()
    assert "run" in driver.find_element("css selector", "#node-list .kind.RUN").text
    # A run's panel: its job, state, times; it expands in the run view.
    _click_node(driver, clean_run)
    _wait(driver, f"return location.hash.includes({quote(clean_run, safe='')!r})")
    assert _ready(driver) == "ready"
    rows = driver.find_elements("css selector", "#node-details dt, #node-details dd")
    pairs = dict(zip([r.text for r in rows[::2]], [r.text for r in rows[1::2]], strict=True))
    assert pairs["type"] == "run" and pairs["state"] == "FAILED"
    assert pairs["job"] == "clean" and pairs["job namespace"] == "shop"
    assert pairs["run id"] == loaded["runs"]["clean"]
    assert pairs["started"] == "2025-03-01 00:01:40 UTC" and pairs["duration"] == "12.0 s"
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / "graph-page-runs.png"))
    # The run view starts at a dataset or a run: for a job the switch says so.
    _open(driver, api.url, "job:shop:extract")
    run_option = driver.find_element("css selector", "#granularity-input option[value='run']")
    assert run_option.get_attribute("disabled") is not None
    assert driver.find_element("id", "granularity-hint").is_displayed()
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def test_the_parent_view_folds_child_jobs_into_their_root(api, browser):
    """fold:dag runs fold:dag.extract (src -> stage) and fold:dag.load (stage -> mart), each
    with a parent facet: the parent view draws one job, whose panel lists its children."""
    dag_run = "01900000-0000-7000-8000-0000000000d0"
    events = []
    for job, run, inputs, outputs, at in (
        ("dag", dag_run, [], [], 0),
        (
            "dag.extract",
            "01900000-0000-7000-8000-0000000000d1",
            [("fold", "src")],
            [("fold", "stage")],
            1,
        ),
        (
            "dag.load",
            "01900000-0000-7000-8000-0000000000d2",
            [("fold", "stage")],
            [("fold", "mart")],
            5,
        ),
    ):
        for kind, delta in (("START", 0), ("COMPLETE", 1)):
            event = run_event(
                job,
                namespace="fold",
                event_type=kind,
                run_id=run,
                inputs=inputs,
                outputs=outputs,
                seconds=at + delta,
            )
            if run != dag_run:
                event["run"]["facets"]["parent"] = {
                    "_producer": event["producer"],
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
                    "run": {"runId": dag_run},
                    "job": {"namespace": "fold", "name": "dag"},
                }
            events.append(event)
    assert api.client.post("/api/v1/lineage/batch", json=events).status_code == 200
    driver = browser
    child = "job:fold:dag.load"
    driver.get(
        f"{api.url}/#nodeId={quote(child, safe='')}&depth=10&direction=both&granularity=parent"
    )
    assert _ready(driver) == "ready", driver.find_element("id", "status").text
    answer = _view(api, child, granularity="parent")
    assert answer["nodeId"] == "job:fold:dag"
    drawn = _drawn(driver)
    assert drawn == {n["id"] for n in answer["graph"]}
    assert "job:fold:dag" in drawn and not {child, "job:fold:dag.extract"} & drawn
    # The page starts at the root the answer names, the URL too.
    _wait(driver, f"return location.hash.includes({quote('job:fold:dag', safe='')!r} + '&')")
    assert driver.execute_script("return window.lineagePage.cy.$('.root').id()") == "job:fold:dag"
    assert driver.execute_script(
        "return window.lineagePage.cy.getElementById('job:fold:dag').hasClass('parent')"
    )
    _wait(driver, "return document.querySelectorAll('#children li').length === 2")
    assert [
        li.get_attribute("data-node-id")
        for li in driver.find_elements("css selector", "#children li")
    ] == ["job:fold:dag.extract", "job:fold:dag.load"]
    assert "Child jobs (2)" in _details(driver)
    # A child opens in the view of jobs.
    driver.find_element(
        "css selector", '#children li[data-node-id="job:fold:dag.load"] button'
    ).click()
    _wait(driver, "return !location.hash.includes('granularity=')")
    assert _ready(driver) == "ready"
    assert child in _drawn(driver)


def _window_events() -> list[dict]:
    """days:daily reads days:in.a on 1 March and days:in.b on 2 March, writing days:out both
    times (Marquez #3093's shape: one job, two runs, two inputs)."""
    return [
        run_event(
            "daily",
            namespace="days",
            event_type=kind,
            run_id=run,
            inputs=[("days", source)],
            outputs=[("days", "out")],
            seconds=at + delta,
        )
        for run, source, at in (
            ("01900000-0000-7000-8000-0000000000a1", "in.a", 3600),
            ("01900000-0000-7000-8000-0000000000a2", "in.b", 86400 + 3600),
        )
        for kind, delta in (("START", 0), ("COMPLETE", 60))
    ]


def _set_window(driver, since: str, until: str) -> None:
    driver.execute_script(
        "document.getElementById('since-input').value = arguments[0];"
        "document.getElementById('until-input').value = arguments[1];",
        since,
        until,
    )
    driver.find_element("id", "window-apply").click()


def _lineage_requests(driver) -> list[str]:
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(u => u.includes('/api/v1/lineage?'))"
    )


def test_a_time_window_draws_only_the_edges_made_within_it(api, browser):
    assert api.client.post("/api/v1/lineage/batch", json=_window_events()).status_code == 200
    driver = browser
    out, a, b = "dataset:days:out", "dataset:days:in.a", "dataset:days:in.b"
    _open(driver, api.url, out, depth=1)
    assert _drawn(driver) == {a, b, "job:days:daily", out}

    driver.execute_script("performance.clearResourceTimings()")
    _set_window(driver, "2025-03-01T00:00:00", "2025-03-02T00:00:00")
    _wait(driver, "return location.hash.includes('since=') && location.hash.includes('until=')")
    _wait(
        driver,
        "return document.body.dataset.state === 'ready'"
        " && !window.lineagePage.cy.nodes().some(n => n.id() === 'dataset:days:in.b')",
    )
    assert _drawn(driver) == {a, "job:days:daily", out}
    asked = _lineage_requests(driver)
    windowed = [u for u in asked if "since=" in u]
    assert any("nodeId=dataset%3Adays%3Aout&depth=1&" in u for u in windowed), asked
    assert all(
        "since=2025-03-01T00%3A00%3A00.000Z" in u and "until=2025-03-02T00%3A00%3A00.000Z" in u
        for u in windowed
    ), windowed
    assert not any("asOf=" in u for u in asked)
    assert "asOf=" not in driver.current_url
    # The slider rests while a window is set (asOf and a window are exclusive).
    assert driver.find_element("id", "asof-range").get_attribute("disabled") is not None
    status = driver.find_element("id", "status").text
    assert "from 2025-03-01 00:00:00 UTC to 2025-03-02 00:00:00 UTC" in status, status

    _set_window(driver, "2025-03-02T00:00:00", "2025-03-03T00:00:00")
    _wait(driver, "return location.hash.includes('since=2025-03-02')")
    _wait(
        driver,
        "return document.body.dataset.state === 'ready'"
        " && !window.lineagePage.cy.nodes().some(n => n.id() === 'dataset:days:in.a')",
    )
    assert _drawn(driver) == {b, "job:days:daily", out}
    shared = driver.current_url
    driver.get("about:blank")
    driver.get(shared)
    assert _ready(driver) == "ready"
    assert _drawn(driver) == {b, "job:days:daily", out}
    # (chromium writes a picker's zero seconds as nothing: 2025-03-02T00:00)
    assert (
        driver.find_element("id", "since-input")
        .get_attribute("value")
        .startswith("2025-03-02T00:00")
    )
    assert (
        driver.find_element("id", "until-input")
        .get_attribute("value")
        .startswith("2025-03-03T00:00")
    )
    assert driver.current_url == shared
    # In the run view the window answers "which run wrote out that day".
    _choose_view(driver, "run")
    runs = {n for n in _drawn(driver) if n.startswith("run:")}
    assert runs == {"run:01900000-0000-7000-8000-0000000000a2"}
    _choose_view(driver, "job")

    driver.find_element("id", "window-clear").click()
    _wait(driver, "return !location.hash.includes('since=')")
    _wait(
        driver,
        "return document.body.dataset.state === 'ready'"
        " && window.lineagePage.cy.nodes().some(n => n.id() === 'dataset:days:in.a')",
    )
    assert _drawn(driver) == {a, b, "job:days:daily", out}
    assert driver.find_element("id", "since-input").get_attribute("value") == ""


def test_a_window_the_api_refuses_is_said_as_the_api_says_it(api, browser):
    """since after until: the API answers 400 naming the parameter; the page shows that."""
    assert api.client.post("/api/v1/lineage/batch", json=_window_events()).status_code == 200
    refused = api.client.get(
        "/api/v1/lineage",
        params={  # as the page sends them
            "nodeId": "dataset:days:out",
            "since": "2025-03-03T00:00:00.000Z",
            "until": "2025-03-02T00:00:00.000Z",
        },
    )
    assert refused.status_code == 400
    detail = refused.json()["detail"]
    assert "since" in detail
    driver = browser
    _open(driver, api.url, "dataset:days:out", depth=1)
    _set_window(driver, "2025-03-03T00:00:00", "2025-03-02T00:00:00")
    _wait(driver, "return document.body.dataset.state === 'error'")
    status = driver.find_element("id", "status")
    assert status.get_attribute("class") == "error"
    assert detail in status.text, status.text
    # Mended, the graph comes back.
    _set_window(driver, "2025-03-01T00:00:00", "2025-03-02T00:00:00")
    _wait(driver, "return document.body.dataset.state === 'ready'")
    assert _drawn(driver) == {"dataset:days:in.a", "job:days:daily", "dataset:days:out"}


def _quality_and_schema_events() -> list[dict]:
    """``check`` writes ``q.t`` with a failed assertion; ``evolve`` writes ``s.t`` twice, the
    second time without ``name``, ``id`` retyped, ``extra`` added and ``amt``'s type in lower
    case (no change: the alerts' ``breaking_changes`` ignores case too)."""

    def schema(*fields: tuple[str, str]) -> dict:
        return {
            "_producer": "https://example.com/tests",
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": n, "type": t} for n, t in fields],
        }

    check = run_event("check", inputs=[("wh", "src")], outputs=[("wh", "q.t")], seconds=10)
    check["outputs"][0]["facets"]["dataQualityAssertions"] = {
        "_producer": "https://example.com/tests",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
        "assertions": [
            {"assertion": "not_null", "success": False, "column": "id"},
            {"assertion": "unique", "success": True, "column": "id"},
        ],
    }
    first = run_event("evolve", inputs=[("wh", "src")], outputs=[("wh", "s.t")], seconds=20)
    first["outputs"][0]["facets"]["schema"] = schema(
        ("id", "INTEGER"), ("name", "STRING"), ("amt", "INTEGER")
    )
    second = run_event("evolve", inputs=[("wh", "src")], outputs=[("wh", "s.t")], seconds=30)
    second["outputs"][0]["facets"]["schema"] = schema(
        ("id", "STRING"), ("amt", "integer"), ("extra", "STRING")
    )
    return [check, first, second]


def test_failed_quality_is_marked_and_the_panel_diffs_two_versions(api, browser):
    """Issue 34, item 6: a dataset whose quality checks failed is marked; the dataset panel
    diffs two versions, chosen by the user."""
    posted = api.client.post("/api/v1/lineage/batch", json=_quality_and_schema_events())
    assert posted.status_code == 200, posted.text
    driver = browser
    _open(driver, api.url, "dataset:wh:src", depth=1)
    marks = driver.execute_script(
        "return window.lineagePage.cy.nodes().map(n => [n.id(), n.hasClass('quality-failed'),"
        " n.hasClass('schema-broke'), n.style('border-color')]);"
    )
    by_id = {nid: (quality, schema, color) for nid, quality, schema, color in marks}
    assert by_id["dataset:wh:q.t"][:2] == (True, False)
    assert by_id["dataset:wh:s.t"][:2] == (False, True)  # ``name`` removed, ``id`` retyped
    assert by_id["dataset:wh:src"][:2] == (False, False)
    assert by_id["job:shop:check"][:2] == (False, False)
    assert by_id["dataset:wh:q.t"][2] != by_id["dataset:wh:src"][2]
    assert by_id["dataset:wh:s.t"][2] not in (
        by_id["dataset:wh:src"][2],
        by_id["dataset:wh:q.t"][2],
    )

    _open(driver, api.url, "dataset:wh:s.t", depth=1)
    assert "last change removed or retyped a field" in _details(driver)
    _wait(driver, "return document.querySelector('#schema-diff-table') !== null")

    def rows() -> list[list[str]]:
        return [
            [td.text for td in tr.find_elements("css selector", "td")]
            for tr in driver.find_elements("css selector", "#schema-diff-table tbody tr")
        ]

    # amt went from INTEGER to integer: a change of case only, not listed (as the server,
    # whose breaking_changes ignores case).
    assert rows() == [
        ["extra", "added", "", "STRING"],
        ["id", "type", "INTEGER", "STRING"],
        ["name", "removed", "STRING", ""],
    ]
    # The other way round: what the older version has that the newer lacks.
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "diff-from")).select_by_value("0")
    Select(driver.find_element("id", "diff-to")).select_by_value("1")
    _wait(driver, "return document.querySelector('#schema-diff-table td').textContent === 'extra'")
    assert rows() == [
        ["extra", "removed", "STRING", ""],
        ["id", "type", "STRING", "INTEGER"],
        ["name", "added", "", "STRING"],
    ]
    Select(driver.find_element("id", "diff-to")).select_by_value("0")
    _wait(driver, "return document.querySelector('#schema-diff-table') === null")
    assert (
        "No field was added, removed or retyped." in driver.find_element("id", "schema-diff").text
    )

    _open(driver, api.url, "dataset:wh:q.t", depth=1)
    assert "quality checks" in _details(driver)
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors
