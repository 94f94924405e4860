#!/usr/bin/env python3
"""Fails when a relative link in the project's Markdown points nowhere: a file that does not
exist, or a #fragment that names no heading of the Markdown file it points into (GitHub's
anchors: the heading lower-cased, punctuation dropped, spaces turned into hyphens)."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
skip = {"build", ".git", ".gpu-deps"}


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        fenced = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                fenced = not fenced
            heading = None if fenced else re.match(r"#{1,6}\s+(.*)", line)
            if heading:
                text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
                found.add(text.replace(" ", "-"))
        cache[path] = found
    return cache[path]


bad = 0
for md in sorted(root.rglob("*.md")):
    rel = md.relative_to(root)
    if rel.parts[0] in skip or rel.parts[0].startswith("build"):
        continue
    for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            print(f"{rel}: link to {target}: no such file")
            bad += 1
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            print(f"{rel}: link to {target}: no heading makes that anchor")
            bad += 1
if bad:
    print(f"check-doc-links: {bad} broken link(s)")
    sys.exit(1)
print("check-doc-links: every relative link resolves")
