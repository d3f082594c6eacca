"""A progress line for long work of a known number of steps (the tuner, the benchmarks).

On a terminal it is one line redrawn in place (``\\r``): a bar, the steps done of
the total, and what runs now; elsewhere (a log, a pipe, CI) one line per step
finished, so that logs stay readable. It writes to stderr, keeping stdout for
results. It needs nothing outside the standard library, so that the benchmarks
can load this file on a machine where the package is not built.
"""

import shutil
import sys
import time

BAR_WIDTH = 24


class Progress:
    """``total`` steps of ``label``: ``start(what)`` when a step begins (shown on a
    terminal only), ``done(what)`` when it ends; ``close()`` (or leaving a ``with``
    block) ends the line."""

    def __init__(self, total, label, stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.count = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.began = time.monotonic()
        self._drawn = 0  # characters of the line on the terminal now

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self, what):
        """Shows the step now running (a terminal only: a log gets the line when it ends)."""
        if self.tty:
            self._draw(f"{what} ...")

    def done(self, what=""):
        """Counts one step as finished."""
        self.count += 1
        if self.tty:
            self._draw(what)
        else:
            self.stream.write(f"{self.label} {self.count}/{self.total}{': ' + what if what else ''}\n")
            self.stream.flush()

    def close(self):
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0

    def _draw(self, what):
        filled = BAR_WIDTH * min(self.count, self.total) // self.total if self.total else BAR_WIDTH
        elapsed = time.monotonic() - self.began
        line = (f"{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.count}/{self.total} "
                f"{elapsed:.0f} s{'  ' + what if what else ''}")
        # A line longer than the terminal would wrap, and \r would redraw only its end.
        line = line[:max(shutil.get_terminal_size().columns - 1, 20)]
        self.stream.write("\r" + line + " " * max(self._drawn - len(line), 0))
        self.stream.flush()
        self._drawn = len(line)
