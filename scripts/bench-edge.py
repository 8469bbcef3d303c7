#!/usr/bin/env python3
"""The edge's numbers under abuse, against a running `runner serve`:

  memory   50 concurrent 1 MiB bodies of 0x01 to /api/dose-records (Content-Length and chunked): the runner's RSS
           before, its peak (VmHWM) and after, from /proc.
  tokens   garbage bearer tokens (well-formed unknown `pst_…` patient tokens, and JWTs naming an unknown `kid`)
           against one warm worker for a few seconds: requests/s answered, and the database connections the
           functions hold meanwhile (pg_stat_activity, sampled).

    scripts/bench-edge.py memory RUNNER_PID PORT
    scripts/bench-edge.py tokens PORT DATABASE_URL [SECONDS] [patient|jwt|mixed]

scripts/bench-edge.sh starts the runner (and, for `tokens`, a throwaway PostgreSQL) and calls this.
"""
import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def send_body(port, chunked, size, answers):
    payload = b"\x01" * size
    head = f"POST /api/dose-records HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nConnection: close\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
            if chunked:
                connection.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
                step = 64 * 1024
                for offset in range(0, size, step):
                    piece = payload[offset : offset + step]
                    connection.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                connection.sendall(b"0\r\n\r\n")
            else:
                connection.sendall((head + f"Content-Length: {size}\r\n\r\n").encode() + payload)
            data = connection.recv(4096)
            answers.append(data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none")
    except OSError:
        # The runner may close a connection whose body it refused before the client finished sending it.
        answers.append("closed")


def memory(pid, port):
    pid, port = int(pid), int(port)
    time.sleep(1)
    # The same 50 concurrent connections with 10-byte bodies first: what serving 50 connections at once costs
    # whatever their bodies (threads, buffers), so that the 1 MiB bodies' own cost shows apart.
    warm_up = []
    threads = [threading.Thread(target=send_body, args=(port, False, 10, warm_up)) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(1)
    small_peak = status_kib(pid, "VmHWM")
    before = status_kib(pid, "VmRSS")
    results = {}
    for chunked in (False, True):
        answers = []
        threads = [
            threading.Thread(target=send_body, args=(port, chunked, 1024 * 1024, answers)) for _ in range(50)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results["chunked" if chunked else "content-length"] = sorted(set(answers))
    time.sleep(2)
    peak = status_kib(pid, "VmHWM")
    after = status_kib(pid, "VmRSS")
    print(
        json.dumps(
            {
                "rss_peak_after_50_small_mib": round(small_peak / 1024, 1),
                "rss_before_mib": round(before / 1024, 1),
                "rss_peak_mib": round(peak / 1024, 1),
                "rss_after_mib": round(after / 1024, 1),
                "answers": results,
            }
        )
    )


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def garbage_token(index, kind):
    if kind == "patient" or (kind == "mixed" and index % 2 == 0):
        return "pst_" + b64url(os.urandom(32))
    header = b64url(json.dumps({"alg": "ES256", "typ": "JWT", "kid": f"forged-{index}"}).encode())
    claims = b64url(json.dumps({"sub": "00000000-0000-4000-8000-000000000000", "exp": 4102444800}).encode())
    return f"{header}.{claims}.{b64url(os.urandom(64))}"


def tokens(port, database_url, seconds="5", kind="mixed"):
    port, seconds = int(port), float(seconds)
    deadline = time.monotonic() + seconds
    counts = {"answered": 0, "statuses": {}}
    lock = threading.Lock()
    body = json.dumps({"token": "x" * 64, "platform": "ios"}).encode()

    def client(worker):
        index = worker
        while time.monotonic() < deadline:
            request = (
                f"POST /api/push/register HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {garbage_token(index, kind)}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n"
            ).encode() + body
            index += 8
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
                    connection.sendall(request)
                    data = connection.recv(4096)
                status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none"
            except OSError:
                status = "error"
            with lock:
                counts["answered"] += 1
                counts["statuses"][status] = counts["statuses"].get(status, 0) + 1

    samples = []

    def transactions():
        out = subprocess.run(
            ["psql", database_url, "-Atc",
             "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"],
            capture_output=True, text=True)
        return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else 0

    def sample():
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["psql", database_url, "-Atc",
                 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"],
                capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                samples.append(int(out.stdout.strip()))
            time.sleep(0.2)

    threads = [threading.Thread(target=client, args=(worker,)) for worker in range(8)]
    sampler = threading.Thread(target=sample)
    time.sleep(2)
    transactions_before = transactions()
    started = time.monotonic()
    for thread in threads + [sampler]:
        thread.start()
    for thread in threads + [sampler]:
        thread.join()
    elapsed = time.monotonic() - started
    # The sampler's own queries are transactions too: one per sample (and the two counting ones).
    time.sleep(2)  # backends flush their statistics within about a second of going idle
    spent = transactions() - transactions_before - len(samples) - 2
    print(
        json.dumps(
            {
                "tokens": kind,
                "requests_per_second": round(counts["answered"] / elapsed, 1),
                "statuses": counts["statuses"],
                "db_transactions_per_request": round(max(spent, 0) / max(counts["answered"], 1), 2),
                "db_connections_max": max(samples) if samples else None,
                "db_connections_samples": len(samples),
            }
        )
    )


if __name__ == "__main__":
    {"memory": memory, "tokens": tokens}[sys.argv[1]](*sys.argv[2:])
