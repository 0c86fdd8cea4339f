"""Tests of the textstats tools on plain CPython (no component needed):

    PYTHONPATH=sdk/python:plugins/textstats python3 -m unittest discover -s plugins/textstats/tests
"""

import json
import unittest

import app  # noqa: F401 - registers the tools
from toolhost_sdk import Toolkit
from toolhost_sdk._wit import Err


def call(name, **params):
    try:
        items = Toolkit().call(name, json.dumps(params))
    except Err as e:
        kind = "invalid_input" if type(e.value).__name__.endswith("InvalidInput") else "failed"
        return kind, e.value.value
    assert len(items) == 1
    return "ok", json.loads(items[0].value)


class Summary(unittest.TestCase):
    def test_counts(self):
        text = "Hello world. This is a test!\n\nSecond paragraph, with the world in it. Don't panic?"
        kind, s = call("summary", text=text)
        self.assertEqual(kind, "ok")
        self.assertEqual(s["characters"], len(text))
        self.assertEqual(s["words"], 15)
        self.assertEqual(s["sentences"], 4)
        self.assertEqual(s["paragraphs"], 2)
        self.assertEqual(s["lines"], 3)
        self.assertEqual(s["top_words"][0], {"word": "world", "count": 2})
        self.assertNotIn("the", [w["word"] for w in s["top_words"]])
        self.assertEqual(s["reading_time_seconds"], 4)  # 15 words at 238 wpm, rounded up
        self.assertEqual(s["reading_time"], "4 s")

    def test_stopwords_and_top(self):
        kind, s = call("summary", text="the the the cat", top=1, skip_stopwords=False)
        self.assertEqual(s["top_words"], [{"word": "the", "count": 3}])
        kind, s = call("summary", text="the cat", top=0)
        self.assertEqual(s["top_words"], [])

    def test_empty(self):
        kind, s = call("summary", text="   ")
        self.assertEqual(kind, "ok")
        self.assertEqual((s["words"], s["sentences"], s["paragraphs"]), (0, 0, 0))
        self.assertEqual(s["average_word_length"], 0.0)


class CsvSummary(unittest.TestCase):
    def test_columns(self):
        csv = "name,age,city\nAda,36,London\nAlan,41,London\nGrace,85,NYC\nLin,NA,\n"
        kind, s = call("csv_summary", csv=csv)
        self.assertEqual(kind, "ok")
        self.assertEqual((s["rows"], s["column_count"], s["delimiter"]), (4, 3, ","))
        name, age, city = s["columns"]
        self.assertEqual(age, {"name": "age", "count": 3, "missing": 1, "type": "number",
                               "min": 36, "max": 85, "mean": 54, "median": 41})
        self.assertEqual((name["type"], name["distinct"]), ("text", 4))
        self.assertEqual(city["top_values"][0], {"value": "London", "count": 2})
        self.assertEqual(city["missing"], 1)

    def test_delimiters(self):
        kind, s = call("csv_summary", csv="a;b\n1;2,5\n3;x\n")
        self.assertEqual(s["delimiter"], ";")
        kind, s = call("csv_summary", csv="a|b\n1|2\n", delimiter="|")
        self.assertEqual([c["type"] for c in s["columns"]], ["number", "number"])

    def test_bad_csv(self):
        for csv, message in [
            ("", "empty"),
            ("a,b\n1,2,3\n", "line 2 has 3 fields, the header has 2"),
            ('a,b\n"open,2\n', "bad CSV"),
            ("a,a\n1,2\n", "duplicate column names"),
        ]:
            kind, msg = call("csv_summary", csv=csv)
            self.assertEqual(kind, "invalid_input", csv)
            self.assertIn(message, msg)


if __name__ == "__main__":
    unittest.main()
