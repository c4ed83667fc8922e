"""The build backend of fence-lock (PEP 517 and PEP 660), standard library only.

pip runs it from this directory (pyproject.toml's ``backend-path``), so that
building the package needs nothing to be installed or downloaded: not
setuptools, not wheel. It reads the ``[project]`` table of pyproject.toml and
builds

- a wheel of the packages named in ``[tool.fence-build]``, with the
  metadata (Metadata-Version 2.4: License-Expression, License-File), WHEEL,
  top_level.txt, the licence files and a RECORD of sha256 hashes;
- an sdist of what the wheel is built from, with this backend, so that it
  builds again;
- an editable wheel (``pip install -e``) whose import hook loads the
  packages from the source tree.

The archives are reproducible: their entries are sorted and dated
SOURCE_DATE_EPOCH, or 1980-01-01 when it is not set.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

# The project directory: the parent of the directory of this file.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The [project] keys this backend writes into the metadata; any other key
# is refused rather than left out of the package unsaid.
_PROJECT_KEYS = {
    "name",
    "version",
    "description",
    "readme",
    "requires-python",
    "license",
    "license-files",
    "dependencies",
    "optional-dependencies",
    "classifiers",
    "keywords",
    "urls",
}


# --- PEP 517 and PEP 660 hooks -------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = Project.load()
    dist_info = os.path.join(metadata_directory, project.dist_info)
    for name, data in project.dist_info_files():
        path = os.path.join(dist_info, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return project.dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = Project.load()
    files = [(name, _read(os.path.join(ROOT, *name.split("/")))) for name in project.package_files()]
    return _write_wheel(wheel_directory, project, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    project = Project.load()
    module = "_" + project.dist_name + "_editable"
    paths = {pkg: os.path.join(ROOT, pkg) for pkg in project.packages}
    finder = _EDITABLE_FINDER.replace("PATHS = {}", "PATHS = " + repr(paths))
    files = [
        (module + ".py", finder.encode()),
        ("__editable__." + project.dist_name + ".pth", ("import " + module + "\n").encode()),
    ]
    return _write_wheel(wheel_directory, project, files)


def build_sdist(sdist_directory, config_settings=None):
    project = Project.load()
    base = project.dist_name + "-" + project.version
    names = ["pyproject.toml", project.readme] + project.license_files
    names += ["_build/" + n for n in sorted(os.listdir(os.path.join(ROOT, "_build"))) if n.endswith(".py")]
    names += project.package_files()
    members = [(name, _read(os.path.join(ROOT, *name.split("/")))) for name in sorted(set(names))]
    members.append(("PKG-INFO", project.metadata()))
    members.sort()
    filename = base + ".tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(base + "/" + name)
            info.size = len(data)
            info.mtime = _epoch()
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(sdist_directory, filename), "wb") as f:
        # gzip with a fixed header (no name, the same date), for reproducibility.
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=_epoch()) as gz:
            gz.write(raw.getvalue())
    return filename


# --- the project ----------------------------------------------------------------


class Project:
    """What pyproject.toml says of the package."""

    def __init__(self, pyproject):
        project = pyproject.get("project")
        if not isinstance(project, dict):
            raise BuildError("pyproject.toml has no [project] table")
        if "dynamic" in project:
            raise BuildError("[project] dynamic: this backend takes every field from pyproject.toml")
        unknown = sorted(set(project) - _PROJECT_KEYS)
        if unknown:
            raise BuildError("[project] keys this backend does not write into the metadata: " + ", ".join(unknown))
        self.name = _string(project, "name")
        self.version = _string(project, "version")
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?", self.version):
            raise BuildError("version %r is not a canonical PEP 440 version" % self.version)
        self.description = project.get("description", "")
        self.readme = _string(project, "readme")
        self.requires_python = project.get("requires-python")
        self.license = _string(project, "license")
        self.license_files = project.get("license-files", [])
        if not isinstance(self.license_files, list) or not all(isinstance(f, str) for f in self.license_files):
            raise BuildError("[project] license-files must be a list of file names")
        for f in self.license_files:
            if not os.path.isfile(os.path.join(ROOT, *f.split("/"))):
                raise BuildError("license file %s does not exist" % f)
        self.dependencies = project.get("dependencies", [])
        self.optional = project.get("optional-dependencies", {})
        self.classifiers = project.get("classifiers", [])
        self.keywords = project.get("keywords", [])
        self.urls = project.get("urls", {})
        tool = pyproject.get("tool", {}).get("fence-build", {})
        self.packages = tool.get("packages", [])
        if not self.packages:
            raise BuildError("[tool.fence-build] names no packages")
        # The names in the files of a distribution (PEP 427, PEP 503).
        self.dist_name = re.sub(r"[-_.]+", "_", self.name).lower()
        self.dist_info = self.dist_name + "-" + self.version + ".dist-info"

    @classmethod
    def load(cls):
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            return cls(parse_toml(f.read()))

    def package_files(self):
        """The files of the packages, as paths relative to the project, sorted:
        the modules and the data beside them, not the bytecode."""
        out = []
        for pkg in self.packages:
            top = os.path.join(ROOT, pkg)
            if not os.path.isfile(os.path.join(top, "__init__.py")):
                raise BuildError("package %s has no __init__.py" % pkg)
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
                rel = os.path.relpath(dirpath, ROOT).replace(os.sep, "/")
                for n in sorted(filenames):
                    if n.endswith((".pyc", ".pyo")) or n.startswith("."):
                        continue
                    out.append(rel + "/" + n)
        return sorted(out)

    def metadata(self):
        """The core metadata (METADATA, PKG-INFO), version 2.4."""
        lines = [
            ("Metadata-Version", "2.4"),
            ("Name", self.name),
            ("Version", self.version),
        ]
        if self.description:
            lines.append(("Summary", self.description))
        if self.keywords:
            lines.append(("Keywords", ",".join(self.keywords)))
        for label, url in self.urls.items():
            lines.append(("Project-URL", label + ", " + url))
        lines.append(("License-Expression", self.license))
        for f in self.license_files:
            lines.append(("License-File", f))
        for c in self.classifiers:
            lines.append(("Classifier", c))
        if self.requires_python:
            lines.append(("Requires-Python", self.requires_python))
        for d in self.dependencies:
            lines.append(("Requires-Dist", d))
        for extra, deps in self.optional.items():
            lines.append(("Provides-Extra", extra))
            for d in deps:
                marker = 'extra == "%s"' % extra
                if ";" in d:
                    req, _, cond = d.partition(";")
                    lines.append(("Requires-Dist", "%s; (%s) and %s" % (req.strip(), cond.strip(), marker)))
                else:
                    lines.append(("Requires-Dist", "%s; %s" % (d, marker)))
        lines.append(("Description-Content-Type", _content_type(self.readme)))
        for k, v in lines:
            if "\n" in v or "\r" in v:
                raise BuildError("%s %r: a metadata field is one line" % (k, v))
        text = "".join("%s: %s\n" % kv for kv in lines)
        text += "\n" + _read(os.path.join(ROOT, self.readme)).decode("utf-8")
        return text.encode("utf-8")

    def dist_info_files(self):
        """The files of the .dist-info directory, RECORD apart."""
        wheel = (
            "Wheel-Version: 1.0\n"
            "Generator: fence_build\n"
            "Root-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        )
        files = [
            ("METADATA", self.metadata()),
            ("WHEEL", wheel.encode()),
            ("top_level.txt", "".join(p + "\n" for p in self.packages).encode()),
        ]
        for f in self.license_files:
            files.append(("licenses/" + f, _read(os.path.join(ROOT, *f.split("/")))))
        return files


# The import hook of an editable install: it finds the packages in the
# source tree, and nothing else there (no tests, no _build).
_EDITABLE_FINDER = '''"""Editable install of fence-lock: imports its packages from the source tree."""
import importlib.util
import os
import sys

PATHS = {}


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        top = PATHS.get(name)
        if top is None:
            return None
        return importlib.util.spec_from_file_location(
            name, os.path.join(top, "__init__.py"), submodule_search_locations=[top]
        )


sys.meta_path.append(_Finder)
'''


# --- archives --------------------------------------------------------------------


def _write_wheel(wheel_directory, project, files):
    """Writes the wheel of files (path, bytes) and the project's .dist-info,
    with its RECORD; returns the wheel's file name."""
    entries = sorted(files) + sorted((project.dist_info + "/" + n, d) for n, d in project.dist_info_files())
    record_name = project.dist_info + "/RECORD"
    record = io.StringIO()
    for name, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write("%s,sha256=%s,%d\n" % (_csv(name), digest, len(data)))
    record.write("%s,,\n" % _csv(record_name))
    entries.append((record_name, record.getvalue().encode()))
    filename = "%s-%s-py3-none-any.whl" % (project.dist_name, project.version)
    date = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=date)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


def _csv(name):
    if any(c in name for c in ',"\n\r'):
        raise BuildError("file name %r needs quoting in RECORD" % name)
    return name


def _epoch():
    # Zip dates start in 1980; SOURCE_DATE_EPOCH, when set, dates every entry.
    floor = 315532800  # 1980-01-01T00:00:00Z
    value = os.environ.get("SOURCE_DATE_EPOCH")
    return max(int(value), floor) if value else floor


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _string(table, key):
    v = table.get(key)
    if not isinstance(v, str) or not v:
        raise BuildError("[project] %s must be a string" % key)
    return v


def _content_type(readme):
    if readme.lower().endswith(".md"):
        return "text/markdown"
    if readme.lower().endswith(".rst"):
        return "text/x-rst"
    return "text/plain"


class BuildError(Exception):
    pass


# --- TOML ------------------------------------------------------------------------
#
# tomllib is Python 3.11 and later; the package supports 3.9. This reads the
# part of TOML 1.0 that pyproject.toml uses: tables, dotted keys, basic and
# literal strings, integers, booleans, arrays (over several lines) and inline
# tables. Anything else is an error, not a guess. The package's tests check
# it against tomllib.

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INTEGER = re.compile(r"[+-]?(0|[1-9](_?[0-9])*)(?![0-9A-Za-z_.:])")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def parse_toml(text):
    """Parses TOML text (the subset above) into dicts, lists, str, int, bool."""
    return _TOML(text).document()


class _TOML:
    def __init__(self, text):
        self.s = text.replace("\r\n", "\n")
        self.i = 0

    def error(self, msg):
        line = self.s.count("\n", 0, self.i) + 1
        raise BuildError("pyproject.toml:%d: %s" % (line, msg))

    def peek(self, n=1):
        return self.s[self.i : self.i + n]

    def spaces(self):
        while self.peek() in (" ", "\t"):
            self.i += 1

    def end_of_line(self):
        self.spaces()
        if self.peek() == "#":
            j = self.s.find("\n", self.i)
            self.i = len(self.s) if j < 0 else j
        if self.i < len(self.s):
            if self.peek() != "\n":
                self.error("expected the end of the line, found %r" % self.peek())
            self.i += 1

    def blank(self):
        """Skips white space, newlines and comments (inside arrays)."""
        while self.i < len(self.s):
            c = self.peek()
            if c in (" ", "\t", "\n"):
                self.i += 1
            elif c == "#":
                j = self.s.find("\n", self.i)
                self.i = len(self.s) if j < 0 else j
            else:
                return

    def document(self):
        root = {}
        table = root
        defined = set()
        while True:
            self.blank()
            if self.i >= len(self.s):
                return root
            if self.peek() == "[":
                if self.peek(2) == "[[":
                    self.error("arrays of tables are not supported")
                self.i += 1
                self.spaces()
                path = self.key()
                self.spaces()
                if self.peek() != "]":
                    self.error("expected ] after the table's name")
                self.i += 1
                if path in defined:
                    self.error("table [%s] defined twice" % ".".join(path))
                defined.add(path)
                table = self.descend(root, path)
                self.end_of_line()
            else:
                self.assign(table)
                self.end_of_line()

    def descend(self, table, path):
        for k in path:
            table = table.setdefault(k, {})
            if not isinstance(table, dict):
                self.error("%s is not a table" % k)
        return table

    def assign(self, table):
        path = self.key()
        self.spaces()
        if self.peek() != "=":
            self.error("expected = after a key")
        self.i += 1
        self.spaces()
        value = self.value()
        parent = self.descend(table, path[:-1])
        if path[-1] in parent:
            self.error("key %s defined twice" % ".".join(path))
        parent[path[-1]] = value

    def key(self):
        parts = []
        while True:
            self.spaces()
            c = self.peek()
            if c == '"':
                parts.append(self.basic_string())
            elif c == "'":
                parts.append(self.literal_string())
            else:
                m = _BARE_KEY.match(self.s, self.i)
                if not m:
                    self.error("expected a key, found %r" % c)
                parts.append(m.group())
                self.i = m.end()
            self.spaces()
            if self.peek() != ".":
                return tuple(parts)
            self.i += 1

    def value(self):
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        if c == "[":
            return self.array()
        if c == "{":
            return self.inline_table()
        for word, v in (("true", True), ("false", False)):
            if self.s.startswith(word, self.i) and not _BARE_KEY.match(self.s, self.i + len(word)):
                self.i += len(word)
                return v
        m = _INTEGER.match(self.s, self.i)
        if m:
            self.i = m.end()
            return int(m.group().replace("_", ""))
        self.error("a value this reader does not support, at %r" % self.s[self.i : self.i + 20])

    def basic_string(self):
        if self.peek(3) == '"""':
            self.error("multi-line strings are not supported")
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s):
                self.error("unterminated string")
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                e = self.s[self.i : self.i + 1]
                self.i += 1
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                elif e in ("u", "U"):
                    n = 4 if e == "u" else 8
                    digits = self.s[self.i : self.i + n]
                    if not re.fullmatch(r"[0-9A-Fa-f]{%d}" % n, digits):
                        self.error("bad \\%s escape" % e)
                    out.append(chr(int(digits, 16)))
                    self.i += n
                else:
                    self.error("bad escape \\%s" % e)
            elif c == "\n" or (ord(c) < 0x20 and c != "\t") or c == "\x7f":
                self.error("control character in a string")
            else:
                out.append(c)

    def literal_string(self):
        if self.peek(3) == "'''":
            self.error("multi-line strings are not supported")
        j = self.s.find("'", self.i + 1)
        nl = self.s.find("\n", self.i + 1)
        if j < 0 or (0 <= nl < j):
            self.error("unterminated string")
        v = self.s[self.i + 1 : j]
        self.i = j + 1
        return v

    def array(self):
        self.i += 1
        out = []
        while True:
            self.blank()
            if self.peek() == "]":
                self.i += 1
                return out
            out.append(self.value())
            self.blank()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                self.error("expected , or ] in an array")

    def inline_table(self):
        self.i += 1
        out = {}
        self.spaces()
        if self.peek() == "}":
            self.i += 1
            return out
        while True:
            self.assign(out)
            self.spaces()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() == "}":
                self.i += 1
                return out
            else:
                self.error("expected , or } in an inline table")
