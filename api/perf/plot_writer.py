"""Rate and latency over time as a picture: `.html` with plotly (plotly.js inlined, so it
opens without internet access) or `.png` with matplotlib.

Both libraries are the optional extra `perf` (`pip install 'logbroker[perf]'`)
and are imported only here, when a plot is asked for; `check_plot_path`
names the missing extra before the run starts.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from api.perf.sampler import LATENCY_FIELDS, RATE_FIELDS, Sample

LIBRARY = {".html": "plotly", ".png": "matplotlib"}
TITLE = "logbroker perf"


def series_name(field: str) -> str:
    """The legend's name of a sample field: `sent msg/s`, `latency p99 ms`."""
    if field in RATE_FIELDS:
        return f"{field} msg/s"
    return field.replace("latency_", "latency ").replace("_ms", " ms")


def check_plot_path(path: str) -> None:
    """ValueError naming the flag (a suffix with no format) or the missing extra."""
    library = LIBRARY.get(Path(path).suffix.lower())
    if library is None:
        raise ValueError(f"--plot: {path!r} must end in .html or .png")
    if importlib.util.find_spec(library) is None:
        raise ValueError(f"--plot {Path(path).suffix} needs {library}, in the optional extra "
                         f"'perf': pip install 'logbroker[perf]'")


def _column(samples: Sequence[Sample], field: str) -> list[Any]:
    return [getattr(sample, field) for sample in samples]


def write_plot(path: str, samples: Sequence[Sample]) -> None:
    if Path(path).suffix.lower() == ".html":
        _write_html(path, samples)
    else:
        _write_png(path, samples)


def _write_html(path: str, samples: Sequence[Sample]) -> None:
    # The optional extra, only when plotting; plotly ships no type information.
    from plotly.subplots import make_subplots  # type: ignore[import-untyped]

    figure = make_subplots(rows=2, cols=1, shared_xaxes=True,
                           subplot_titles=("rate (msg/s)", "latency (ms)"))
    elapsed = _column(samples, "elapsed_s")
    for row, fields in ((1, RATE_FIELDS), (2, LATENCY_FIELDS)):
        for field in fields:
            figure.add_scatter(x=elapsed, y=_column(samples, field), name=series_name(field),
                               mode="lines", row=row, col=1)
    figure.update_xaxes(title_text="time (s)", row=2, col=1)
    figure.update_layout(title_text=TITLE, height=700)
    figure.write_html(path, include_plotlyjs=True, full_html=True)


def _write_png(path: str, samples: Sequence[Sample]) -> None:
    import matplotlib  # the optional extra: only when plotting

    matplotlib.use("Agg")  # no display: draw to the file only
    from matplotlib import pyplot

    figure, (rates, latencies) = pyplot.subplots(2, 1, sharex=True, figsize=(10, 7))
    elapsed = _column(samples, "elapsed_s")
    for axes, fields, label in ((rates, RATE_FIELDS, "rate (msg/s)"),
                                (latencies, LATENCY_FIELDS, "latency (ms)")):
        for field in fields:
            values = [float("nan") if v is None else v for v in _column(samples, field)]
            axes.plot(elapsed, values, label=series_name(field))
        axes.set_ylabel(label)
        axes.legend(loc="upper right", fontsize="small")
        axes.grid(True, alpha=0.3)
    latencies.set_xlabel("time (s)")
    figure.suptitle(TITLE)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
