"""The benchmarks' progress line: stowage's (python/stowage/_progress.py), loaded from
the source tree by path, so that a machine with only vm-run and this checkout (no
built package) shows it too. On a terminal one line redrawn in place, elsewhere a
line per finished step; on stderr, leaving stdout to the tables."""

import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "stowage", "_progress.py")
_spec = importlib.util.spec_from_file_location("stowage_progress_line", _PATH)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

Progress = _module.Progress
