"""`make lab` works: the command it runs (course.lab) starts JupyterLab from the course's environment,
as root or not, serves the repository (so figures under vis/ load) and opens the notebooks folder."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course import lab

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here (the GPU image has no Jupyter)")

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "course-test-token"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    port = _free_port()
    cmd = lab.command(["--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={TOKEN}"])
    log = tmp_path_factory.mktemp("lab") / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
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
            pytest.fail(f"JupyterLab did not answer within 90 s:\n{log.read_text()[-2000:]}")
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited:\n{log.read_text()[-2000:]}")
        yield url
        proc.terminate()
        proc.wait(timeout=20)


def test_lab_opens_on_the_notebooks_folder(lab_url):
    request = urllib.request.Request(f"{lab_url}/?token={TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.url.split("?")[0].endswith("/lab/tree/notebooks")
        assert b"JupyterLab" in response.read()


def test_lab_lists_the_notebooks(lab_url):
    _, body = _get(f"{lab_url}/api/contents/notebooks?token={TOKEN}")
    names = {item["name"] for item in json.loads(body)["content"]}
    expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert expected and expected <= names


def test_figures_under_vis_are_served(lab_url):
    """Notebooks show ../vis/gpu_memory_hierarchy.svg: it must be inside the server's root."""
    status, body = _get(f"{lab_url}/files/vis/gpu_memory_hierarchy.svg?token={TOKEN}")
    assert status == 200 and b"<svg" in body[:2000]


def test_python3_kernel_is_available(lab_url):
    _, body = _get(f"{lab_url}/api/kernelspecs?token={TOKEN}")
    assert "python3" in json.loads(body)["kernelspecs"]


@pytest.mark.parametrize("uid, allow_root", [(0, True), (1000, False)])
def test_root_gets_allow_root(monkeypatch, uid, allow_root):
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    assert ("--allow-root" in lab.command()) is allow_root


def test_make_lab_passes_lab_args():
    dry = subprocess.run(["make", "-n", "lab", "LAB_ARGS=--no-browser --port 8888"], cwd=ROOT,
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "-m course.lab --no-browser --port 8888" in dry.stdout


def test_lab_args_as_one_quoted_word_are_split(monkeypatch):
    seen = {}
    monkeypatch.setattr(lab, "_run", lambda cmd: seen.setdefault("cmd", cmd) and 0)
    lab.main(["--no-browser --port 8888"])
    assert seen["cmd"][-2:] == ["--port", "8888"] and "--no-browser" in seen["cmd"]


def test_the_save_hook_keeps_the_committed_metadata(tmp_path):
    """What JupyterLab would write for another machine's kernel (its Python version, "Python 3") is put
    back as the file on disk has it; a new notebook is left alone."""
    import types

    committed = {"metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                             "language": "python"},
                              "language_info": {"name": "python", "version": "3.12.3"}}, "cells": []}
    (tmp_path / "a.ipynb").write_text(json.dumps(committed))
    manager = types.SimpleNamespace(_get_os_path=lambda path: str(tmp_path / path))
    opened = {"metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                           "language_info": {"name": "python", "version": "3.11.7"}}, "cells": []}
    model = {"type": "notebook", "content": opened}
    lab.before_save(model, path="a.ipynb", contents_manager=manager)
    assert model["content"]["metadata"] == committed["metadata"]
    new = {"type": "notebook", "content": {"metadata": {"language_info": {"version": "3.11.7"}}, "cells": []}}
    lab.before_save(new, path="new.ipynb", contents_manager=manager)
    assert new["content"]["metadata"]["language_info"] == {"version": "3.11.7"}
    text = {"type": "file", "content": "x"}
    lab.before_save(text, path="a.txt", contents_manager=manager)
    assert text == {"type": "file", "content": "x"}


def test_no_news_toast_over_the_first_notebook():
    """JupyterLab asks "get notified about official Jupyter news?" in a toast over the notebook unless
    its default settings say no: course.lab points it at the course's overrides.json, which does."""
    flag = next(arg for arg in lab.command() if arg.startswith("--LabApp.app_settings_dir="))
    overrides = json.loads((Path(flag.split("=", 1)[1]) / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
