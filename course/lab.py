"""Open the course in JupyterLab: ``make lab`` runs ``python -m course.lab [extra flags]``.

The server's root is the repository, so a notebook's ``../vis/…`` figures load, and the browser
opens on the ``notebooks/`` folder. As root (containers, cloud notebooks) it adds
``--allow-root``, which JupyterLab otherwise demands. Extra flags pass through to JupyterLab::

    make lab LAB_ARGS="--no-browser --port 8888"
    python -m course.lab --no-browser --ip 0.0.0.0
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_PAGE = "/lab/tree/notebooks"


def command(extra: list[str] | None = None, *, python: str = sys.executable) -> list[str]:
    """The JupyterLab command line ``make lab`` runs, with ``extra`` flags appended."""
    cmd = [python, "-m", "jupyterlab", f"--ServerApp.root_dir={ROOT}", f"--LabApp.default_url={START_PAGE}",
           # no news fetched, no update check (the news toast itself: lab_settings below)
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           # saving keeps the committed metadata: no machine's Python version, the kernel's usual name
           "--ContentsManager.pre_save_hook=course.lab.before_save",
           # the course's default settings (overrides.json): no "get Jupyter news?" toast over the notebook
           f"--LabApp.app_settings_dir={ROOT / 'course' / 'lab_settings'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd + list(extra or [])


def before_save(model: dict, path: str, contents_manager, **kwargs) -> None:
    """JupyterLab's hook before it writes a file: a notebook keeps the metadata it had on disk where the
    machine would change it (the kernel's Python version; the kernelspec's name), so that opening and
    saving a committed notebook changes nothing but the cells."""
    from course.execute import tidy_metadata

    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    tidy_metadata(model["content"])
    try:
        on_disk = json.loads(Path(contents_manager._get_os_path(path)).read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return  # a new notebook: nothing to keep
    language = model["content"]["metadata"].get("language_info")
    if isinstance(language, dict):
        version = on_disk.get("metadata", {}).get("language_info", {}).get("version")
        if version is None:
            language.pop("version", None)
        else:
            language["version"] = version


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and " " in argv[0]:  # LAB_ARGS passed as one quoted word
        argv = shlex.split(argv[0])
    cmd = command(argv)
    print(f"Opening the course: JupyterLab serves {ROOT} and opens {START_PAGE[1:]}/.\n"
          "The address to open (with its token) is printed below as http://…/lab/tree/notebooks?token=…; Ctrl+C stops it.",
          flush=True)
    return _run(cmd)


def _run(cmd: list[str]) -> int:
    """Become JupyterLab (on POSIX), so that Ctrl+C and a kill reach the server itself."""
    if os.name == "posix":
        os.chdir(ROOT)
        os.execv(cmd[0], cmd)
    try:
        return subprocess.call(cmd, cwd=ROOT)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
