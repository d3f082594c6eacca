"""The progress line of long work (stowage._progress): redrawn in place on a
terminal, one line per finished step elsewhere."""

import io

from stowage._progress import BAR_WIDTH, Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_log_gets_one_line_per_finished_step():
    out = io.StringIO()
    with Progress(3, "timing layers", stream=out) as steps:
        for name in ("a", "b", "c"):
            steps.start(name)  # nothing until the step ends: a log keeps whole lines
            steps.done(f"{name} done")
    assert out.getvalue() == ("timing layers 1/3: a done\ntiming layers 2/3: b done\n"
                              "timing layers 3/3: c done\n")


def test_a_terminal_gets_one_line_redrawn():
    out = Terminal()
    with Progress(4, "zoo", stream=out) as steps:
        steps.start("resnet18")
        steps.done("resnet18: ok")
        steps.done()
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1  # one line, ended once
    frames = text.rstrip("\n").split("\r")[1:]
    assert len(frames) == 3
    assert frames[0].startswith(f"zoo [{'.' * BAR_WIDTH}] 0/4 ") and frames[0].rstrip().endswith("resnet18 ...")
    quarter = BAR_WIDTH // 4
    assert frames[1].startswith(f"zoo [{'#' * quarter}{'.' * (BAR_WIDTH - quarter)}] 1/4 ")
    assert frames[1].rstrip().endswith("resnet18: ok")
    assert frames[2].startswith(f"zoo [{'#' * (2 * quarter)}") and " 2/4 " in frames[2]
    # A shorter line blanks what the longer one left behind.
    assert len(frames[2]) == len(frames[1])


def test_nothing_to_end_when_nothing_was_drawn():
    out = Terminal()
    Progress(0, "none", stream=out).close()
    assert out.getvalue() == ""
