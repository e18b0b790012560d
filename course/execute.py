"""Run notebooks top to bottom and save them with their outputs (how the committed outputs are made).

    python -m course.execute notebooks/0*.ipynb            # in place
    python -m course.execute --out DIR notebooks/01_vector_add.ipynb

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working directory;
cells tagged ``raises-exception`` may raise, any other error stops that notebook and is reported.
Progress bars are dropped from the saved outputs: a widget saved without its live state shows
a frozen "0%" bar to whoever opens the file.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def execute(path: Path, out_dir: Path | None = None, timeout_s: int = 1800) -> Path:
    """Execute ``path`` and write it (in place, or into ``out_dir``); return where it was written."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    _drop_progress_bars(nb)
    tidy_metadata(nb)
    target = (out_dir / path.name) if out_dir else path
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


_WIDGET = "application/vnd.jupyter.widget-view+json"
# What JupyterLab writes for the python3 kernel of ipykernel, so that opening a notebook changes nothing.
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def tidy_metadata(nb) -> None:
    """Give ``nb`` (a notebook or its JSON dict) the python3 kernelspec as JupyterLab names it."""
    nb["metadata"]["kernelspec"] = dict(KERNELSPEC)


def _drop_progress_bars(nb) -> None:
    """Remove widget outputs (tqdm's bars) and the widget state nbclient saves with them."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if _WIDGET not in o.get("data", {})]
    nb.metadata.pop("widgets", None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write executed copies here instead of in place")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.notebooks:
        if not path.exists():
            print(f"{path}: no such notebook", file=sys.stderr)
            failed += 1
            continue
        start = time.perf_counter()
        try:
            target = execute(path, args.out, args.timeout)
            print(f"ok   {path.name} -> {target} ({time.perf_counter() - start:.0f} s)")
        except Exception as exc:  # report and go on with the next notebook
            failed += 1
            print(f"FAIL {path.name}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
