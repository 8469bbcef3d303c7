# gdb script for scripts/reading-path.sh: a breakpoint on every function defined in the project's own source
# (Functions/, Shared/), from the executable's symbol table; each one records, the first time it is entered, the function and the project files of the
# frames that called it (the call stack), then lets the program go on. Written to $TRACE_OUT, one line per function:
#   file:line <TAB> symbol <TAB> caller files (comma-separated, innermost first)
import os
import re

import gdb

ROOTS = ("Functions/", "Shared/")


def project_path(path):
    for root in ROOTS:
        index = path.find(root)
        if index >= 0:
            return path[index:]
    return None


# The functions, with the file and line each is declared at: `nm --defined-only -l` of the executable ($NM_LIST),
# which also lists the members of generic types that gdb's own function index leaves out. Each breakpoint is set on
# the function's symbol, not on its line: a line breakpoint would also stop in the caller whose code shares that line
# (a closure's first line is its caller's call).
targets = {}
for line in open(os.environ["NM_LIST"], encoding="utf-8", errors="replace"):
    entry = re.match(r"^[0-9a-f]+ [tTwW] (\S+)\t(.*):(\d+)$", line.rstrip("\n"))
    if entry:
        path = project_path(entry.group(2))
        if path:
            targets[entry.group(1)] = (path, int(entry.group(3)))

log = open(os.environ.get("TRACE_OUT", "trace.txt"), "w")
seen = set()


class FirstEntry(gdb.Breakpoint):
    def __init__(self, file, line, symbol):
        super().__init__(f"'{symbol}'", internal=True)
        self.file, self.line, self.symbol = file, line, symbol

    def stop(self):
        if self.symbol in seen:
            return False
        seen.add(self.symbol)
        callers, frame = [], gdb.newest_frame().older()
        while frame is not None:
            sal = frame.find_sal()
            if sal.symtab is not None:
                path = project_path(sal.symtab.filename)
                if path and path not in callers:
                    callers.append(path)
            frame = frame.older()
        log.write(f"{self.file}:{self.line}\t{self.symbol}\t{','.join(callers)}\n")
        log.flush()
        return False


gdb.execute("set breakpoint pending on")
for symbol, (file, line) in targets.items():
    try:
        FirstEntry(file, line, symbol)
    except gdb.error:
        pass
