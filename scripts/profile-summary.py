#!/usr/bin/env python3
"""Summarises `perf script -F pid,tid,comm,ip,sym,dso` output (on stdin) of a load run into markdown.

Used by scripts/profile-load.sh. Three tables: every process group's share of the samples taken on all cores; for
each of ours, the library its samples were in (the leaf frame: robust whatever the unwinding); and named layers,
each the share of a group's samples with that layer anywhere on the stack. The binaries ship without frame
pointers, so some stacks stop short: a layer's share is a lower bound, and the table says how many stacks reached
their thread's start.
"""

import argparse
import collections
import re
import subprocess
import sys

FUNCTIONS = ("dose-record", "slot-bulk-recor", "prn-record")

# Each group's layers, (layer, patterns): a sample counts for a layer when a pattern is in any frame's name — a
# Swift symbol's demangled name up to its parameter list (`swift demangle`), any other symbol as it is.
SOCKETS = ("kernel: sockets", ("tcp_sendmsg", "tcp_recvmsg", "unix_stream_sendmsg", "unix_stream_read"))
# What both Swift processes, the functions and the gateway, are asked about.
SWIFT_PROCESS = [
    ("Swift retain and release", ("swift_retain", "swift_release", "swift_bridgeObjectRe")),
    ("malloc and free", ("malloc", "_int_free", "cfree", "unlink_chunk")),
    SOCKETS,
]
LAYERS = {
    "PostgreSQL": [
        ("parsing the statements sent", ("pg_parse_query",)),
        ("analysing them", ("parse_analyze_", "pg_analyze_and_rewrite")),
        ("planning them", ("pg_plan_queries",)),
        ("utility statements (BEGIN, SET LOCAL, COMMIT's own work)", ("standard_ProcessUtility",)),
        ("PL/pgSQL calls (all of their work)", ("plpgsql_call_handler",)),
        ("kept plans checked and locked (GetCachedPlan)", ("GetCachedPlan",)),
        ("executor start-up", ("standard_ExecutorStart",)),
        ("index entries written", ("ExecInsertIndexTuples",)),
        ("foreign-key checks", ("AfterTriggerEndQuery", "RI_FKey_check")),
        ("commit", ("CommitTransactionCommand",)),
        ("of which the WAL flush", ("XLogFlush",)),
        SOCKETS,
    ],
    "functions": [
        ("authentication", ("Authenticator.",)),
        ("the recording's transaction", ("RecordingTransaction.",)),
        ("the answer to the Runtime API", ("ResponseWriter.write",)),
        ("the push sent after the answer (the sends and their outcomes)", ("PushDispatcher.",)),
        ("PostgreSQL client (Libpq, libpq)", ("PostgresConnection.", "PipelinedTransaction.", "PQ")),
        ("HTTP client (Curl, libcurl, nghttp2, TLS)", ("CurlClient.", "curl_", "nghttp2_", "SSL_")),
        ("JSON (Codecs)", ("JSONValue.", "JSONCoding.", "StrictJSONParser.", "APIGatewayV2Request.")),
        ("logging and metrics lines", ("JSONLogHandler.", "InvocationMetrics.line")),
        *SWIFT_PROCESS,
        ("kernel: poll", ("do_sys_poll",)),
    ],
    "gateway": [
        ("HTTP/1 decoding (NIO)", ("HTTPDecoder.",)),
        ("the event (EventBuilder)", ("EventBuilder.",)),
        ("JSON encoding", ("JSONCoding.encode",)),
        ("workers' stderr (supervise, forward)", ("StderrForwarder.", "FunctionProcess.supervise")),
        ("logging", ("JSONLogHandler.",)),
        *SWIFT_PROCESS,
        ("kernel: pipes (the workers' stdio)", ("pipe_write", "pipe_read")),
        ("kernel: epoll", ("do_epoll_wait",)),
    ],
}

STARTS = ("__libc_start_call_main", "start_thread", "_start", "clone3", "ret_from_fork")


def read_processes(path):
    args = {}
    if path:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.strip().split(None, 1)
                if parts and parts[0].isdigit():
                    args[int(parts[0])] = parts[1] if len(parts) > 1 else ""
    return args


def group_of(comm, pid, args, main_comm):
    command = args.get(pid, "")
    name = main_comm.get(pid, comm)
    if comm == "swapper" or pid == 0:
        return "idle"
    if comm in FUNCTIONS or name in FUNCTIONS:
        return "functions"
    if comm == "push-sweep" or name == "push-sweep":
        return "push-sweep"
    if comm == "postgres" or name == "postgres" or command.startswith("postgres"):
        return "PostgreSQL"
    if "--fcm-stand-in" in command:
        return "FCM stand-in"
    program = command.split(" ", 1)[0].rsplit("/", 1)[-1]
    if program == "gateway" or name == "gateway":
        return "gateway"
    if comm == "nghttpx" or name == "nghttpx":
        return "nghttpx"
    if comm == "loadgen" or name == "loadgen":
        return "load generator"
    if program == "bench" or name == "bench":
        return "bench harness"
    if name in ("push-register", "push-unregister", "db-migrate"):
        return "other functions"
    return "other (kernel threads, anything else)"


def read_samples(stream):
    """Yields (pid, tid, comm, frames), frames leaf first as (symbol, library)."""
    header = None
    frames = []
    head = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s*$")
    frame = re.compile(r"^\s+\S+\s+(.*?)\s+\((.*)\)\s*$")
    for line in stream:
        if not line.strip():
            continue
        if not line[0].isspace():
            if header:
                yield (*header, frames)
            match = head.match(line.rstrip("\n"))
            header = (int(match.group(2)), int(match.group(3)), match.group(1)) if match else None
            frames = []
        elif header:
            match = frame.match(line)
            if match:
                frames.append((match.group(1), match.group(2).rsplit("/", 1)[-1]))
    if header:
        yield (*header, frames)


def demangled_names(symbols):
    """Maps each Swift symbol to its demangled name up to its parameter list; others map to themselves."""
    names = {symbol: symbol for symbol in symbols}
    swift = sorted(symbol for symbol in symbols if symbol.startswith(("$s", "_$s")))
    if swift:
        try:
            result = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(swift),
                                    capture_output=True, text=True, check=True)
            for symbol, name in zip(swift, result.stdout.split("\n")):
                names[symbol] = name.split("(", 1)[0]
        except (OSError, subprocess.CalledProcessError):
            pass  # No toolchain: the mangled names, which most patterns then do not match.
    return names


def percent(part, whole):
    return f"{100 * part / whole:.1f}" if whole else "—"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", help="`ps -eo pid=,args=` taken during the sampling")
    parser.add_argument("--title", default="Where the CPU goes")
    parser.add_argument("--command", default="")
    options = parser.parse_args()
    args = read_processes(options.processes)
    samples = list(read_samples(sys.stdin))
    main_comm = {pid: comm for pid, tid, comm, _ in samples if pid == tid}
    names = demangled_names({symbol for *_, frames in samples for symbol, _ in frames})

    by_group = collections.Counter()
    libraries = collections.defaultdict(collections.Counter)
    layers = collections.Counter()
    whole_stacks = collections.Counter()
    for pid, _tid, comm, frames in samples:
        group = group_of(comm, pid, args, main_comm)
        by_group[group] += 1
        if not frames:
            continue
        library = frames[0][1]
        libraries[group]["kernel" if library.startswith("[kernel") else library] += 1
        symbols = [names[symbol] for symbol, _ in frames]
        if any(symbol in STARTS for symbol in symbols):
            whole_stacks[group] += 1
        for layer, patterns in LAYERS.get(group, []):
            if any(p in s for s in symbols for p in patterns):
                layers[(group, layer)] += 1

    total = sum(by_group.values())
    busy = total - by_group["idle"]
    print(f"# {options.title}\n")
    if options.command:
        print(f"`{options.command}`: `perf record -F 499 -a -g` on every core for most of the rate's run; "
              f"{total:,} samples, {busy:,} of them busy.\n")
    print("| process group | share of the busy samples, % |")
    print("|---|---:|")
    for group, count in by_group.most_common():
        if group != "idle":
            print(f"| {group} | {percent(count, busy)} |")
    print(f"| (idle) | {percent(by_group['idle'], total)} % of all samples |")

    ours = ["PostgreSQL", "functions", "gateway", "FCM stand-in", "push-sweep", "nghttpx"]
    print("\n**Where each group's samples were** (the library of the frame sampled, % of the group's samples):\n")
    print("| group | libraries |")
    print("|---|---|")
    for group in ours:
        count = by_group[group]
        if not count:
            continue
        top = ", ".join(f"{name} {percent(n, count)}" for name, n in libraries[group].most_common(8))
        print(f"| {group} | {top} |")

    print("\n**Layers** (% of the group's samples with the layer anywhere on the stack; a lower bound where stacks "
          "stop short):\n")
    print("| group | layer | share, % |")
    print("|---|---|---:|")
    for group in LAYERS:
        count = by_group[group]
        if not count:
            continue
        print(f"| {group} | (stacks unwound to their thread's start) | {percent(whole_stacks[group], count)} |")
        for layer, _ in LAYERS[group]:
            print(f"| {group} | {layer} | {percent(layers[(group, layer)], count)} |")


if __name__ == "__main__":
    main()
