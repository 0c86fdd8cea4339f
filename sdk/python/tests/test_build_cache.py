"""build.sh's build cache (sdk/build-common.sh), run as written with a
stand-in componentize-py in a venv of its own: it writes different bytes on
every run (as the real one may) and counts its runs, so a test sees which
builds ran and which were copies. The real componentizer is run by the
end-to-end tests (tests/e2e/tests/languages.rs, tasks.rs).

    PYTHONPATH=sdk/python python3 -m unittest discover -s sdk/python/tests
"""

import os
import pathlib
import shutil
import subprocess
import tempfile
import unittest

SDK = pathlib.Path(__file__).resolve().parents[1]
BUILD = SDK / "build.sh"

FAKE = """#!/usr/bin/env bash
# componentize-py, stood in for: its version, or a "component" of new bytes.
if [ "$1" = --version ]; then echo "componentize-py {version}"; exit 0; fi
echo run >>"{runs}"
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
head -c 64 /dev/urandom >"$out"
"""

APP = "from toolhost_sdk import Toolkit, tool  # noqa: F401\n\n@tool\ndef hi() -> str:\n    return 'hi'\n"


def version():
    for line in BUILD.read_text().splitlines():
        if line.startswith("COMPONENTIZE_PY_VERSION="):
            return line.split("=", 1)[1]
    raise AssertionError("build.sh pins no componentize-py version")


class BuildCache(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp)
        self.runs = self.tmp / "runs"
        venv = self.tmp / "venv"
        (venv / "bin").mkdir(parents=True)
        fake = venv / "bin" / "componentize-py"
        fake.write_text(FAKE.format(version=version(), runs=self.runs))
        fake.chmod(0o755)
        self.cache = self.tmp / "cache"
        self.env = dict(os.environ, TOOLHOST_PY_VENV=str(venv), TOOLHOST_BUILD_CACHE=str(self.cache))

    def plugin(self, folder, name="hello", app=APP, extra=None):
        d = self.tmp / folder
        d.mkdir()
        (d / "app.py").write_text(app)
        (d / f"{name}.toml").write_text(f'description = "{folder}"\n')
        for path, text in (extra or {}).items():
            (d / path).write_text(text)
        return d

    def build(self, plugin, out="out", **env):
        out = self.tmp / out
        r = subprocess.run(
            ["bash", str(BUILD), str(plugin), str(out)],
            env=dict(self.env, **env),
            capture_output=True,
            text=True,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout + r.stderr

    def ran(self):
        return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0

    def kept(self):
        return sorted((self.cache / "python").glob("*.wasm"))

    def test_the_same_sources_build_once_and_give_the_same_bytes(self):
        said = self.build(self.plugin("a"), out="out-a")
        self.assertIn("built", said)
        self.assertEqual((self.ran(), len(self.kept())), (1, 1))
        # Another folder, another manifest (a name, a description): the
        # same sources, so the component comes from the cache.
        said = self.build(self.plugin("b", name="other"), out="out-b")
        self.assertIn("from the build cache", said)
        self.assertEqual(self.ran(), 1)
        first = (self.tmp / "out-a" / "hello.wasm").read_bytes()
        self.assertEqual((self.tmp / "out-b" / "other.wasm").read_bytes(), first)
        self.assertEqual((self.tmp / "out-b" / "other.toml").read_text(), 'description = "b"\n')

    def test_any_change_of_the_sources_builds_again(self):
        self.build(self.plugin("a"), out="out-a")
        changed = {
            "code": self.plugin("code", app=APP + "# changed\n"),
            "a data file": self.plugin("data", extra={"words.txt": "the data the module may read"}),
        }
        for n, (what, plugin) in enumerate(changed.items(), start=2):
            said = self.build(plugin, out=f"out-{n}")
            self.assertNotIn("from the build cache", said, what)
            self.assertEqual(self.ran(), n, what)
        # The module's name is an input too.
        d = self.plugin("module")
        (d / "other.py").write_text(APP)
        self.assertNotIn("from the build cache", self.build(d, out="out-m", TOOLHOST_PY_MODULE="other"))
        self.assertEqual(self.ran(), 4)

    def test_off_builds_every_time_and_the_newest_are_kept(self):
        self.build(self.plugin("a"), out="out-a", TOOLHOST_BUILD_CACHE="off")
        self.build(self.plugin("b"), out="out-b", TOOLHOST_BUILD_CACHE="off")
        self.assertEqual((self.ran(), self.kept()), (2, []))
        for n in range(3):
            self.build(self.plugin(f"k{n}", app=APP + f"# {n}\n"), out=f"out-k{n}", BUILD_CACHE_KEEP="2")
        self.assertEqual((self.ran(), len(self.kept())), (5, 2))
        # The oldest went; the newest is still a copy.
        said = self.build(self.plugin("again", app=APP + "# 2\n"), out="out-again", BUILD_CACHE_KEEP="2")
        self.assertIn("from the build cache", said)
        self.assertEqual(self.ran(), 5)


if __name__ == "__main__":
    unittest.main()
