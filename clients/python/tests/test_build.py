"""The package's build backend, _build/fence_build.py: its TOML reader against
tomllib, and the archives it writes. Installing with pip is tested from the
repository root (TestPythonPackage, packaging)."""

from __future__ import annotations

import base64
import email.parser
import hashlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

import fence

PKG = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fence_build", PKG / "_build" / "fence_build.py")
fence_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fence_build)

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


class TOMLTest(unittest.TestCase):
    @unittest.skipIf(tomllib is None, "tomllib is Python 3.11 and later")
    def test_pyproject_as_tomllib_reads_it(self) -> None:
        text = (PKG / "pyproject.toml").read_text(encoding="utf-8")
        self.assertEqual(fence_build.parse_toml(text), tomllib.loads(text))

    @unittest.skipIf(tomllib is None, "tomllib is Python 3.11 and later")
    def test_the_subset_as_tomllib_reads_it(self) -> None:
        cases = [
            'a = "x"\nb = \'y\\z\'\nc = 42\nd = -7\ne = 1_000\nf = true\ng = false\n',
            '"quoted key" = "esc: \\" \\\\ \\t \\n \\u00e9 \\U0001F512"\n',
            "# comment\n\n[t]  # comment\nx.y = 1\nx.z = [\n  1,\n  # inside\n  2,\n]\n",
            '[a.b]\nc = { d = "e", f = [1, 2] , g = {} }\n[a.c]\nk = []\n',
            "[project]\nname = 'n'\r\nlist = [ \"a\" , 'b' ]\r\n",
            'k = ""\n[\'lit\'."dq".bare]\nv = 0\n',
        ]
        for text in cases:
            with self.subTest(text=text):
                self.assertEqual(fence_build.parse_toml(text), tomllib.loads(text))

    def test_refuses_what_it_does_not_read(self) -> None:
        for text in [
            'a = """x"""\n',
            "a = '''x'''\n",
            "a = 1.5\n",
            "a = 1979-05-27\n",
            "[[a]]\nb = 1\n",
            "a = 1\na = 2\n",
            "[t]\n[t]\n",
            'a = "unterminated\n',
            'a = "\\q"\n',
            "a = 1 b = 2\n",
            "a = 01\n",
            "a = [1 2]\n",
        ]:
            with self.subTest(text=text):
                with self.assertRaises(fence_build.BuildError):
                    fence_build.parse_toml(text)


class ArchiveTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.project = fence_build.Project.load()

    def test_version_is_the_package_version(self) -> None:
        self.assertEqual(self.project.version, fence.__version__)

    def wheel(self, hook=fence_build.build_wheel, sub="wheel") -> Path:
        out = self.tmp / sub
        out.mkdir()
        return out / hook(str(out))

    def test_wheel(self) -> None:
        whl = self.wheel()
        self.assertEqual(whl.name, "fence_lock-%s-py3-none-any.whl" % self.project.version)
        with zipfile.ZipFile(whl) as z:
            files = {n: z.read(n) for n in z.namelist()}
        info = "fence_lock-%s.dist-info/" % self.project.version
        record = files[info + "RECORD"].decode().splitlines()
        self.assertEqual(sorted(r.split(",")[0] for r in record), sorted(files))
        for line in record:
            name, digest, size = line.split(",")
            if name == info + "RECORD":
                self.assertEqual((digest, size), ("", ""))
                continue
            want = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
            self.assertEqual((digest, size), ("sha256=" + want, str(len(files[name]))), name)
        source = sorted(
            "fence/" + p.name for p in (PKG / "fence").iterdir() if p.is_file() and p.suffix != ".pyc"
        )
        self.assertEqual(sorted(n for n in files if n.startswith("fence/")), source)
        self.assertIn("fence/py.typed", files)
        self.assertEqual(files[info + "licenses/LICENSE"], (PKG / "LICENSE").read_bytes())
        self.assertEqual(files[info + "top_level.txt"], b"fence\n")
        meta = email.parser.Parser().parsestr(files[info + "METADATA"].decode("utf-8"))
        self.assertEqual(meta["Name"], "fence-lock")
        self.assertEqual(meta["Version"], fence.__version__)
        self.assertEqual(meta["Requires-Python"], ">=3.9")
        self.assertEqual(meta["License-Expression"], "Apache-2.0")
        self.assertEqual(meta.get_all("Provides-Extra"), ["verify"])
        self.assertEqual(meta.get_all("Requires-Dist"), ['cryptography; extra == "verify"'])
        self.assertEqual(meta.get_payload(), (PKG / "README.md").read_text(encoding="utf-8"))

    def test_reproducible(self) -> None:
        self.assertEqual(self.wheel(sub="a").read_bytes(), self.wheel(sub="b").read_bytes())
        a, b = self.tmp / "sa", self.tmp / "sb"
        a.mkdir()
        b.mkdir()
        self.assertEqual(
            (a / fence_build.build_sdist(str(a))).read_bytes(), (b / fence_build.build_sdist(str(b))).read_bytes()
        )

    def test_sdist_builds_the_same_wheel(self) -> None:
        sdist = self.tmp / fence_build.build_sdist(str(self.tmp))
        with tarfile.open(sdist) as tar:
            # filter="data" where tarfile has it (3.12, and backports): the
            # safe extraction, which later Pythons default to.
            tar.extractall(self.tmp / "x", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        (tree,) = (self.tmp / "x").iterdir()
        out = self.tmp / "from-sdist"
        out.mkdir()
        # The sdist's own backend, in a process of its own.
        name = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, '_build'); import fence_build; "
             "print(fence_build.build_wheel(sys.argv[1]))", str(out)],
            cwd=tree, check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        ).stdout.strip()
        self.assertEqual((out / name).read_bytes(), self.wheel().read_bytes())
        self.assertEqual(
            (tree / "PKG-INFO").read_bytes(),
            zipfile.ZipFile(out / name).read("fence_lock-%s.dist-info/METADATA" % self.project.version),
        )

    def test_editable_wheel_finds_the_source(self) -> None:
        whl = self.wheel(fence_build.build_editable)
        with zipfile.ZipFile(whl) as z:
            names = z.namelist()
            z.extractall(self.tmp / "site")
        self.assertNotIn("fence/__init__.py", names)
        pth = [n for n in names if n.endswith(".pth")]
        self.assertEqual(len(pth), 1)
        # A fresh interpreter that reads the .pth, as site-packages does.
        out = subprocess.run(
            [sys.executable, "-S", "-c", "import site, sys; site.addsitedir(sys.argv[1]); "
             "import fence; print(fence.__file__)", str(self.tmp / "site")],
            cwd=self.tmp, check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": ""},
        ).stdout.strip()
        self.assertEqual(Path(out), PKG / "fence" / "__init__.py")

    def test_metadata_hook(self) -> None:
        name = fence_build.prepare_metadata_for_build_wheel(str(self.tmp))
        self.assertEqual(name, "fence_lock-%s.dist-info" % self.project.version)
        self.assertEqual(
            sorted(str(p.relative_to(self.tmp / name)) for p in (self.tmp / name).rglob("*") if p.is_file()),
            ["METADATA", "WHEEL", os.path.join("licenses", "LICENSE"), "top_level.txt"],
        )
        for hook in (
            fence_build.get_requires_for_build_wheel,
            fence_build.get_requires_for_build_sdist,
            fence_build.get_requires_for_build_editable,
        ):
            self.assertEqual(hook(), [])


if __name__ == "__main__":
    unittest.main()
