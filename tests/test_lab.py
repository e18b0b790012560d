"""`make lab` works: JupyterLab starts from the course's environment, serves its page and lists the notebooks."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here (the GPU image has no Jupyter)")

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "course-test-token"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode()


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={TOKEN}", "--ServerApp.open_browser=False", "--allow-root",
           f"--ServerApp.root_dir={ROOT / 'notebooks'}"]
    log = tmp_path_factory.mktemp("lab") / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                _get(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.5)
        else:
            proc.kill()
            pytest.fail(f"JupyterLab did not answer within 60 s:\n{log.read_text()[-2000:]}")
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited:\n{log.read_text()[-2000:]}")
        yield url
        proc.terminate()
        proc.wait(timeout=20)


def test_lab_page_is_served(lab_url):
    status, body = _get(f"{lab_url}/lab?token={TOKEN}")
    assert status == 200 and "JupyterLab" in body


def test_lab_lists_the_notebooks(lab_url):
    _, body = _get(f"{lab_url}/api/contents/?token={TOKEN}")
    names = {item["name"] for item in json.loads(body)["content"]}
    expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert expected and expected <= names


def test_python3_kernel_is_available(lab_url):
    _, body = _get(f"{lab_url}/api/kernelspecs?token={TOKEN}")
    assert "python3" in json.loads(body)["kernelspecs"]
