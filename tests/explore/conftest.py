"""The headless browser for the explorer tests: Debian's Chromium driven through Selenium.

Where the browser, its driver or Selenium is missing the browser tests skip with the reason;
under TINYTENSOR_REQUIRE_REFERENCE=1 (CI, through scripts/test.sh) they fail instead, as the
torch comparisons do (tests/conftest.py), so a broken install cannot pass silently.
"""

import os
import shutil
from pathlib import Path

import pytest

REQUIRE = os.environ.get("TINYTENSOR_REQUIRE_REFERENCE") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _missing(reason):
    if REQUIRE:
        pytest.fail(f"{reason}: the explorer's browser tests need it (REQUIRE_REFERENCE=1)")
    pytest.skip(f"{reason}, so the explorer's browser tests are skipped")


@pytest.fixture(scope="session")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        _missing(f"selenium is not installed (pip install -e '.[test]'): {e}")
    binary = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        _missing("Chromium or chromedriver is missing (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,900", "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
    except Exception as e:  # a driver that does not match the browser, no display libraries...
        _missing(f"headless Chromium does not start ({type(e).__name__}: {str(e)[:300]})")
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory):
    """Where the browser tests save their screenshots (TINYTENSOR_SCREENSHOTS keeps them)."""
    keep = os.environ.get("TINYTENSOR_SCREENSHOTS")
    folder = Path(keep) if keep else tmp_path_factory.mktemp("explorer-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nexplorer screenshots: {folder}")
    return folder
