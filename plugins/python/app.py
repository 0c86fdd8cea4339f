"""python: run Python snippets inside the wasm sandbox.

The light counterpart of the Docker notebook: each call gets a fresh CPython
3.14 (componentize-py's snapshot of this module), runs the snippet and is
thrown away. Fuel, memory and wall-clock limits come from the manifest; there
is no network, no environment and no file system but the session workspace at
/workspace (the current directory when the manifest grants it).

Only modules imported here exist inside the component (there is no file
system to import from at run time), so the useful part of the standard library
is imported up front; a snippet's `import` of them is then a dictionary lookup.
"""

import ast
import builtins
import contextlib
import io
import linecache
import os
import sys
import traceback

# Importable by snippets (see the module docstring). Kept to pure-Python or
# built-in modules that work under WASI.
import base64  # noqa: F401
import bisect  # noqa: F401
import calendar  # noqa: F401
import collections  # noqa: F401
import copy  # noqa: F401
import csv  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import decimal  # noqa: F401
import difflib  # noqa: F401
import enum  # noqa: F401
import fractions  # noqa: F401
import functools  # noqa: F401
import glob  # noqa: F401
import hashlib  # noqa: F401
import heapq  # noqa: F401
import html  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import pathlib  # noqa: F401
import pprint  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import struct  # noqa: F401
import textwrap  # noqa: F401
import time  # noqa: F401
import typing  # noqa: F401
import unicodedata  # noqa: F401
import urllib.parse  # noqa: F401
import uuid  # noqa: F401
import zlib  # noqa: F401

from toolhost_sdk import Json, Toolkit, ToolError, tool  # noqa: F401 - Toolkit is the export

SNIPPET = "<snippet>"
# Each of stdout, stderr and the result's repr keeps this many characters.
MAX_CHARS = 64 * 1024
WORKSPACE = "/workspace"


class _Capped(io.StringIO):
    """A text stream that keeps the first MAX_CHARS characters."""

    def __init__(self):
        super().__init__()
        self.dropped = 0

    def write(self, s):
        room = MAX_CHARS - self.tell()
        if len(s) > room:
            self.dropped += len(s) - max(room, 0)
            s = s[: max(room, 0)]
        return super().write(s) if s else 0


def _cap(text):
    if len(text) <= MAX_CHARS:
        return text, False
    return text[:MAX_CHARS], True


def _split(code):
    """Parse `code`; split off a final expression statement (the REPL's value)."""
    tree = ast.parse(code, SNIPPET, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    return compile(tree, SNIPPET, "exec"), (compile(last, SNIPPET, "eval") if last else None)


def _error(exc):
    """The exception as {type, message, traceback}, with the snippet's frames only."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == SNIPPET]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    # StackSummary folds repeated frames (deep recursion) into one line.
    lines += traceback.StackSummary.from_list(frames).format()
    lines += traceback.format_exception_only(type(exc), exc)
    return {"type": type(exc).__name__, "message": str(exc), "traceback": "".join(lines)}


@tool
def run(code: str) -> Json:
    """Run a Python 3.14 snippet in a fresh sandboxed interpreter (no network, no state kept between calls) and return what it printed and the value of its last expression, like a notebook cell.

    Returns {stdout, stderr, result, error, truncated}: `result` is the repr of
    the final expression (null when the snippet ends with a statement), `error`
    is null or {type, message, traceback} when the snippet raised. The standard
    library's pure modules are available (math, statistics, json, re,
    collections, itertools, datetime, decimal, fractions, random, csv, hashlib,
    textwrap, ...); third-party packages are not. Files of the session
    workspace are in the current directory. Use the notebook tools instead for
    numpy, plotting, long computations or state across calls.

    Args:
        code: Python source, e.g. "import math\\nsum(math.sqrt(i) for i in range(10))".
    """
    if "\0" in code:
        raise ToolError.invalid_input("`code` must not contain NUL characters")
    try:
        body, last = _split(code)
    except SyntaxError as e:
        return Json({"stdout": "", "stderr": "", "result": None, "error": _error(e), "truncated": False})
    linecache.cache[SNIPPET] = (len(code), None, code.splitlines(True), SNIPPET)
    if os.path.isdir(WORKSPACE):
        os.chdir(WORKSPACE)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    out, err = _Capped(), _Capped()
    result, error = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(body, namespace)
            if last is not None:
                value = eval(last, namespace)
                if value is not None:
                    result = repr(value)
        except MemoryError:
            raise  # the host reports out_of_memory
        except BaseException as e:  # SystemExit and KeyboardInterrupt included
            error = _error(e)
    result, cut = _cap(result) if result is not None else (None, False)
    return Json({
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "result": result,
        "error": error,
        "truncated": bool(out.dropped or err.dropped or cut),
    })


# Snippets see an ordinary interpreter: no SDK frames in sys.argv.
sys.argv = ["python"]
