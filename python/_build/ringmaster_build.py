"""A self-contained PEP 517 build backend for the ringmaster package.

The package is pure Python (ctypes over libringmaster_shim.so), so building
it is copying files into a zip. Doing that here rather than through
setuptools means ``pip install ./python`` needs nothing from an index: pip
sets up an isolated build environment with the (empty) build requirements
of pyproject.toml, so it works offline, with no flags. The wheel holds
``ringmaster/`` and, when the build tree staged it beside the package,
``ringmaster/libringmaster_shim.so`` (then the wheel is tagged for this
platform instead of ``any``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "ringmaster"


def _project():
    """[project] of pyproject.toml: name, version, description,
    requires-python and the optional dependencies."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:  # Python < 3.11: the plain key = "value" lines
        out, section = {}, ""
        with open(path) as f:
            for line in f:
                m = re.match(r"\s*\[(.+)\]\s*$", line)
                if m:
                    section = m.group(1)
                    continue
                m = re.match(r'\s*([\w-]+)\s*=\s*"(.*)"\s*$', line)
                if m and section == "project":
                    out[m.group(1)] = m.group(2)
        return out


def _files():
    """(path in the archive, path on disk) of the package."""
    out = []
    for d, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n == "libringmaster_shim.so":
                full = os.path.join(d, n)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"),
                            full))
    return out


def _metadata(p) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}",
             f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for extra, reqs in sorted(p.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            lines.append(f'Requires-Dist: {r}; extra == "{extra}"')
    return "\n".join(lines) + "\n"


def _tag(files) -> str:
    if any(a.endswith(".so") for a, _ in files):
        plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
        return f"py3-none-{plat}"
    return "py3-none-any"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return f"{name},sha256={digest.rstrip(b'=').decode()},{len(data)}"


def _dist_info(p) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    d = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata(p))
    return _dist_info(p)


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    p = _project()
    files = _files()
    tag = _tag(files)
    name = f"{p['name']}-{p['version']}-{tag}.whl"
    info = _dist_info(p)
    wheel = (f"Wheel-Version: 1.0\nGenerator: ringmaster_build\n"
             f"Root-Is-Purelib: {'true' if tag.endswith('any') else 'false'}"
             f"\nTag: {tag}\n")
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        def add(arcname: str, data: bytes, mode: int = 0o644):
            zi = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = (mode | 0o100000) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            record.append(_record_line(arcname, data))
        for arcname, full in files:
            with open(full, "rb") as f:
                add(arcname, f.read(),
                    0o755 if arcname.endswith(".so") else 0o644)
        add(f"{info}/METADATA", _metadata(p).encode())
        add(f"{info}/WHEEL", wheel.encode())
        record.append(f"{info}/RECORD,,")
        zi = zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        z.writestr(zi, "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
                   ("_build/ringmaster_build.py", os.path.abspath(__file__))]
        members += [(a, f) for a, f in _files() if a.endswith(".py")]
        for arcname, full in members:
            t.add(full, arcname=f"{base}/{arcname}")
        data = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return name
