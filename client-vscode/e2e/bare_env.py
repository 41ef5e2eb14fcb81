"""Makes a virtual environment in which gradguard's dependencies import but gradguard does not.

The end-to-end test points `gradguard.interpreter` at it to exercise the extension's
"gradguard is not installed" prompt and its "Install gradguard" button (pip installing the
wheel bundled in the .vsix) without any network: the dependencies are made visible from the
running interpreter's site-packages through symlinks and a .pth file, so pip finds them
already satisfied.

usage: python bare_env.py TARGET_DIR   (prints the new interpreter's path)
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig


def requirement_names(dist: md.Distribution) -> list[str]:
    names = []
    for req in dist.requires or []:
        name, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", name)
        if m:
            names.append(m.group(1))
    return names


def closure(root: str) -> dict[str, md.Distribution]:
    seen: dict[str, md.Distribution] = {}
    todo = requirement_names(md.distribution(root))
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # e.g. a backport this Python does not need
        seen[key] = dist
        todo.extend(requirement_names(dist))
    return seen


def main() -> None:
    target = os.path.abspath(sys.argv[1])
    deps = os.path.join(target, "deps")
    os.makedirs(deps, exist_ok=True)
    site = sysconfig.get_paths()["purelib"]
    for dist in closure("gradguard").values():
        tops = set()
        for f in dist.files or []:
            parts = f.parts
            if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(".pth"):
                continue
            tops.add(parts[0])
        for top in tops:
            src = os.path.join(site, top)
            dst = os.path.join(deps, top)
            if os.path.exists(src) and not os.path.lexists(dst):
                os.symlink(src, dst)
    env = os.path.join(target, "venv")
    subprocess.run([sys.executable, "-m", "venv", env], check=True)
    python = os.path.join(env, "bin", "python")
    env_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    with open(os.path.join(env_site, "gradguard_e2e_deps.pth"), "w") as fh:
        fh.write(deps + "\n")
    check = subprocess.run([python, "-I", "-c", "import pygls, lsprotocol, jedi\ntry:\n import gradguard\nexcept ImportError:\n pass\nelse:\n raise SystemExit('gradguard importable')"])
    if check.returncode != 0:
        raise SystemExit("bare_env: the environment is not as intended")
    print(python)


if __name__ == "__main__":
    main()
