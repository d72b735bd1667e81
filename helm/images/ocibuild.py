#!/usr/bin/env python3
"""Build the chart's images without Docker, from Debian's tools (issue 33): a Debian root file system by
`mmdebstrap`, Python packages installed in it from wheels built here (`pip wheel`, so nothing inside the image
reaches a network), packed as an OCI image by `umoci`, pushed to a registry by `skopeo`.

    python3 helm/images/ocibuild.py hub                       # build (or find cached) -> prints the OCI layout
    python3 helm/images/ocibuild.py workspace --push 127.0.0.1:5000/ti-hub/workspace:0.1.0 \\
        --creds bot:s3cret --insecure                         # and push it (creds: user:password)

Images are cached under ~/.cache/ti-hub/images/<name>-<key>, the key a hash of everything that goes in (this
script, the image's spec, the sources of ti_hub and ti_labextension, the Debian suite), so a warm machine builds
nothing. The Dockerfiles beside this script build the same images where a Docker engine is.
Needs root (mmdebstrap's root mode and a chroot for pip), mmdebstrap, umoci and skopeo (apt-get install).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TI_HUB_CACHE", Path.home() / ".cache" / "ti-hub")) / "images"
SUITE = "bookworm"  # Python 3.11, the version TiHub is tested with
PYTHON = "3.11.2"  # bookworm's: wheels are resolved for it (some packages refuse it; pip picks older ones)
PLATFORMS = ("manylinux_2_36_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64",
             "manylinux1_x86_64", "linux_x86_64", "any")
VENV = "/opt/ti-hub"
TAG = "latest"
UID = 1000  # z2jh runs the hub as 1000; Jupyter's images run users as 1000 (jovyan)


@dataclass(frozen=True)
class Spec:
    """One image: what Debian installs, what pip installs into VENV, and how the image runs."""

    debs: tuple[str, ...]
    pip: tuple[str, ...]  # requirements; "." is this checkout's ti_hub, "./ti_labextension" the panels
    user: str
    workdir: str
    cmd: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    # what the dependency layer is made of besides the spec (a change rebuilds it; minutes)
    base_sources: tuple[str, ...] = ("setup.cfg", "pyproject.toml")
    # shell commands run in the image (chroot) after TiHub is installed, in the top layer
    after: tuple[str, ...] = ()


BASE_DEBS = ("python3", "python3-venv", "ca-certificates", "tini", "libcurl4")
SPECS: dict[str, Spec] = {
    # the hub's pod: JupyterHub with TiHub's spawner and the ti service, and what z2jh's hub configuration
    # imports (kubespawner; pycurl: it configures tornado's curl client)
    "hub": Spec(BASE_DEBS, (".[kubernetes,postgres]", "pycurl"), user=str(UID), workdir="/srv/jupyterhub",
                cmd=("jupyterhub", "--config", "/usr/local/etc/jupyterhub/jupyterhub_config.py")),
    # a workspace: jupyterhub-singleuser with JupyterLab, TiHub's panels, the `ti` CLI and magics, TensorBoard
    "workspace": Spec(BASE_DEBS + ("git", "openssh-sftp-server"),
                      (".[tensorboard]", "./ti_labextension", "jupyterlab", "ipykernel"),
                      user=str(UID), workdir="/home/jovyan", cmd=("jupyterhub-singleuser",),
                      # every IPython kernel loads the %ti magics, as on the embedded platform
                      env={"PYTHONSTARTUP": "/usr/local/etc/ti-hub-autoload.py"},
                      after=(f"ln -sf \"$({VENV}/bin/python -c 'from ti_hub.magics import AUTOLOAD_FILE; "
                             "print(AUTOLOAD_FILE)')\" /usr/local/etc/ti-hub-autoload.py",),
                      base_sources=("setup.cfg", "pyproject.toml", "ti_labextension/src", "ti_labextension/style",
                                    "ti_labextension/package.json", "ti_labextension/package-lock.json",
                                    "ti_labextension/pyproject.toml", "ti_labextension/ti_labextension/__init__.py",
                                    "ti_labextension/jupyter-config")),
}


def log(msg: str) -> None:
    print(f"ocibuild: {msg}", file=sys.stderr, flush=True)


def files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and "node_modules" not in p.parts and p.suffix not in (".pyc",))


def digest(parts: list, sources: tuple[str, ...]) -> str:
    h = hashlib.sha256(json.dumps(parts).encode())
    for src in sources:
        for f in files_under(ROOT / src):
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def base_key(name: str, spec: Spec) -> str:
    """The dependency layer's key: this script, the spec, the Debian suite, TiHub's declared dependencies."""
    return digest([Path(__file__).read_text(), name, SUITE, PYTHON, repr(spec)], spec.base_sources)


def key_of(name: str, spec: Spec) -> str:
    """The image's key: its dependency layer's and TiHub's own sources (a changed file is a new image, built in
    seconds on the cached dependency layer)."""
    return digest([base_key(name, spec)], ("ti_hub", "README.md"))


def tihub_extras(spec: Spec) -> str:
    """The extras the spec asks of TiHub itself (".[kubernetes,postgres]" -> "[kubernetes,postgres]")."""
    return next((r[1:] for r in spec.pip if r.startswith(".[")), "")


def without_pip_settings() -> dict[str, str]:
    """This environment without pip's settings: pip in the image reads only the wheels it is given."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}


def run(cmd: list[str], **kw) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def wheels(spec: Spec, into: Path) -> None:
    """Wheels for everything the image's pip installs, fetched or built here (the image's build needs no network),
    resolved for the image's Python (Debian's, not this one: a package may refuse it)."""
    if "./ti_labextension" in spec.pip:
        run(["bash", str(ROOT / "ti_labextension" / "build.sh")])  # the panels' JavaScript, cached
    local = [str(ROOT / r[2:]) if r.startswith("./") else str(ROOT) for r in spec.pip if r.startswith(".")]
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(into), *local])
    built = [str(w) + (tihub_extras(spec) if w.name.startswith("ti_hub-") else "") for w in into.glob("*.whl")]
    pins = [r for r in spec.pip if not r.startswith(".")]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--dest", str(into), "--find-links", str(into),
           "--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311",
           *[a for p in PLATFORMS for a in ("--platform", p)], *built, *pins]
    for _ in range(10):
        log("$ pip download ... (for Python " + PYTHON + ")")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            return
        # a package published only as source: build its wheel here (same glibc and Python minor as the image's)
        missing = re.search(r"No matching distribution found for ([A-Za-z0-9_.\-]+)", r.stderr)
        if not missing:
            raise SystemExit(f"ocibuild: pip download failed:\n{r.stderr[-3000:]}")
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(into), missing.group(1)])
    raise SystemExit("ocibuild: too many packages without wheels")


def rootfs(name: str, spec: Spec, wheel_dir: Path, out_tar: Path) -> None:
    """Debian + a venv at VENV with the wheels, and the image's user; one tar, its owners kept."""
    pins = [r for r in spec.pip if not r.startswith(".")]
    local = [p.name for p in wheel_dir.glob("*.whl") if p.name.startswith(("ti_hub-", "ti_labextension-"))]
    install = [f"/tmp/wheels/{w}" + (tihub_extras(spec) if w.startswith("ti_hub-") else "") for w in local] + pins
    hooks = [
        f'mkdir -p "$1/tmp/wheels" && cp -a {wheel_dir}/. "$1/tmp/wheels/"',
        f'chroot "$1" python3 -m venv {VENV}',
        f'chroot "$1" {VENV}/bin/pip install -q --no-index --find-links /tmp/wheels ' + " ".join(
            f"'{x}'" for x in install),
        # TiHub itself goes into the top layer (top()): this layer holds what it depends on
        f'chroot "$1" {VENV}/bin/pip uninstall -q -y ti-hub',
        'rm -rf "$1/tmp/wheels"',
        f'chroot "$1" useradd --uid {UID} --create-home --shell /bin/bash jovyan',
        f'mkdir -p "$1{spec.workdir}" && chown {UID}:{UID} "$1{spec.workdir}"',
        # no apt lists or docs in the image
        'rm -rf "$1"/var/lib/apt/lists/* "$1"/usr/share/doc/* "$1"/usr/share/man/*',
    ]
    cmd = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(spec.debs), "--quiet"]
    for hook in hooks:
        cmd += ["--customize-hook", hook]
    run(cmd + [SUITE, str(out_tar)], env=without_pip_settings())


def base(name: str, spec: Spec) -> Path:
    """The dependency layer as an OCI layout: Debian, the venv with every dependency, the user; cached."""
    dest = CACHE / f"{name}-base-{base_key(name, spec)}"
    if (dest / "index.json").exists():
        return dest
    for tool in ("mmdebstrap", "umoci"):
        if not shutil.which(tool):
            raise SystemExit(f"ocibuild: {tool} is missing: apt-get install -y mmdebstrap umoci skopeo")
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{name}-base-") as tmp:
        t = Path(tmp)
        log(f"{name}: building the dependency layer {dest.name} (wheels, Debian {SUITE}; minutes)")
        wheels(spec, t / "wheels")
        rootfs(name, spec, t / "wheels", t / "rootfs.tar")
        ref = f"{t / 'oci'}:{TAG}"
        run(["umoci", "init", "--layout", str(t / "oci")])
        run(["umoci", "new", "--image", ref])
        run(["umoci", "raw", "add-layer", "--image", ref, str(t / "rootfs.tar")])  # umoci gzips it
        (t / "oci").rename(dest)  # whole or not at all
    return dest


def top(spec: Spec, base_layout: Path, layout: Path, work: Path) -> None:
    """TiHub on the dependency layer (pip --no-deps in the image: umoci's repack keeps only what changed, one
    small layer), then the run configuration."""
    shutil.copytree(base_layout, layout)
    ref = f"{layout}:{TAG}"
    bundle = work / "bundle"
    run(["umoci", "unpack", "--image", ref, str(bundle)], stdout=subprocess.DEVNULL)
    wheel_dir = work / "app"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheel_dir), str(ROOT)])
    rootfs = bundle / "rootfs"
    (rootfs / "tmp" / "app").mkdir(parents=True)
    for w in wheel_dir.glob("*.whl"):
        shutil.copy(w, rootfs / "tmp" / "app" / w.name)
    wheel = next(wheel_dir.glob("ti_hub-*.whl")).name
    run(["chroot", str(rootfs), f"{VENV}/bin/pip", "install", "-q", "--no-deps", "--no-index", f"/tmp/app/{wheel}"],
        env=without_pip_settings())
    for cmd in spec.after:
        run(["chroot", str(rootfs), "/bin/sh", "-c", cmd])
    shutil.rmtree(rootfs / "tmp" / "app")
    run(["umoci", "repack", "--image", ref, str(bundle)])
    env = {"PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           **spec.env}
    cfg = ["umoci", "config", "--image", ref, "--config.user", spec.user, "--config.workingdir", spec.workdir,
           "--config.entrypoint", "tini", "--config.entrypoint", "--"]
    for part in spec.cmd:
        cfg += ["--config.cmd", part]
    for k, v in env.items():
        cfg += ["--config.env", f"{k}={v}"]
    run(cfg)
    run(["umoci", "gc", "--layout", str(layout)])


def build(name: str) -> Path:
    """The image's OCI layout (tag TAG), built unless cached."""
    spec = SPECS[name]
    dest = CACHE / f"{name}-{key_of(name, spec)}"
    if (dest / "index.json").exists():
        log(f"{name}: cached {dest}")
        return dest
    CACHE.mkdir(parents=True, exist_ok=True)
    # one build per image at a time: a second caller (the tests, while scripts/test builds in the background)
    # waits for the first and finds its result
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / "index.json").exists():
            log(f"{name}: cached {dest}")
            return dest
        return _build(name, spec, dest)


def _build(name: str, spec: Spec, dest: Path) -> Path:
    below = base(name, spec)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{name}-") as tmp:
        log(f"{name}: TiHub on {below.name}")
        top(spec, below, Path(tmp) / "oci", Path(tmp))
        (Path(tmp) / "oci").rename(dest)
    return dest


def push(layout: Path, target: str, creds: str | None, insecure: bool) -> None:
    """skopeo copy to ``target``; the login goes through an auth file of mode 0600 (never on a command line, where
    `ps` shows it), and a failure says skopeo's words without it."""
    cmd = ["skopeo", "copy", "--quiet"]
    if insecure:
        cmd += ["--dest-tls-verify=false"]
    with tempfile.TemporaryDirectory(prefix="ocibuild-auth-") as tmp:
        if creds:
            auth = Path(tmp) / "auth.json"
            auth.touch(mode=0o600)
            host = target.split("/", 1)[0]
            auth.write_text(json.dumps({"auths": {host: {"auth": base64.b64encode(creds.encode()).decode()}}}))
            cmd += ["--dest-authfile", str(auth)]
        log(f"$ skopeo copy oci:{layout}:{TAG} docker://{target}")
        r = subprocess.run(cmd + [f"oci:{layout}:{TAG}", f"docker://{target}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ocibuild: pushing to {target} failed: {r.stderr.strip()}")


def size_mib(layout: Path) -> float:
    return sum(f.stat().st_size for f in (layout / "blobs").rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("image", choices=sorted(SPECS))
    p.add_argument("--push", metavar="HOST/REPO:TAG", help="push the image there (skopeo)")
    p.add_argument("--creds", metavar="USER:PASSWORD", help="the registry's login (default: none)")
    p.add_argument("--insecure", action="store_true", help="plain HTTP / unverified TLS to the registry")
    p.add_argument("--print-key", action="store_true", help="print the cache key and stop")
    a = p.parse_args(argv)
    if a.print_key:
        print(key_of(a.image, SPECS[a.image]))
        return
    layout = build(a.image)
    log(f"{a.image}: {size_mib(layout):.0f} MiB compressed")
    if a.push:
        push(layout, a.push, a.creds, a.insecure)
    print(layout)


if __name__ == "__main__":
    main()
