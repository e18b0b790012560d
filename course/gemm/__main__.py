"""``python -m course.gemm``: build the compiled layout key of the routes (``course.gemm.layout_key``).

Once per torch and Python version, about 15 s with a C++ compiler and ninja; later processes use it."""

import time

from course.gemm import layout_key

if __name__ == "__main__":
    start = time.perf_counter()
    layout_key.build()
    print(f"course.gemm.layout_key: built in {layout_key.build_directory()} ({time.perf_counter() - start:.0f} s)")
