"""``python -m course.bench``: the command line (see ``course.bench``)."""

import argparse
import sys

import torch

import course.bench as bench
from course.bench.copy import run_copy
from course.bench.gemm import run_gemm
from course.bench.host import run_host
from course.bench.report import plot_recorded


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m course.bench", description=bench.__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["gemm", "copy", "host", "all", "plot"])
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--set", choices=["benchmark", "broad"], default="benchmark",
                    help="benchmark: the course's shape set, every mode; broad: shapes nothing was tuned on, auto only")
    ap.add_argument("--dtypes", default="bf16,fp16,int8", help="comma-separated: bf16, fp16, int8")
    ap.add_argument("--out", default=None, help="folder for a JSON copy and the PNG plots")
    ap.add_argument("--no-save", action="store_true", help="do not write course/data/")
    ap.add_argument("--per-triton", action="store_true",
                    help="gemm: name the record after Triton's version too (gemm_<gpu>_triton3.9.json), as host "
                         "records are; gemm_<gpu>.json, which the notebooks plot, stays as it is")
    ap.add_argument("--no-precompile", action="store_true", help="compile in the timed process instead")
    args = ap.parse_args(argv)
    if args.what == "plot":
        return plot_recorded(args.out or "vis")
    if not torch.cuda.is_available():
        raise SystemExit("course.bench measures GPU speed: it needs a GPU (none is visible to PyTorch). "
                         "Recorded results are in course/data/.")
    if args.what in ("copy", "all"):
        run_copy(args)
    if args.what in ("gemm", "all"):
        run_gemm(args)
    if args.what in ("host", "all"):
        run_host(args)


if __name__ == "__main__":
    sys.exit(main())

