"""Tests of the python plugin's `run` on plain CPython (no component needed):

    PYTHONPATH=sdk/python:plugins/python python3 -m unittest discover -s plugins/python/tests

The sandbox itself (limits, no network, the workspace) is tested end to end in
tests/e2e/tests/languages.rs against the built component.
"""

import json
import os
import tempfile
import unittest

import app  # noqa: F401 - registers the tools
from toolhost_sdk import Toolkit
from toolhost_sdk._wit import Err


def run(code):
    try:
        items = Toolkit().call("run", json.dumps({"code": code}))
    except Err as e:
        kind = "invalid_input" if type(e.value).__name__.endswith("InvalidInput") else "failed"
        return kind, e.value.value
    assert len(items) == 1
    return "ok", json.loads(items[0].value)


class Run(unittest.TestCase):
    def setUp(self):
        self.cwd = os.getcwd()

    def tearDown(self):
        os.chdir(self.cwd)

    def test_value_of_the_last_expression(self):
        kind, out = run("x = 20\nx + 22")
        self.assertEqual(kind, "ok")
        self.assertEqual(out["result"], "42")
        self.assertIsNone(out["error"])

    def test_stdout_and_stderr_are_captured(self):
        kind, out = run("import sys\nprint('to out')\nprint('to err', file=sys.stderr)")
        self.assertEqual((out["stdout"], out["stderr"]), ("to out\n", "to err\n"))
        self.assertIsNone(out["result"], "a statement last: no value")

    def test_none_is_no_result(self):
        self.assertIsNone(run("None")[1]["result"])

    def test_exception_keeps_output_before_it_and_the_snippet_frames(self):
        kind, out = run("print('before')\ndef f():\n    raise ValueError('bad')\nf()")
        self.assertEqual(kind, "ok")
        self.assertEqual(out["stdout"], "before\n")
        err = out["error"]
        self.assertEqual((err["type"], err["message"]), ("ValueError", "bad"))
        self.assertIn('File "<snippet>", line 3, in f', err["traceback"])
        self.assertNotIn("app.py", err["traceback"], "no frames of the plugin itself")

    def test_syntax_error(self):
        err = run("1 +")[1]["error"]
        self.assertEqual(err["type"], "SyntaxError")
        self.assertIn("line 1", err["traceback"])

    def test_deep_recursion_is_folded(self):
        err = run("def r(n): return r(n + 1)\nr(0)")[1]["error"]
        self.assertEqual(err["type"], "RecursionError")
        self.assertIn("more time", err["traceback"])
        self.assertLess(len(err["traceback"]), 2000)

    def test_system_exit_is_reported_not_raised(self):
        self.assertEqual(run("raise SystemExit(3)")[1]["error"]["type"], "SystemExit")

    def test_output_is_capped(self):
        out = run("print('x' * 200_000)\n'y' * 200_000")[1]
        self.assertTrue(out["truncated"])
        self.assertEqual(len(out["stdout"]), app.MAX_CHARS)
        self.assertEqual(len(out["result"]), app.MAX_CHARS)

    def test_nul_is_invalid_input(self):
        self.assertEqual(run("1\0")[0], "invalid_input")

    def test_fresh_namespace_each_call(self):
        run("leak = 1")
        self.assertEqual(run("leak")[1]["error"]["type"], "NameError")

    def test_workspace_is_the_current_directory(self):
        with tempfile.TemporaryDirectory() as d:
            old, app.WORKSPACE = app.WORKSPACE, d
            try:
                out = run("open('f.txt', 'w').write('hi')\nimport os\nsorted(os.listdir('.'))")[1]
            finally:
                app.WORKSPACE = old
            self.assertEqual(out["result"], "['f.txt']")
            self.assertTrue(os.path.isfile(os.path.join(d, "f.txt")))


if __name__ == "__main__":
    unittest.main()
