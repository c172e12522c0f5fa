"""docs/benchmarks.md writes itself: every table sits in a section a bench script generated, and each
section equals what its results file (bench/results/<name>.json) says."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/_results.py loaded by path: tests keep bench/ off sys.path
_spec = importlib.util.spec_from_file_location("tokenmill_bench_results", ROOT / "bench" / "_results.py")
_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_results)
DOC, RESULTS, section_text, sections, tables = (_results.DOC, _results.RESULTS, _results.section_text,
                                                 _results.sections, _results.tables)


def test_every_table_is_generated():
    text = DOC.read_text(encoding="utf-8")
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("<!-- BEGIN bench:"):
            inside = True
        elif line.startswith("<!-- END bench:"):
            inside = False
        elif line.lstrip().startswith("|"):
            assert inside, f"docs/benchmarks.md line {n} is a table row outside a generated section: {line[:60]}"


def test_each_section_equals_its_results_file():
    found = sections()
    assert found, "docs/benchmarks.md has no generated section"
    for name, body in found.items():
        path = RESULTS / f"{name}.json"
        assert path.exists(), f"section bench:{name} has no results file {path}"
        record = json.loads(path.read_text(encoding="utf-8"))
        for key in ("benchmark", "command", "date", "commit", "machine", "versions", "results", "markdown"):
            assert key in record, f"{path} lacks {key!r}"
        assert record["benchmark"] == name
        assert body == section_text(record), f"section bench:{name} differs from {path}: rerun its command"


def test_every_results_file_is_shown_and_every_script_publishes():
    shown = set(sections())
    for path in RESULTS.glob("*.json"):
        assert path.stem in shown, f"{path} is not shown in docs/benchmarks.md"
    for script in (ROOT / "bench").glob("*.py"):
        if script.name.startswith("_"):
            continue
        assert re.search(r"\bpublish\(", script.read_text(encoding="utf-8")), f"{script} never calls publish()"


def test_tables_parser():
    md = "| a | b |\n|---|--:|\n| 1 | 2 |\n| 3 | 4 |\n\ntext\n| x |\n|---|\n| y |\n"
    assert tables(md) == [[{"a": "1", "b": "2"}, {"a": "3", "b": "4"}], [{"x": "y"}]]
