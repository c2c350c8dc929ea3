"""Where in a student's code something happened: the innermost frame that runs one of the lab's files.

    innermost(frame, files)                 a live stack (a signal handler's frame)
    innermost_in_traceback(error, files)    an exception's traceback
    innermost_in_dump(text, files)          faulthandler's text, written when the process crashed
    describe(where)                         "moving_average (minitrain/monitor/curves.py, line 12)"

`files` maps each lab file's absolute path to its path in the lab (`lab_files`). A place is a dict
{path, line, function}, so that it travels as JSON from the child process that runs the checks (worker.py) to
the parent that prints them (sandbox.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import FrameType

from minitrain import seam
from minitrain.common.paths import course_file


def lab_files(lab: str, workspace: Path | None) -> dict[str, str]:
    """{absolute path: path in the lab} of the files whose code counts as the student's (the library's own
    files when grading the library)."""
    return {str(workspace.resolve() / path if workspace else course_file(path).resolve()): path
            for path in seam.LAB_PIECES[lab]}


def innermost(frame: FrameType | None, files: dict[str, str]) -> dict | None:
    """The innermost frame of `frame`'s stack that runs a lab file, as {path, line, function}; None if none."""
    while frame is not None:
        path = files.get(str(Path(frame.f_code.co_filename).resolve()))
        if path is not None:
            return {"path": path, "line": frame.f_lineno, "function": frame.f_code.co_qualname}
        frame = frame.f_back
    return None


def innermost_in_traceback(error: BaseException, files: dict[str, str]) -> dict | None:
    """The deepest frame of `error`'s traceback that runs a lab file."""
    found = seam.innermost_frame(error.__traceback__, files)
    if found is None:
        return None
    file, line, function = found
    return {"path": files[str(Path(file).resolve())], "line": line, "function": function}


_DUMP_LINE = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>\S+)', re.MULTILINE)


def innermost_in_dump(dump: str, files: dict[str, str]) -> dict | None:
    """The innermost lab-file frame of a faulthandler traceback (it lists the most recent call first)."""
    for match in _DUMP_LINE.finditer(dump):
        path = files.get(str(Path(match["file"]).resolve()))
        if path is not None:
            return {"path": path, "line": int(match["line"]), "function": match["function"]}
    return None


def describe(where: dict | None) -> str:
    """`moving_average (minitrain/monitor/curves.py, line 12)`, or the top level of a file; "" for None."""
    if where is None:
        return ""
    if where["function"] == "<module>":
        return f"the code at the top level of {where['path']} (line {where['line']}), which runs when it is imported"
    return f"{where['function']} ({where['path']}, line {where['line']})"
