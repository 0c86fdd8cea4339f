"""textstats: statistics of plain text and CSV data, for agents.

A toolhost plugin written in Python with the toolhost SDK (sdk/python), built
into a WebAssembly component by componentize-py:

    sdk/python/build.sh plugins/textstats target/plugins

Every module the tools use is imported here, at the top: inside the component
only modules imported at build time exist.
"""

import csv as csvlib  # the tool's parameter is named `csv`
import io
import math
import re
import statistics
from collections import Counter
from typing import Annotated, List, Optional, TypedDict

from toolhost_sdk import Toolkit, ToolError, host, tool  # noqa: F401 - Toolkit is the export

# Words: runs of letters/digits, with inner apostrophes or hyphens ("don't", "well-known").
WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
# A sentence ends at . ! ? or an ellipsis followed by whitespace (or the end).
SENTENCE_END = re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+")
PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
DEFAULT_WPM = 238  # average silent reading speed of adults, words per minute

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t don't it's i'm""".split()
)


class WordCount(TypedDict):
    word: str
    count: int


class Summary(TypedDict):
    """Statistics of a text."""

    characters: int
    characters_no_spaces: int
    words: int
    unique_words: int
    sentences: int
    paragraphs: int
    lines: int
    average_word_length: float
    average_sentence_words: float
    reading_time_seconds: int
    reading_time: str
    top_words: List[WordCount]


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min" if rest == 0 else f"{minutes} min {rest} s"


def _words_per_minute() -> int:
    raw = host.config("words_per_minute")
    if raw is None:
        return DEFAULT_WPM
    try:
        wpm = int(raw)
        if wpm > 0:
            return wpm
    except ValueError:
        pass
    host.log("warn", f"ignoring [config] words_per_minute = {raw!r}: not a positive integer")
    return DEFAULT_WPM


@tool
def summary(
    text: str,
    top: Annotated[int, {"minimum": 0, "maximum": 100}] = 10,
    skip_stopwords: bool = True,
) -> Summary:
    """Statistics of a plain text: characters, words, sentences, paragraphs, average
    word and sentence length, estimated reading time and the most frequent words.

    Args:
        text: The text to analyse.
        top: How many of the most frequent words to list (0 for none).
        skip_stopwords: Leave common English words ("the", "and", ...) out of the
            most frequent words.
    """
    words = WORD.findall(text)
    lowered = [w.lower().replace("\u2019", "'") for w in words]
    stripped = text.strip()
    sentences = [s for s in SENTENCE_END.split(stripped) if WORD.search(s)] if stripped else []
    paragraphs = [p for p in PARAGRAPH_BREAK.split(stripped) if p.strip()] if stripped else []
    counts = Counter(w for w in lowered if not (skip_stopwords and w in STOPWORDS))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    wpm = _words_per_minute()
    seconds = math.ceil(len(words) * 60 / wpm) if words else 0
    host.log("debug", f"{len(words)} words, {len(sentences)} sentences at {wpm} wpm")
    return {
        "characters": len(text),
        "characters_no_spaces": sum(1 for c in text if not c.isspace()),
        "words": len(words),
        "unique_words": len(set(lowered)),
        "sentences": len(sentences),
        "paragraphs": len(paragraphs),
        "lines": len(text.splitlines()),
        "average_word_length": round(sum(len(w) for w in words) / len(words), 2) if words else 0.0,
        "average_sentence_words": round(len(words) / len(sentences), 2) if sentences else 0.0,
        "reading_time_seconds": seconds,
        "reading_time": _duration(seconds),
        "top_words": [{"word": w, "count": c} for w, c in ranked],
    }


MISSING = frozenset({"", "na", "n/a", "null", "none", "nan"})


def _number(value: str) -> Optional[float]:
    """The value as a finite number, or None when it is not one."""
    if "_" in value:  # float() accepts 1_000; a CSV number does not
        return None
    try:
        n = float(value)
    except ValueError:
        return None
    return n if math.isfinite(n) else None


def _plain(n: float):
    """Whole floats as ints (3.0 -> 3), others rounded for display."""
    return int(n) if n.is_integer() and abs(n) < 2**53 else round(n, 6)


def _sniff(sample: str) -> str:
    try:
        return csvlib.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csvlib.Error:
        return ","


@tool
def csv_summary(
    csv: str,  # noqa: A002 - the parameter agents see is named `csv`
    delimiter: Annotated[Optional[str], {"minLength": 1, "maxLength": 1}] = None,
    top: Annotated[int, {"minimum": 1, "maximum": 50}] = 5,
) -> dict:
    """Summarise CSV data: its columns and row count; per numeric column the count,
    min, max, mean and median; per text column the number of distinct values and
    the most common ones. The first row is the header; empty cells and NA, N/A,
    null, None and NaN count as missing.

    Args:
        csv: The CSV text, header row first.
        delimiter: The field delimiter, one character. Guessed among , ; tab and |
            when absent.
        top: How many of the most common values to list per text column.
    """
    if not csv.strip():
        raise ToolError.invalid_input("the CSV is empty")
    delim = delimiter if delimiter is not None else _sniff(csv[:8192])
    if delim in ('"', "\r", "\n"):
        raise ToolError.invalid_input(f"{delim!r} cannot be a delimiter")
    reader = csvlib.reader(io.StringIO(csv, newline=""), delimiter=delim, strict=True)
    rows = []  # (line number, fields), blank lines left out
    try:
        for row in reader:
            if any(field.strip() for field in row):
                rows.append((reader.line_num, row))
    except csvlib.Error as e:
        raise ToolError.invalid_input(f"bad CSV at line {reader.line_num}: {e}") from None
    if not rows:
        raise ToolError.invalid_input("the CSV has no header row")
    header, data = rows[0][1], [row for _, row in rows[1:]]
    names = [h.strip() or f"column_{i + 1}" for i, h in enumerate(header)]
    duplicates = sorted(n for n, c in Counter(names).items() if c > 1)
    if duplicates:
        raise ToolError.invalid_input(f"duplicate column names in the header: {', '.join(duplicates)}")
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise ToolError.invalid_input(
                f"line {line} has {len(row)} field{'s' if len(row) != 1 else ''}, the header has {len(header)} "
                f"(delimiter {delim!r}; pass `delimiter` if that is wrong)"
            )
    host.progress(f"parsed {len(data)} rows", done=0, total=len(names))
    columns = []
    for j, name in enumerate(names):
        values = [row[j].strip() for row in data]
        present = [v for v in values if v.lower() not in MISSING]
        numbers = [_number(v) for v in present]
        column = {"name": name, "count": len(present), "missing": len(values) - len(present)}
        if present and all(n is not None for n in numbers):
            column["type"] = "number"
            column.update(
                min=_plain(min(numbers)),
                max=_plain(max(numbers)),
                mean=_plain(statistics.fmean(numbers)),
                median=_plain(statistics.median(numbers)),
            )
        else:
            counts = Counter(present)
            column["type"] = "text" if present else "empty"
            column["distinct"] = len(counts)
            column["top_values"] = [
                {"value": v, "count": c} for v, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            ]
        columns.append(column)
        host.progress(f"column {name}", done=j + 1, total=len(names))
    return {
        "delimiter": delim,
        "rows": len(data),
        "column_count": len(names),
        "columns": columns,
    }
