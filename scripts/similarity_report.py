#!/usr/bin/env python3
"""Renders the generated part of docs/similarity.md from the study's JSON files.

    python3 scripts/similarity_report.py DIR docs/similarity.md

DIR holds `tgc-exact.json`, `tgc-structural.json`, `tgc-family.json` (`tgc similarity
--json`, schema tgc.similarity/1) and `tvm/tvm-similarity.json` (tvm/python/similarity_tvm.py).
The text between `<!-- BEGIN GENERATED -->` and `<!-- END GENERATED -->` is replaced; the rest
of the document is left alone. Standard library only.
"""

import json
import os
import sys

LEVELS = ("exact", "structural", "family")
TVM_KEYS = (("hash", "TVM hash"), ("name", "TVM name (paper)"), ("ops", "TVM op names"))
# (covered, covering) pairs of the highlights table
PAIRS = [
    ("resnet50", "resnet152"),
    ("resnet152", "resnet50"),
    ("resnet18", "resnet50"),
    ("resnext50_32x4d", "resnet50"),
    ("wide_resnet50_2", "resnet50"),
    ("resnet50", "keras-resnet50"),
    ("mobilenet_v2", "keras-mobilenetv2"),
    ("densenet121", "keras-densenet121"),
    ("inception_v3", "keras-inceptionv3"),
    ("mobilenet_v3_large", "mobilenet_v2"),
    ("googlenet", "inception_v3"),
    ("vgg16", "alexnet"),
]
SHORT = {
    "alexnet": "alex",
    "vgg16": "vgg",
    "googlenet": "goog",
    "inception_v3": "inc3",
    "resnet18": "r18",
    "resnet50": "r50",
    "resnet152": "r152",
    "resnext50_32x4d": "rx50",
    "wide_resnet50_2": "wr50",
    "densenet121": "d121",
    "mobilenet_v2": "mb2",
    "mobilenet_v3_large": "mb3",
    "bert_base": "bert",
    "keras-resnet50": "k-r50",
    "keras-mobilenetv2": "k-mb2",
    "keras-densenet121": "k-d121",
    "keras-inceptionv3": "k-inc3",
}


def short(name):
    return SHORT.get(name, name)


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def matrix(title, names, values, others):
    header = [title] + [short(n) for n in names] + ["others"]
    rows = [
        [short(r)] + [f"{v:.2f}" for v in row] + [f"{o:.2f}"]
        for r, row, o in zip(names, values, others)
    ]
    return table(header, rows)


def render(d):
    tgc = {level: load(os.path.join(d, f"tgc-{level}.json")) for level in LEVELS}
    tvm = load(os.path.join(d, "tvm", "tvm-similarity.json"))
    names = tgc["exact"]["models"]
    names = [m["name"] for m in names]
    if names != tvm["models"]:
        sys.exit(f"similarity_report: tgc models {names} differ from TVM models {tvm['models']}")
    census = {c["model"]: c for c in tgc["exact"]["census"]}
    index = {n: i for i, n in enumerate(names)}
    out = []

    out.append("### Census: task occurrences and distinct keys\n\n")
    out.append(
        "Occurrences are calls of fused tasks (TVM: summed task weights). Distinct keys: "
        "tgc's exact, structural and family keys; TVM's structural hash, the paper's "
        "name key (task name without trailing digits) and the op names of the task name.\n\n"
    )
    rows = []
    for n in names:
        c = census[n]
        t = {k: tvm["census"][k][n] for k, _ in TVM_KEYS}
        rows.append(
            [n, c["occurrences"], t["hash"]["occurrences"]]
            + [c[level]["distinct"] for level in LEVELS]
            + [t[k]["distinct"] for k, _ in TVM_KEYS]
        )
    out.append(table(
        ["model", "occ. tgc", "occ. TVM", "tgc exact", "tgc structural", "tgc family"]
        + [label for _, label in TVM_KEYS],
        rows,
    ))
    out.append("\n### Within-model repetition (1 - distinct / occurrences)\n\n")
    rows = []
    for n in names:
        c = census[n]
        rows.append(
            [n]
            + [f"{c[level]['repetition']:.3f}" for level in LEVELS]
            + [f"{tvm['census'][k][n]['repetition']:.3f}" for k, _ in TVM_KEYS]
        )
    out.append(table(
        ["model", "tgc exact", "tgc structural", "tgc family"] + [l for _, l in TVM_KEYS], rows
    ))

    out.append("\n### Highlights: coverage of one model by another\n\n")
    out.append(
        "Share of the first model's task occurrences whose key occurs in the second model.\n\n"
    )
    rows = []
    for r, c in PAIRS:
        if r not in index or c not in index:
            continue
        i, j = index[r], index[c]
        rows.append(
            [f"{r} by {c}"]
            + [f"{tgc[level]['coverage']['matrix'][i][j]:.3f}" for level in LEVELS]
            + [f"{tvm['coverage'][k][i][j]:.3f}" for k, _ in TVM_KEYS]
        )
    out.append(table(
        ["covered by", "tgc exact", "tgc structural", "tgc family"] + [l for _, l in TVM_KEYS],
        rows,
    ))

    out.append("\n### Coverage by all other models together (leave one out)\n\n")
    rows = []
    for n in names:
        i = index[n]
        rows.append(
            [n]
            + [f"{tgc[level]['coverage']['by_others'][i]:.3f}" for level in LEVELS]
            + [f"{tvm['coverage_by_others'][k][i]:.3f}" for k, _ in TVM_KEYS]
        )
    out.append(table(
        ["model", "tgc exact", "tgc structural", "tgc family"] + [l for _, l in TVM_KEYS], rows
    ))

    out.append("\n### Coverage matrices\n\n")
    out.append(
        "Row: the covered model; column: the model whose keys cover it; `others`: all other "
        "models together. Abbreviations: "
        + ", ".join(f"{short(n)} = {n}" for n in names)
        + ".\n\n"
    )
    for level in LEVELS:
        cov = tgc[level]["coverage"]
        out.append(f"#### tgc {level} key\n\n")
        out.append(matrix(level, names, cov["matrix"], cov["by_others"]))
        out.append("\n")
    for key, label in TVM_KEYS:
        out.append(f"#### {label}\n\n")
        out.append(matrix(key, names, tvm["coverage"][key], tvm["coverage_by_others"][key]))
        out.append("\n")

    out.append("### Nearest structural neighbour distances\n\n")
    out.append(
        "For each distinct task (exact key), the feature distance (`Features::distance`: "
        "Euclidean distance of the log2 extents plus the log2 FLOP ratio) to the nearest other "
        "task with the same structural key; per model, then pooled over all models (`*`).\n\n"
    )
    rows = []
    for n in tgc["structural"]["neighbours"]:
        q = n["quantiles"]
        qs = ["-"] * 6 if q is None else [
            f"{q[k]:.2f}" for k in ("min", "p25", "median", "p75", "p90", "max")
        ]
        rows.append([n["scope"], n["tasks"], n["structural_groups"], n["with_neighbour"]] + qs)
    out.append(table(
        ["scope", "tasks", "groups", "with neighbour", "min", "p25", "median", "p75", "p90",
         "max"],
        rows,
    ))
    return "".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: similarity_report.py DIR docs/similarity.md")
    d, doc = sys.argv[1], sys.argv[2]
    text = open(doc, encoding="utf-8").read() if os.path.exists(doc) else ""
    begin, end = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
    generated = f"{begin}\n{render(d)}{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + generated + tail
    else:
        text = text + "\n" + generated + "\n"
    with open(doc, "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
