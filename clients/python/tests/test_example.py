"""The README's example, run as a program against a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

import fence

from .fenceserver import FenceServer

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
EXAMPLE = PKG / "examples" / "cron_job.py"


class ExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = FenceServer()
        cls.addClassCleanup(cls.server.stop)
        cls.client = fence.Client(cls.server.addr)


    def run_example(self) -> subprocess.CompletedProcess:
        env = dict(os.environ, FENCE_ADDR=self.server.addr, PYTHONPATH=str(PKG))
        return subprocess.run(
            [sys.executable, str(EXAMPLE)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60
        )

    def test_runs(self) -> None:
        p = self.run_example()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        token = int(re.search(r"token (\d+)", p.stdout).group(1))
        self.assertIn("wrote eu: HTTP 200", p.stdout)
        self.assertIn("done", p.stdout)
        for region in ("eu", "us"):
            item = self.client.get("nightly-report", region)
            self.assertEqual(item.token, token)
            self.assertIn("orders", json.loads(item.value))
        self.assertFalse(self.client.status("nightly-report").held)

        # A second run gets a greater token; a run while the lock is held
        # leaves it alone.
        p2 = self.run_example()
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertGreater(int(re.search(r"token (\d+)", p2.stdout).group(1)), token)
        with self.client.lock("nightly-report", ttl=10):
            p3 = self.run_example()
        self.assertEqual(p3.returncode, 0, p3.stderr)
        self.assertIn("another run holds nightly-report", p3.stdout)

    def test_readme_shows_the_example(self) -> None:
        readme = (PKG / "README.md").read_text(encoding="utf-8")
        blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
        self.assertIn(EXAMPLE.read_text(encoding="utf-8"), blocks, "README.md must show examples/cron_job.py as it is")


if __name__ == "__main__":
    unittest.main()
