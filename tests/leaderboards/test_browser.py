"""The board page in a real browser: headless Chromium loads it, sees the rows, opens a detail view.

Needs Debian's `chromium` and `chromium-driver` (CI installs them with
`.ci/setup-browser.sh`) and `selenium` (the dev extra). Outside CI a missing
browser skips the test; in CI (``CI=true``) it fails. Screenshots go to
``$ARGYM_TEST_ARTIFACTS`` if set, else to the test's tmp dir.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import argym.leaderboards as lb
from argym.leaderboards.server import serve_in_thread

pytestmark = pytest.mark.slow
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing(what: str) -> None:
    message = f"{what}; install it with .ci/setup-browser.sh (Debian chromium and chromium-driver) and the dev extra"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        _missing("headless Chromium or chromedriver is not installed")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--no-first-run",
    ):
        opts.add_argument(arg)
    drv = webdriver.Chrome(
        service=Service(executable_path=chromedriver), options=opts
    )  # no selenium-manager download
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def _next_page(driver, element) -> None:
    """Wait until the page that a submit or click on `element` loads has replaced it.

    Selenium returns from ``submit()`` and ``click()`` once the event is dispatched, not once
    the navigation it starts has committed: on a loaded 2-core machine ``current_url`` still
    named the old page (CI, 2026-12-04). The old element going stale proves the new document is in.
    """
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(element))


@pytest.fixture
def artifacts(tmp_path) -> Path:
    root = os.environ.get("ARGYM_TEST_ARTIFACTS")
    path = Path(root) / "leaderboards" if root else tmp_path / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_board_page_in_headless_chromium(driver, artifacts, result, lb_db):
    from selenium.webdriver.common.by import By

    lb.submit(result([True] * 17 + [False] * 3, agent="hf:models/qwen-math-grpo"))
    lb.submit(result([True] * 12 + [False] * 8, agent="tiny:runs/quickstart"))
    lb.submit(result([True] * 4 + [False] * 16, agent="random"))
    lb.submit(result([True] * 8 + [False] * 2, agent="oracle", env_kwargs={"max_attempts": 3}))
    server, base = serve_in_thread(lb_db)
    try:
        driver.get(base + "/")
        boards = driver.find_elements(By.CSS_SELECTOR, "section.board")
        assert len(boards) == 2
        rows = driver.find_elements(By.CSS_SELECTOR, "table.rows tbody tr")
        assert len(rows) == 4
        texts = [r.text for r in rows]
        assert any("hf:models/qwen-math-grpo" in t and "0.850" in t for t in texts), texts
        assert driver.find_element(By.CSS_SELECTOR, "tr.tied").is_displayed()  # overlaps the leader
        driver.save_screenshot(str(artifacts / "board.png"))

        # the filter form: agent substring, submitted as a GET query
        box = driver.find_element(By.NAME, "agent")
        box.send_keys("tiny")
        box.submit()
        _next_page(driver, box)
        assert "agent=tiny" in driver.current_url
        rows = driver.find_elements(By.CSS_SELECTOR, "table.rows tbody tr")
        assert [r.text.split()[1] for r in rows] == ["tiny:runs/quickstart"]

        link = driver.find_element(By.LINK_TEXT, "tiny:runs/quickstart")
        link.click()
        _next_page(driver, link)
        assert driver.current_url.rstrip("/").endswith("/submissions/2")
        detail = driver.find_element(By.CSS_SELECTOR, "section.detail")
        assert detail.is_displayed() and "Submission 2" in detail.text
        episodes = driver.find_elements(By.CSS_SELECTOR, "table.episodes tbody tr")
        assert len(episodes) == 20 and "pass" in episodes[0].text
        driver.save_screenshot(str(artifacts / "detail.png"))
        assert (artifacts / "board.png").stat().st_size > 10_000
    finally:
        server.shutdown()
        server.server_close()


def test_static_export_detail_opens_offline(driver, artifacts, result, tmp_path):
    from selenium.webdriver.common.by import By

    from argym.leaderboards.render import write_html

    lb.submit(result([True] * 7 + [False] * 3, agent="tiny:runs/quickstart"))
    found = lb.boards()
    page = write_html(tmp_path / "board.html", found, [lb.submission(r.id) for b in found for r in b.rows])
    driver.get(page.as_uri())
    detail = driver.find_element(By.ID, "sub-1")
    assert not detail.is_displayed()
    driver.find_element(By.LINK_TEXT, "tiny:runs/quickstart").click()
    assert detail.is_displayed() and "task#0" in detail.text
    driver.save_screenshot(str(artifacts / "static-detail.png"))


def test_a_transcript_opens_on_the_detail_page(driver, artifacts, result, lb_db):
    from selenium.webdriver.common.by import By

    r = result([True, False], agent="tiny:runs/quickstart", env_kwargs={"max_attempts": 2})
    r["env_defaults"] = {"timeout_s": 10.0, "feedback": True}
    r["episodes"][1]["transcript"] = {
        "messages": [
            {"role": "user", "content": "What is 75 + 54? Put the final answer in \\boxed{}."},
            {"role": "assistant", "content": "75 + 54 = 119, so \\boxed{119}"},
            {"role": "user", "content": "Incorrect, try again."},
            {"role": "assistant", "content": "x" * 4000},
        ],
        "verdict": {"parsed": None, "correct": False, "reason": "no_boxed_answer"},
    }
    sub_id = lb.submit(r)["id"]
    server, base = serve_in_thread(lb_db)
    try:
        driver.get(base + "/")
        heading = driver.find_element(By.CSS_SELECTOR, "section.board h2")
        assert "max_attempts=2" in heading.text and "timeout_s" not in heading.text
        assert "timeout_s=10.0" in heading.get_attribute("title")  # every kwarg on hover
        driver.get(f"{base}/submissions/{sub_id}")
        summary = driver.find_element(By.CSS_SELECTOR, "details.tr summary")
        assert "task#1" in summary.text and "fail" in summary.text
        message = driver.find_element(By.CSS_SELECTOR, "details.tr .msg.assistant")
        assert not message.is_displayed()
        summary.click()
        assert message.is_displayed() and "boxed{119}" in message.text
        assert "chars cut" in driver.find_element(By.CSS_SELECTOR, "details.tr").text
        driver.execute_script("arguments[0].scrollIntoView()", summary)
        driver.save_screenshot(str(artifacts / "transcript.png"))
    finally:
        server.shutdown()
        server.server_close()
