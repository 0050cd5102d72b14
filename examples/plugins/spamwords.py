#!/usr/bin/env python3
"""spamwords.py: a petrel (and strfry) write-policy plugin that refuses
events whose content holds a spam word or phrase.

    [policy]
    plugin = "python3 /etc/petrel/spamwords.py --words /etc/petrel/spamwords.txt"

The word file has one word or phrase per line; blank lines and lines
starting with # are skipped. Matching is case-insensitive and on whole
words ("sale" does not match "wholesale"). The file is read again when it
changes (checked at most once a second), so the list can be edited while
the relay runs. Kinds listed with --kinds (default: every kind) are the
only ones checked.

Protocol (strfry's, which petrel speaks): one JSON request per line on
stdin, {"type":"new","event":{...},"receivedAt":...,"sourceType":"IP4",
"sourceInfo":"203.0.113.7"}, and one JSON answer per line on stdout,
{"id":"<event id>","action":"accept"|"reject"|"shadowReject","msg":"..."}.
Anything else goes to stderr, which the relay logs.
"""

import argparse
import json
import os
import re
import sys
import time


def load_words(path):
    """Returns a compiled pattern of the words in path, or None if empty."""
    words = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                words.append(line)
    if not words:
        return None
    # Longest first, so a phrase wins over a word it starts with.
    words.sort(key=len, reverse=True)
    alternation = "|".join(re.escape(w) for w in words)
    return re.compile(r"(?<!\w)(?:" + alternation + r")(?!\w)", re.IGNORECASE)


class WordList:
    """The word file, read again when its modification time changes."""

    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.pattern = None
        self.checked = 0.0
        self.refresh(force=True)

    def refresh(self, force=False):
        now = time.monotonic()
        if not force and now - self.checked < 1.0:
            return
        self.checked = now
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError as e:
            if force:
                raise
            print(f"spamwords: {e}; keeping the previous list", file=sys.stderr, flush=True)
            return
        if mtime != self.mtime:
            self.pattern = load_words(self.path)
            self.mtime = mtime
            print(f"spamwords: loaded {self.path}", file=sys.stderr, flush=True)

    def find(self, text):
        self.refresh()
        if self.pattern is None:
            return None
        m = self.pattern.search(text)
        return m.group(0) if m else None


def decide(req, words, kinds):
    """Returns the answer (a dict) for one request (a dict)."""
    ev = req.get("event") or {}
    answer = {"id": ev.get("id", ""), "action": "accept"}
    if req.get("type") != "new":
        return answer
    if kinds is not None and ev.get("kind") not in kinds:
        return answer
    hit = words.find(ev.get("content", ""))
    if hit is not None:
        answer["action"] = "reject"
        answer["msg"] = f"blocked: spam ({hit.lower()!r})"
    return answer


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="refuse events holding spam words")
    ap.add_argument("--words", default=os.path.join(here, "spamwords.txt"),
                    help="file of words and phrases, one per line")
    ap.add_argument("--kinds", default="",
                    help="comma-separated kinds to check (default: all)")
    args = ap.parse_args()
    kinds = {int(k) for k in args.kinds.split(",") if k.strip()} or None
    words = WordList(args.words)

    # readline, not "for line in sys.stdin": iteration reads ahead and
    # would hold an answer back until more requests arrive.
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        try:
            req = json.loads(line)
        except ValueError:
            print(f"spamwords: not JSON: {line[:80]!r}", file=sys.stderr, flush=True)
            continue
        sys.stdout.write(json.dumps(decide(req, words, kinds)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
