"""The Python API against the CLI: the same documents, summaries and error lines."""

from __future__ import annotations

import json
import os
import tempfile
import unittest
from pathlib import Path

import tgc
from support import ROOT, bundled_models, cli, cli_json

FIXTURE_DB = ROOT / "cache" / "tests" / "fixtures" / "ms-llvm"
RESNET = ROOT / "models" / "keras-resnet50.onnx"


def cli_error(*args: str) -> str:
    """The CLI's one-line message for a failing command, without `error: `."""
    out = cli(*args, check=False)
    assert out.returncode == 1, out
    line = out.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    return line[len("error: "):]


class TestTasks(unittest.TestCase):
    def test_tasks_of_a_path_is_the_cli_document(self):
        for path in bundled_models()[:2]:
            with self.subTest(model=path.name):
                self.assertEqual(tgc.tasks(str(path)), cli_json("tasks", str(path), "--json"))

    def test_zoo_model_and_max_depth(self):
        self.assertEqual(tgc.tasks("resnet18", max_depth=4),
                         cli_json("tasks", "resnet18", "--json", "--max-depth", "4"))

    def test_module_round_trip(self):
        m = tgc.load(str(RESNET))
        again = tgc.Module.parse(m.text(), "resnet.tgc")
        self.assertEqual(again.text(), m.text())
        self.assertEqual(tgc.tasks(again)["tasks"], tgc.tasks(m)["tasks"])

    def test_errors_are_the_cli_lines(self):
        for args in (["no/such/model.onnx"], ["not-a-zoo-model"]):
            with self.subTest(args=args):
                with self.assertRaises(tgc.TgcError) as cm:
                    tgc.tasks(*args)
                self.assertEqual(str(cm.exception), cli_error("tasks", *args))
        with tempfile.TemporaryDirectory() as d:
            bad = Path(d) / "bad.tgc"
            bad.write_text("module @m {\n  func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                           "    %y = nn.conv9(%x) : tensor<2xf32>\n    return %y\n  }\n}\n")
            with self.assertRaises(tgc.TgcError) as cm:
                tgc.tasks(str(bad))
            self.assertEqual(str(cm.exception), cli_error("tasks", str(bad)))

    def test_not_a_model(self):
        with self.assertRaises(tgc.TgcError):
            tgc.tasks(42)

    def test_pack_weights_is_the_cli_document(self):
        self.assertEqual(tgc.tasks(str(RESNET), layout="nhwc", pack_weights=True),
                         cli_json("tasks", str(RESNET), "--json", "--layout", "nhwc", "--pack-weights"))
        m = tgc.load(str(RESNET), pack_weights=True)
        self.assertIn("packed_params = [", m.text())
        # packed tasks are other workloads: every convolution task has other exact keys
        plain = {t["exact_key"] for t in tgc.tasks(str(RESNET))["tasks"]}
        packed = tgc.tasks(str(RESNET), pack_weights=True)["tasks"]
        convs = [t for t in packed if "nn.conv2d" in t["ops"]]
        self.assertTrue(convs)
        self.assertFalse({t["exact_key"] for t in convs} & plain)

    def test_layout_is_the_cli_document(self):
        self.assertEqual(tgc.tasks(str(RESNET), layout="nhwc"),
                         cli_json("tasks", str(RESNET), "--json", "--layout", "nhwc"))
        m = tgc.load(str(RESNET)).convert_layout()
        self.assertIn('data_layout = "NHWC", kernel_layout = "HWIO"', m.text())
        self.assertNotIn('data_layout = "NCHW"', m.text())
        self.assertIn("permuted_params", m.text())
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.tasks(str(RESNET), layout="NCHWc")
        self.assertIn("layout must be 'model' or 'nhwc'", str(cm.exception))


class TestSimilarity(unittest.TestCase):
    def test_the_cli_document(self):
        models = [str(p) for p in bundled_models()[:2]] + ["resnet18"]
        for level in ("exact", "structural", "family"):
            with self.subTest(level=level):
                self.assertEqual(tgc.similarity(models, level=level),
                                 cli_json("similarity", *models, "--json", "--level", level))

    def test_bad_level(self):
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.similarity(["resnet18"], level="fuzzy")
        self.assertIn("fuzzy", str(cm.exception))


class TestCache(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_import_stats_export_agree_with_the_cli(self):
        mine, theirs = self.d / "mine.sqlite", self.d / "theirs.sqlite"
        cache = tgc.Cache(mine)
        summary = cache.import_database(FIXTURE_DB)
        self.assertEqual(summary, cli("cache", "import", str(FIXTURE_DB), "--cache", str(theirs)).stdout.strip())
        stats = cache.stats()
        want = cli_json("cache", "stats", "--json", "--cache", str(theirs))
        self.assertGreater(stats["records"], 0)
        self.assertGreater(stats["imported_workloads"], 0)
        for k in ("path", "file_bytes"):
            stats.pop(k), want.pop(k)
        self.assertEqual(stats, want)
        out_mine, out_theirs = self.d / "export-mine", self.d / "export-theirs"
        self.assertEqual(cache.export_database(out_mine).replace(str(out_mine), "DIR"),
                         cli("cache", "export", str(out_theirs), "--cache", str(theirs)).stdout.strip()
                         .replace(str(out_theirs), "DIR"))
        for f in ("database_workload.json", "database_tuning_record.json"):
            self.assertEqual((out_mine / f).read_text(), (out_theirs / f).read_text())

    def test_missing_cache_without_create(self):
        path = self.d / "absent.sqlite"
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.Cache(path, create=False)
        self.assertEqual(str(cm.exception), cli_error("cache", "stats", "--cache", str(path)))

    def test_lookup_in_an_empty_cache_finds_nothing_per_task(self):
        found = tgc.Cache(self.d / "empty.sqlite").lookup(str(RESNET))
        self.assertEqual(found["schema"], "tgc.cache-lookup/1")
        self.assertEqual(len(found["tasks"]), tgc.tasks(str(RESNET))["num_tasks"])
        self.assertTrue(all(t["candidates"] == [] for t in found["tasks"]))
        with self.assertRaises(tgc.TgcError):
            tgc.Cache(self.d / "empty.sqlite").lookup(str(RESNET), task="no-such-task")


if __name__ == "__main__":
    unittest.main()
