"""The two ways to build the environment (requirements.txt for make, environment.yml for conda) agree."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip().lstrip("- ").strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{line!r} is not pinned with =="
            pins[name.lower()] = version
    return pins


def _environment_yml_pip_section():
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*- pip:\s*$", line))
    section = []
    for line in lines[start + 1:]:
        if not re.match(r"\s{6,}- ", line):
            break
        section.append(line)
    return section


def test_requirements_and_environment_yml_pin_the_same_packages():
    requirements = _pins((ROOT / "requirements.txt").read_text().splitlines())
    conda = _pins(_environment_yml_pip_section())
    assert requirements == conda


def test_pins_satisfy_the_course_constraints():
    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    assert pins["triton"] == "3.9.0", "the default set is today's Triton"
    gpu_image = _pins((ROOT / "requirements-triton3.6.txt").read_text().splitlines())
    assert gpu_image["triton"] == "3.6.0", "the GPU image has Triton 3.6"
    major, minor, *_ = (int(x) for x in gpu_image["numpy"].split("."))
    assert (major, minor) < (2, 4), "Triton 3.6's interpreter breaks runtime-bounded loops under numpy >= 2.4"


def test_the_triton_3_6_set_differs_from_the_default_only_in_triton_and_numpy():
    default = _pins((ROOT / "requirements.txt").read_text().splitlines())
    gpu_image = _pins((ROOT / "requirements-triton3.6.txt").read_text().splitlines())
    assert {k for k in default.keys() | gpu_image.keys() if default.get(k) != gpu_image.get(k)} == {"triton", "numpy"}


def test_pyproject_names_every_runtime_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ ]", d)[0].lower() for d in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {re.split(r"[<>=!~ ]", d)[0].lower() for d in extra}
    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    assert set(pins) == names, f"pyproject lists {sorted(names)}, requirements.txt pins {sorted(pins)}"
