"""What a learner sees: JupyterLab, started as `make lab` starts it, in a real browser (Debian's Chromium
driven by Playwright), opens every notebook and runs all its cells.

Checked per notebook: the python3 kernel starts without a kernel dialog, no cell shows an error it is
not meant to show, every image (the memory-hierarchy SVG and the plots) loaded, every plot rendered,
and every exercise stub printed its "not attempted" line. Screenshots of every notebook land in
``.browser-screenshots/`` (git-ignored), so a failure can be looked at.

Needs Chromium (``apt-get install chromium``; `.ci/run` installs it) and Playwright (pinned in
requirements.txt). No browser is downloaded: Playwright drives the system's Chromium.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SHOTS = ROOT / ".browser-screenshots"
TOKEN = "course-browser-test"
CHROMIUM = next((p for p in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"))
                 if p and Path(p).exists()), None)

playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here")
if CHROMIUM is None:
    pytest.skip("no Chromium on this machine (apt-get install chromium): the browser test needs one",
                allow_module_level=True)

from course import lab  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

CELL_TIMEOUT_S = 240  # a whole notebook under the interpreter, on a busy 2-core machine


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """JupyterLab as `make lab` starts it (course.lab.command), plus the flags LAB_ARGS would pass.

    Autosave is off (a settings directory of the test's own), so running the notebooks in the
    browser never rewrites the committed files."""
    port = _free_port()
    home = tmp_path_factory.mktemp("lab")
    settings = home / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    cmd = lab.command(["--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={TOKEN}"])
    log = home / "lab.log"
    before = {p: p.stat().st_mtime_ns for p in NOTEBOOKS}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    pytest.fail(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield url
        proc.terminate()
        proc.wait(timeout=30)
    after = {p: p.stat().st_mtime_ns for p in NOTEBOOKS}
    assert before == after, "running the notebooks in the browser changed committed files"


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield chromium
        chromium.close()


def _expected(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return {
        "cells": len(nb.cells),
        "raises": {i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])},
        "stubs": sum("exercises.check_" in c.source for c in code),
        "plots": sum(any("image/png" in o.get("data", {}) for o in c.get("outputs", [])) for c in code),
        "images_in_markdown": sum(c.source.count("![") for c in nb.cells if c.cell_type == "markdown"),
    }


# Per cell of the notebook: its index, the text of its stderr/error outputs, the images it shows.
_READ_CELLS = """() => Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell'))
  .map((cell, i) => ({
    i,
    prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
    errors: Array.from(cell.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
              .map(e => e.textContent),
    text: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(e => e.textContent).join('\\n'),
    images: Array.from(cell.querySelectorAll('img')).map(img => ({src: img.src.slice(0, 120),
              loaded: img.complete && img.naturalWidth > 0, output: !!img.closest('.jp-OutputArea')})),
  }))"""


def _wait_for_kernel(server, path, page, timeout_s=120):
    """Wait until the notebook's python3 kernel runs and is idle; fail on any dialog meanwhile."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        assert not page.locator(".jp-Dialog").count(), \
            f"a dialog opened with the notebook: {page.locator('.jp-Dialog').first.inner_text()[:300]}"
        with urllib.request.urlopen(f"{server}/api/sessions?token={TOKEN}", timeout=5) as response:
            sessions = json.loads(response.read())
        kernel = next((s["kernel"] for s in sessions if s["path"] == f"notebooks/{path.name}"), None)
        if kernel and kernel["name"] == "python3" and kernel["execution_state"] == "idle" \
                and page.get_by_text("Python 3 (ipykernel) | Idle").count():
            return
        time.sleep(0.5)
    pytest.fail(f"the python3 kernel of {path.name} did not start within {timeout_s} s")


def _run_all(page):
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.get_by_text("Run All Cells", exact=True).click()


def _busy(page) -> bool:
    prompts = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-InputPrompt')).map(p => p.textContent)""")
    return any("*" in p for p in prompts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_in_the_browser(server, browser, path):
    SHOTS.mkdir(exist_ok=True)
    expected = _expected(path)
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    shot = SHOTS / f"{path.stem}.png"
    (SHOTS / f"{path.stem}-failure.png").unlink(missing_ok=True)
    try:
        # A workspace of its own, so that notebooks opened by earlier tests are not restored beside it.
        page.goto(f"{server}/lab/workspaces/{path.stem}/tree/notebooks/{path.name}?reset&token={TOKEN}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
        _wait_for_kernel(server, path, page)
        _run_all(page)
        deadline = time.time() + CELL_TIMEOUT_S
        time.sleep(2)
        while _busy(page) or page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() == 0:
            assert time.time() < deadline, f"{path.name} did not finish in {CELL_TIMEOUT_S} s"
            time.sleep(1)
        assert not page.locator(".jp-Dialog").count(), \
            f"a dialog opened while running: {page.locator('.jp-Dialog').first.inner_text()[:300]}"
        # Bring every cell into view once, so that lazily rendered images load.
        for cell in page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").all():
            cell.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        cells = page.evaluate(_READ_CELLS)
        page.screenshot(path=str(shot), full_page=False)

        assert len(cells) == expected["cells"], f"{len(cells)} cells shown, the file has {expected['cells']}"
        unexpected = [(c["i"], c["errors"][0][:400]) for c in cells
                      if c["i"] not in expected["raises"]
                      and any(w in e for e in c["errors"] for w in ("Error", "Traceback", "Exception"))]
        assert not unexpected, f"unexpected error output in {path.name}: {unexpected}"
        missing = [c["i"] for c in cells if c["i"] in expected["raises"] and not c["errors"]]
        assert not missing, f"cells {missing} should show their (expected) error and show none"
        images = [img for c in cells for img in c["images"]]
        broken = [img["src"] for img in images if not img["loaded"]]
        assert not broken, f"images that did not load in {path.name}: {broken}"
        shown_in_markdown = sum(not img["output"] for img in images)
        assert shown_in_markdown == expected["images_in_markdown"]
        plots = sum(img["output"] for img in images)
        assert plots >= expected["plots"], f"{plots} plots rendered, the committed run has {expected['plots']}"
        stubs = sum(c["text"].count("not attempted yet") for c in cells)
        assert stubs == expected["stubs"], f"{stubs} exercise stubs said 'not attempted yet', expected {expected['stubs']}"
    except Exception:
        page.screenshot(path=str(SHOTS / f"{path.stem}-failure.png"), full_page=False)
        raise
    finally:
        page.close()
        _shut_down_kernels(server)


def _shut_down_kernels(server):
    with urllib.request.urlopen(f"{server}/api/sessions?token={TOKEN}", timeout=5) as response:
        sessions = json.loads(response.read())
    for session in sessions:
        request = urllib.request.Request(f"{server}/api/sessions/{session['id']}?token={TOKEN}", method="DELETE")
        urllib.request.urlopen(request, timeout=10).close()


def _wait_until_written(path, deadline: float) -> None:
    """Until ``path`` is not empty and has not changed for a second (or the deadline)."""
    last = None
    while time.time() < deadline:
        now = (path.stat().st_mtime_ns, path.stat().st_size)
        if now == last and now[1] > 0:
            return
        last = now
        time.sleep(1.0)


def test_saving_an_opened_notebook_changes_nothing(server, browser):
    """JupyterLab rewrites a notebook's metadata for the kernel it starts (the Python version, the
    kernel's display name); course.lab's save hook keeps the committed ones, so that opening and saving
    a notebook leaves the tracked file as it was."""
    path = NOTEBOOKS[0]
    before, stat = path.read_bytes(), path.stat()
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    try:
        page.goto(f"{server}/lab/workspaces/save/tree/notebooks/{path.name}?reset&token={TOKEN}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
        _wait_for_kernel(server, path, page)
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first.click()
        page.keyboard.press("Control+s")
        deadline = time.time() + 30
        while path.stat().st_mtime_ns == stat.st_mtime_ns and time.time() < deadline:
            time.sleep(0.5)
        assert path.stat().st_mtime_ns != stat.st_mtime_ns, "Ctrl+S did not save the notebook"
        _wait_until_written(path, deadline=time.time() + 30)  # the server truncates, then writes
        assert path.read_bytes() == before, f"saving {path.name} unchanged in JupyterLab rewrote it"
    finally:
        path.write_bytes(before)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        page.close()
        _shut_down_kernels(server)
