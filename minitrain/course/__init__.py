"""The course's labs as students do them: starters, checkers, and the labs' metadata.

    labs.py       the labs (title, text, files and names to write), `start` a workspace, `grade` it
    starter.py    a lab file's starter, made from the library's own file (contract kept, code stubbed)
    checks.py     a checklist of named checks: ✓, or ✗ with the reason and a hint
    sandbox.py    runs the student's code in a child process (worker.py) under a time and a memory limit, so that
                  a student's code that hangs, fills the memory, exits or crashes is a ✗ with its reason
    remote.py     what a check run in this process (`here`) gets back from the child: data, never a verdict
    blame.py      where in the student's code that happened: the function and line named in the reason
    lab00.py ...  each lab's checks: its functions called directly, short runs through the seam
                  (minitrain/seam.py), and the lab's stop conditions on the run folder, its model scored
                  here (runs.py)
    fixtures.py   the committed corpus, a tiny model and a tiny run folder, which the checks use

`minitrain lab start NN DIR` and `minitrain lab check NN [DIR]` (minitrain/commands/lab.py) call `start` and
`grade`.
"""
