"""``chipdock image``: a Dockerfile per vendor, written from the compatibility matrix.

The output folder is a complete build context: ``Dockerfile``, ``README.md`` (how to fill it, build and run),
``chipdock-entrypoint.sh`` (sources the vendor's environment script), and the empty folders the user fills:
``wheels/`` (the chipdock wheels and their dependencies: chipdock is not on PyPI, so the image installs with
``pip install --no-index --find-links``) and, for vendors whose runtime needs a licence or a portal account,
``vendor/`` (the vendor's own installers, never downloaded by the build).

Before writing anything the row is checked against its backend's manifest (:func:`chipdock._compat.contradictions`);
the manifest comes, in this order, from ``--manifest`` (a ``.chipdock.json`` or a backend's source folder), the
installed backend of that name, or ``backends/NAME`` of the chipdock source checkout the command runs in. A row that
contradicts it is refused and nothing is written. With none of these (a released backend neither installed nor in a
checkout), the row is used as released: core/tests/test_compat.py checks every row against the repository's CMake.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from . import _compat
from ._compat import CompatibilityError, ManifestFacts, MatrixRow

GENERATED_FILES = ("Dockerfile", "README.md", "chipdock-entrypoint.sh")
ENTRYPOINT = "/usr/local/bin/chipdock-entrypoint"
VENV = "/opt/chipdock"

# Each hadolint rule a generated Dockerfile ignores, with the reason written above the instruction it applies to.
IGNORES = {
    "DL3008": "DL3008 (pin apt package versions) is ignored: the base image's tag fixes the distribution release, "
              "and exact Debian/Ubuntu revisions disappear from the archive with every security update, which would "
              "break the build rather than pin anything.",
    "DL3013": "DL3013 (pin pip versions) is ignored: --no-index installs only the wheels in wheels/, so that "
              "folder's content pins every version; the chipdock wheels themselves are pinned with ==.",
}


class ImageError(Exception):
    """The image cannot be generated; the message says why. Nothing was written."""


@dataclass
class Check:
    """What the row was checked against, and what was found."""

    source: str  # where the manifest came from, or why there was none
    manifest: ManifestFacts | None
    contradictions: list[str] = field(default_factory=list)


@dataclass
class ImageResult:
    vendor: str
    output: Path
    files: list[str]
    check: Check
    tag: str


def check_row(row: MatrixRow, manifest: str | os.PathLike[str] | None = None,
              repository: str | os.PathLike[str] | None = None) -> Check:
    """The row against its backend's manifest: `manifest` if given, else the installed one, else the checkout's."""
    facts: ManifestFacts | None = None
    try:
        if manifest is not None:
            path = Path(manifest)
            facts = _compat.manifest_from_cmake(path) if path.is_dir() else _compat.load_manifest_file(path)
        else:
            facts = _compat.installed_manifests().get(row.backend)
            if facts is None:
                root = Path(repository) if repository is not None else _compat.repository_root()
                if root is not None and (root / "backends" / row.backend / "CMakeLists.txt").is_file():
                    facts = _compat.manifest_from_cmake(root / "backends" / row.backend)
    except CompatibilityError as exc:
        raise ImageError(f"the manifest to check row {row.vendor!r} against cannot be read: {exc}") from None
    if facts is None:
        why = ("the backend is not yet released and no manifest of it was found" if not row.released else
               "no installed backend or source checkout declares it; the row is used as released (CI checks every "
               "row against the repository's manifests)")
        return Check(f"not checked: {why}", None)
    return Check(facts.source, facts, _compat.contradictions(row, facts))


def _q(text: str) -> str:
    """A double-quoted Dockerfile/shell word (the matrix's values are checked to hold no quotes or newlines)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _apt_packages(row: MatrixRow) -> list[str]:
    return [*(row.python_from if isinstance(row.python_from, list) else []), *row.system_packages]


def _installer_step(row: MatrixRow, inst: _compat.Installer) -> list[str]:
    # The build args in the pattern are quoted, its glob characters are not.
    where = "/tmp/vendor/" + re.sub(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})", r'"\1"', inst.file)
    fail = (f"echo \"chipdock image {row.vendor}: vendor/ must hold exactly one {inst.file} ({inst.what}); "
            f"found: $* (README.md: where to get it)\" >&2; exit 1")
    lines = [f"set -- {where}", f"if [ \"$#\" -ne 1 ] || [ ! -f \"$1\" ]; then {fail}; fi"]
    if inst.kind == "run":
        lines.append(f"bash \"$1\" {inst.args}".rstrip())
        if inst.check:
            lines.append(f"if [ ! -e {inst.check} ]; then echo \"chipdock image {row.vendor}: {inst.file} did not "
                         f"install {inst.check}\" >&2; exit 1; fi")
    else:
        unpack = f"/tmp/unpack-{row.vendor}"
        lines += [f"mkdir -p {unpack}", f"tar -xzf \"$1\" -C {unpack}", f"set -- {unpack}/*/",
                  f"if [ \"$#\" -ne 1 ]; then echo \"chipdock image {row.vendor}: {inst.file} must unpack into one "
                  f"top folder, found $#\" >&2; exit 1; fi",
                  f"mkdir -p \"$(dirname {inst.target})\"", f"mv \"$1\" {inst.target}", f"rm -rf {unpack}"]
        if inst.check:
            lines.append(f"if [ ! -e {inst.target}/{inst.check} ]; then echo \"chipdock image {row.vendor}: "
                         f"{inst.file} holds no {inst.check}\" >&2; exit 1; fi")
    return lines


def _comment(text: str) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, 116)]


def _run(lines: list[str], mount: str = "") -> str:
    head = f"RUN {mount} \\\n    " if mount else "RUN "
    return head + " \\\n && ".join(lines)


def render_dockerfile(row: MatrixRow, core_version: str, check: Check) -> str:
    """The Dockerfile of `row` (hadolint-clean; see IGNORES)."""
    runtime = row.vendor_runtime
    if row.runtime_version_arg:
        runtime_text = f"{runtime['name']} ${{{row.runtime_version_arg}}}"
    elif runtime["name"] == "host":
        runtime_text = "the host CPU"
    else:
        runtime_text = f"{runtime['name']} {runtime['version'] or ''}".rstrip()
    out = [
        "# syntax=docker/dockerfile:1",
        f"# chipdock {row.vendor} image, generated by `chipdock image --vendor {row.vendor}` (chipdock {core_version})",
        f"# from the compatibility matrix row {row.vendor!r}. README.md beside this file says how to fill wheels/"
        + (" and vendor/" if row.installers else "") + ",",
        "# build and run it. Needs BuildKit (RUN --mount), the default builder of Docker 23 and later.",
        *_comment(f"Row checked against: {check.source}."),
    ]
    if not row.released:
        out.append(f"# chipdock-{row.backend} is not yet released: this image holds the {runtime['name']} runtime and "
                   "the chipdock core (CPU reference);")
        out.append("# the backend's wheel joins the row's wheels when it is released.")
    out += ["", f"FROM {row.base_image}", "", 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]', ""]
    if row.runtime_version_arg:
        out.append(f"ARG {row.runtime_version_arg}={runtime['version']}")
    out += [f"ARG {name}={value}" for name, value in row.build_args.items()]
    labels = {
        "org.opencontainers.image.title": f"chipdock-{row.vendor}",
        "org.opencontainers.image.description": f"chipdock {core_version} with the {row.vendor} backend on "
                                                f"{runtime_text}",
        "org.opencontainers.image.version": core_version,
        "io.chipdock.matrix-row": row.vendor,
        "io.chipdock.backend": f"{row.backend}" + ("" if row.released else " (not yet released)"),
        "io.chipdock.vendor-runtime": runtime_text,
        "io.chipdock.driver": (f"{row.driver['name'] or 'none'}"
                               + (f" >= {row.driver['min_version']}" if row.driver["min_version"] else "")
                               + " (from the host)"),
    }
    out.append("LABEL " + " \\\n      ".join(f"{k}={_q(v)}" for k, v in labels.items()))
    out.append("")
    packages = _apt_packages(row)
    if packages:
        out += [*_comment(IGNORES["DL3008"]), "# hadolint ignore=DL3008",
                _run(["apt-get update",
                      "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
                      + " ".join(sorted(set(packages))),
                      "rm -rf /var/lib/apt/lists/*"]), ""]
    user = row.user
    if user and user["create"]:
        out += [f"# The non-root user of the {row.vendor} convention (uid {user['uid']}).",
                _run([f"groupadd --gid {user['uid']} {user['name']}",
                      f"useradd --no-log-init --uid {user['uid']} --gid {user['name']} --create-home "
                      f"--home-dir /home/{user['name']} --shell /bin/bash {user['name']}"]), ""]
    if row.installers:
        steps = ["ARCH=\"$(uname -m)\""] if any("${ARCH}" in i.file for i in row.installers) else []
        for inst in row.installers:
            steps += _installer_step(row, inst)
        steps += [f"ln -sfn {target} {link}" for link, target in row.links.items()]
        out += ["# The vendor's installers, from the build context's vendor/ folder (README.md: where they come from);",
                "# bind-mounted, so they never become a layer of the image.",
                _run(steps, "--mount=type=bind,source=vendor,target=/tmp/vendor"), ""]
    python = "python3"
    requirements = [*row.wheels, *row.python_packages]
    unpinned = any("==" not in req for req in requirements)
    out += [f"# A virtual environment for chipdock (CPython {row.python}), outside the distribution's Python.",
            f"RUN {python} -m venv {VENV}",
            f"ENV VIRTUAL_ENV={VENV} \\\n    PATH={VENV}/bin:$PATH", "",
            "# The chipdock wheels and every wheel they need, from the build context's wheels/ folder: chipdock is "
            "not on PyPI.",
            *([*_comment(IGNORES["DL3013"]), "# hadolint ignore=DL3013"] if unpinned else []),
            _run(["pip install --no-cache-dir --no-index --find-links /tmp/wheels "
                  + " ".join(_q(req) for req in requirements), "chipdock --version"],
                 "--mount=type=bind,source=wheels,target=/tmp/wheels"), ""]
    if row.environment:
        out += ["ENV " + " \\\n    ".join(f"{k}={_q(v)}" for k, v in row.environment.items()), ""]
    out += [f"COPY --chmod=0755 chipdock-entrypoint.sh {ENTRYPOINT}", ""]
    if user:
        out += [f"# {user['name']}, by number: a host or an orchestrator (runAsNonRoot) resolves no names.",
                f"USER {user['uid']}:{user['uid']}", f"WORKDIR /home/{user['name']}"]
    else:
        out += [f"# The {row.vendor} vendor's images run as root (its device nodes and tools expect it).",
                "WORKDIR /workspace"]
    out += ["",
            "# `chipdock check`: every backend accepted and a smoke test on every device, non-zero on a failure.",
            f'HEALTHCHECK --interval=5m --timeout=2m --start-period=1m --retries=1 \\\n'
            f'    CMD ["{ENTRYPOINT}", "chipdock", "check"]',
            f'ENTRYPOINT ["{ENTRYPOINT}"]', 'CMD ["chipdock", "check"]', ""]
    return "\n".join(out)


def render_entrypoint(row: MatrixRow) -> str:
    lines = ["#!/bin/bash",
             f"# chipdock {row.vendor} image's entry point (generated by `chipdock image`): the vendor's environment,",
             "# then the command.", ""]
    if row.env_script:
        lines += [f"if [ -f {row.env_script} ]; then",
                  "  # shellcheck disable=SC1091",
                  f"  source {row.env_script}",
                  "else",
                  f"  echo \"chipdock-entrypoint: {row.env_script} is missing; the {row.vendor_runtime['name']} "
                  "runtime is not set up\" >&2",
                  "fi"]
    for folder in reversed(row.library_path):  # the first one listed ends up first
        lines += [f"if [ -d {folder} ]; then",
                  f"  LD_LIBRARY_PATH=\"{folder}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\"", "fi"]
    if row.library_path:
        lines.append("export LD_LIBRARY_PATH")
    lines += ['exec "$@"', ""]
    return "\n".join(lines)


def docker_run_line(row: MatrixRow, tag: str, extra: str = "", command: str = "") -> str:
    """The `docker run` line of the image: one flag group per line where there are several."""
    groups = [*row.run_flags, *(f"--device={d}" for d in row.devices), *(f"-v {m}" for m in row.mounts)]
    head = "docker run --rm" + (f" {extra}" if extra else "")
    tail = tag + (f" {command}" if command else "")
    if len(groups) <= 1:
        return " ".join([head, *groups, tail])
    return " \\\n    ".join([head, *groups, tail])


_WHERE = {
    "npu": "Huawei's Ascend community site (hiascend.com, CANN downloads; an account is needed, and commercial "
           "editions need a licence). Take the toolkit and the kernels package for your SoC (NPU_SOC) and "
           "architecture, of the CANN version the row pins",
    "xpu": "Kunlunxin's SDK release (through Kunlunxin's developer portal or your Kunlunxin contact): the XRE "
           "runtime archive for Ubuntu on x86-64. P800 (KL3) takes XRE 5 (the row's version); R200/R300 (KL2) take "
           "XRE 4 (e.g. --build-arg XRE_VERSION=4.31.0.1 with its archive)",
    "dcu": "Hygon's developer community (DTK downloads; registration needed): the DTK archive of the row's version "
           "built for the image's distribution",
}

_HOST = {
    "cpu": "Nothing beyond a container engine.",
    "cuda": "An NVIDIA driver >= {min} on the host and the NVIDIA Container Toolkit (it mounts the driver into the "
            "container for `--gpus`). `--gpus all` gives every GPU; `--gpus '\"device=0\"'` one.",
    "npu": "The Ascend driver (HDK) installed on the host under /usr/local/Ascend/driver: the image carries CANN but "
           "never the driver, which is bind-mounted read-only. One `--device=/dev/davinciN` per NPU to expose "
           "(`--device=/dev/davinci0` is the first). The container runs as HwHiAiUser (uid 1000); the host's "
           "HwHiAiUser must have the same uid/gid (the driver's convention), or pass `--user UID:GID` of the host's.",
    "xpu": "The Kunlunxin driver on the host: one `--device=/dev/xpuN` per XPU to expose, plus `--device="
           "/dev/xpuctrl`. XPU_VISIBLE_DEVICES (default 0 in the image) selects among them.",
    "dcu": "The Hygon DCU driver on the host, and hyhal under /opt/hyhal (bind-mounted read-only). `/dev/kfd` and "
           "`/dev/dri` pass every DCU; the container joins the video group that owns them. DTK's env.sh is sourced "
           "by the entry point.",
}


def render_readme(row: MatrixRow, core_version: str, check: Check, tag: str) -> str:
    runtime = row.vendor_runtime
    wheel_names = ", ".join(w.partition("==")[0] for w in row.wheels)
    out = [f"# chipdock {row.vendor} image", "",
           f"Generated by `chipdock image --vendor {row.vendor}` (chipdock {core_version}) from the row "
           f"`{row.vendor}` of chipdock's compatibility matrix (`chipdock/compatibility.yaml`).", ""]
    if not row.released:
        out += [f"**chipdock-{row.backend} is not yet released.** This image holds what a user of that backend "
                f"builds on: the {runtime['name']} runtime and the chipdock core with its CPU reference backend. "
                f"`chipdock check` in it checks the CPU device only. When chipdock-{row.backend} is released, the "
                "row pins its wheel and the generator checks the row against its manifest.", ""]
    driver = row.driver
    out += ["| | |", "| --- | --- |", f"| base image | `{row.base_image}` |", f"| Python | CPython {row.python} |",
            f"| vendor runtime | {runtime['name']} {runtime['version'] or '(none)'}"
            + (f" (from {', '.join(i.what for i in row.installers)} in vendor/)" if row.installers else
               " (NVIDIA's wheels, in wheels/)" if row.vendor_runtime_from == "wheels" else "") + " |",
            f"| driver | {driver['name'] or '-'}" + (f" >= {driver['min_version']}" if driver["min_version"] else "")
            + f", from the host{': ' + driver['note'] if driver['note'] else ''} |",
            f"| chipdock wheels | {', '.join(f'`{w}`' for w in row.wheels)} |",
            f"| user | {row.user['name'] + ' (uid ' + str(row.user['uid']) + ')' if row.user else 'root'} |",
            f"| checked against | {check.source} |", ""]
    out += ["## 1. Fill the build context", "",
            f"`wheels/` must hold the chipdock wheels ({wheel_names}), built for CPython {row.python} on the "
            "architecture of the image (the core wheel has a compiled extension: use the project's cibuildwheel "
            "configuration, or `pip wheel` run with that Python), and every other wheel the image installs, "
            "downloaded from PyPI for that Python. The image installs with `pip install --no-index --find-links "
            "wheels/`: nothing is downloaded at build time, and chipdock, which is not on PyPI, never comes from "
            "there.", "", "```bash", "mkdir -p wheels",
            "cp " + " ".join(f"/path/to/{w.partition('==')[0].replace('-', '_')}-{w.partition('==')[2]}-*.whl"
                             for w in row.wheels) + " wheels/"]
    if row.python_packages:
        out += [f"python{row.python} -m pip download --dest wheels --only-binary=:all: \\",
                "    " + " ".join(shlex.quote(r) for r in row.python_packages)]
    out += ["```", ""]
    if row.installers:
        out += [f"`vendor/` must hold the vendor's own installers, which the build cannot download (they need the "
                f"vendor's licence or portal account). Get them from {_WHERE.get(row.vendor, 'the vendor')}:", ""]
        out += [f"- `{i.file}`: {i.what}" for i in row.installers]
        args = [row.runtime_version_arg or "", *row.build_args]
        arch = "; `ARCH` is `uname -m` in the build" if any("${ARCH}" in i.file for i in row.installers) else ""
        out += ["", "The names are shell patterns over the build args (" + ", ".join(f"`{a}`" for a in args if a)
                + f"{arch}). The build stops with the name it expected when a file is "
                "missing. Building with another version (`--build-arg "
                f"{row.runtime_version_arg}=...`) makes an image the matrix did not check: run `chipdock doctor` "
                "in it.", ""]
    build_args = "".join(f" --build-arg {k}={v}" for k, v in row.build_args.items())
    out += ["## 2. Build", "", "```bash", f"DOCKER_BUILDKIT=1 docker build{build_args} -t {tag} .", "```", "",
            "## 3. Run", "", _HOST[row.vendor].format(min=driver["min_version"]), "", "```bash",
            docker_run_line(row, tag), docker_run_line(row, tag, "-it", "bash"), "```", "",
            f"The first runs `chipdock check` (the image's default command); the second opens a shell. The entry "
            f"point ({ENTRYPOINT})"
            + (f" sources `{row.env_script}`" if row.env_script else "")
            + (f" and puts {', '.join(row.library_path)} on LD_LIBRARY_PATH" if row.library_path else "")
            + (" before it runs the command." if row.env_script or row.library_path else " runs the command."),
            "", "The image's HEALTHCHECK runs `chipdock check` every 5 minutes: the container turns unhealthy when a "
            "backend is refused or a device fails its smoke test (`docker inspect --format '{{json .State.Health}}' "
            "CONTAINER` shows the output).", ""]
    return "\n".join(out)


def render(row: MatrixRow, core_version: str, check: Check, tag: str) -> dict[str, str]:
    return {"Dockerfile": render_dockerfile(row, core_version, check),
            "README.md": render_readme(row, core_version, check, tag),
            "chipdock-entrypoint.sh": render_entrypoint(row)}


def _folders(row: MatrixRow) -> list[str]:
    return ["wheels", *(["vendor"] if row.installers else [])]


def write_image(vendor: str, output: str | os.PathLike[str] | None = None, *, force: bool = False,
                manifest: str | os.PathLike[str] | None = None, matrix: str | os.PathLike[str] | None = None,
                core_version: str | None = None) -> ImageResult:
    """Checks row `vendor` and writes its build context into `output` (default ./chipdock-image-VENDOR).

    Refuses (ImageError, nothing written) an unknown vendor, a row that contradicts its backend's manifest, and an
    output folder that is not empty unless `force`; with `force` only the generated files are replaced (wheels/ and
    vendor/ keep what the user put there).
    """
    try:
        rows = _compat.load_matrix(matrix)
    except CompatibilityError as exc:
        raise ImageError(str(exc)) from None
    if vendor not in rows:
        raise ImageError(f"the compatibility matrix has no row {vendor!r} (rows: {', '.join(rows)})")
    row = rows[vendor]
    check = check_row(row, manifest)
    if check.contradictions:
        listed = "\n".join(f"  - {c}" for c in check.contradictions)
        raise ImageError(f"row {vendor!r} of the compatibility matrix contradicts its backend's manifest "
                         f"({check.source}); nothing was written:\n{listed}")
    if core_version is None:
        core_version = next(w.partition("==")[2] for w in row.wheels if w.startswith("chipdock=="))
    out = Path(output if output is not None else f"chipdock-image-{vendor}")
    if out.exists() and not out.is_dir():
        raise ImageError(f"the output {out} exists and is not a folder; nothing was written")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ImageError(f"the output folder {out} is not empty; pass --force to rewrite its "
                         f"{', '.join(GENERATED_FILES)} (other files are kept); nothing was written")
    tag = f"chipdock-{vendor}:{core_version}"
    files = render(row, core_version, check, tag)
    _write_all(out, files, _folders(row))
    return ImageResult(vendor, out, list(files), check, tag)


def _write_all(out: Path, files: dict[str, str], folders: list[str]) -> None:
    """Writes every file or none: into a new sibling folder renamed into place, or file by file with os.replace."""
    try:
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
            try:
                _fill(staging, files, folders)
                staging.rename(out)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            return
        temps: list[tuple[Path, Path]] = []
        try:
            for name, text in files.items():
                fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.chmod(tmp, 0o755 if name.endswith(".sh") else 0o644)
                temps.append((Path(tmp), out / name))
            for folder in folders:
                (out / folder).mkdir(exist_ok=True)
        except BaseException:
            for tmp, _ in temps:
                tmp.unlink(missing_ok=True)
            raise
        for tmp, final in temps:
            os.replace(tmp, final)
    except OSError as exc:
        raise ImageError(f"writing {out} failed: {exc.strerror or exc}") from None


def _fill(folder: Path, files: dict[str, str], folders: list[str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755 if name.endswith(".sh") else 0o644)
    for sub in folders:
        (folder / sub).mkdir()
    folder.chmod(0o755)
