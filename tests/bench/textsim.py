"""Text similarity of two extractions of one document, as the document anchors
report it: both texts NFKC-normalised, lower-cased and cut into words;
`sequence` is difflib's ratio over the word sequences (order matters),
`words` the F1 of the two bags of words (order ignored)."""

import difflib
import re
import sys
import unicodedata
from collections import Counter


def words(text):
    text = unicodedata.normalize("NFKC", text).lower()
    # Hyphenation at line ends is layout, not text.
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)
    return re.findall(r"\w+", text)


def similarity(a, b):
    wa, wb = words(a), words(b)
    seq = difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio()
    ca, cb = Counter(wa), Counter(wb)
    common = sum((ca & cb).values())
    f1 = 2 * common / max(1, sum(ca.values()) + sum(cb.values()))
    return seq, f1


if __name__ == "__main__":
    a = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    b = open(sys.argv[2], encoding="utf-8", errors="replace").read()
    seq, f1 = similarity(a, b)
    print(f"sequence {seq:.3f} words {f1:.3f}")
