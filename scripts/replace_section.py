#!/usr/bin/env python3
"""Replace the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in DOC with the
contents of FILE (the report scripts' tables in docs/).

    python3 scripts/replace_section.py FILE DOC NAME
"""

import sys

table_path, doc_path, name = sys.argv[1:4]
table, doc = open(table_path).read(), open(doc_path).read()
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
if begin not in doc or end not in doc:
    sys.exit(f"{doc_path}: no {begin} ... {end} section")
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc_path, "w").write(f"{head}{begin}\n{table}{end}{tail}")
