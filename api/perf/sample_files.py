"""The per-second samples as a file: `.json` (the samples and the summary) or `.csv`
(one row per sample, the header naming the columns)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

from api.perf.run_summary import Summary
from api.perf.sampler import SAMPLE_FIELDS, Sample

FORMATS = (".json", ".csv")


def check_output_path(path: str) -> None:
    """ValueError naming the flag when the file's suffix names no format."""
    if Path(path).suffix.lower() not in FORMATS:
        raise ValueError(f"--output: {path!r} must end in .json or .csv")


def write_samples(path: str, samples: Iterable[Sample], summary: Summary) -> None:
    target = Path(path)
    if target.suffix.lower() == ".json":
        document = {"samples": [sample.as_dict() for sample in samples],
                    "summary": summary.as_dict()}
        target.write_text(json.dumps(document, indent=1) + "\n")
        return
    with target.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(SAMPLE_FIELDS)
        for sample in samples:
            row = sample.as_dict()
            writer.writerow("" if row[name] is None else row[name] for name in SAMPLE_FIELDS)
