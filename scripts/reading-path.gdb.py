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
# which also lists the members of generic types that gdb's own function index leaves out.
targets = {}
for line in open(os.environ["NM_LIST"], encoding="utf-8", errors="replace"):
    entry = re.match(r"^[0-9a-f]+ [tTwW] (\S+)\t(.*):(\d+)$", line.rstrip("\n"))
    if entry:
        path = project_path(entry.group(2))
        if path:
            targets.setdefault((path, int(entry.group(3))), entry.group(1))

log = open(os.environ.get("TRACE_OUT", "trace.txt"), "w")
seen = set()


class FirstEntry(gdb.Breakpoint):
    def __init__(self, file, line, symbol):
        super().__init__(f"{os.path.basename(file)}:{line}", internal=True)
        self.file, self.line, self.symbol = file, line, symbol

    def stop(self):
        if (self.file, self.line) in seen:
            return False
        seen.add((self.file, self.line))
        callers, frame = [], gdb.newest_frame().older()
        while frame is not None:
            sal = frame.find_sal()
            if sal.symtab is not None:
                path = project_path(sal.symtab.filename)
                if path and path not in callers:
                    callers.append(path)
            frame = frame.older()
        log.write(f"{self.file}:{self.line}\t{self.symbol[:200]}\t{','.join(callers)}\n")
        log.flush()
        return False


gdb.execute("set breakpoint pending on")
for (file, line), symbol in targets.items():
    try:
        FirstEntry(file, line, symbol)
    except gdb.error:
        pass
