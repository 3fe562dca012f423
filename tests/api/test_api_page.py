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
from api_helpers import HOSTILE_DATASET, HOSTILE_JOB, PG

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


@pytest.fixture
def browser(tmp_path):
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
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
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
    injected = "#node-list img, #details-body img, #status img, script[src='x']"
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
