"""Where the memories.html screenshot tests find a headless browser and a CJK font.

The test command installs no system packages: a browser already on the machine is used
(``MEMSELF_CHROMIUM``, else the usual names on PATH), and without one the tests are skipped with
the install command in the reason; in CI (``CI=true``, where .ci/run installs both) they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

ENV = "MEMSELF_CHROMIUM"
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HOW = (
    "install what is missing, e.g. `sudo apt-get install chromium fonts-wqy-microhei` (Debian, "
    f"Ubuntu) or `brew install --cask chromium` (macOS), or set {ENV} to a Chromium or Chrome binary"
)


def find_chromium(env: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The browser to run and "", or None and why not: ``$MEMSELF_CHROMIUM`` when set (a wrong
    value is reported, not passed over for another browser), else the first of NAMES on PATH."""
    env = os.environ if env is None else env
    explicit = env.get(ENV, "").strip()
    if explicit:
        path = Path(explicit)
        if path.is_file() and os.access(path, os.X_OK):
            return path, ""
        return None, f"{ENV}={explicit} is not an executable file"
    for name in NAMES:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return Path(found), ""
    return None, f"no Chromium ({', '.join(NAMES)} on PATH, or {ENV})"


def has_cjk_font(env: Mapping[str, str] | None = None) -> bool:
    """A font fontconfig lists for Chinese (without one the screenshot shows boxes)."""
    env = os.environ if env is None else env
    fc_list = shutil.which("fc-list", path=env.get("PATH"))
    if fc_list is None:
        return False
    try:
        found = subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(found.stdout.strip())


def screenshot_browser(env: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The browser and "", or None and the skip reason: what is missing and how to install it."""
    browser, why = find_chromium(env)
    lacking = [why] if browser is None else []
    if not has_cjk_font(env):
        lacking.append("no CJK font (fc-list :lang=zh lists none)")
    if not lacking:
        return browser, ""
    return None, f"{'; '.join(lacking)}: {HOW}"
