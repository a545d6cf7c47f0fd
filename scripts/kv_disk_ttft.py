#!/usr/bin/env python3
"""TTFT of a conversation's next turn after an engine restart, with and without the KV disk
cache (docs/engine.md#kv-disk, figures in docs/operations.md).

    scripts/kv_disk_ttft.py --model M.gguf [--runs 3] [--threads 2] [--history 300]

Per run, over the engine socket (docs/protocol.md), at temperature 0:
  restart + disk     engine --kv-disk D: turn 1; SIGTERM; a new engine on D: turn 2
  no restart         that engine, another conversation: turn 1, then turn 2 (in memory)
  restart, no disk   a new engine without --kv-disk: the same turn 2 (prefills it all)
and prints each turn 2's prompt and cached tokens and its TTFT (the engine's done timings).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "..", "build", "glmserve")


class Engine:
    def __init__(self, model, sock, threads, kv_disk=None, log=None):
        args = [BIN, "engine", "--model", model, "--socket", sock, "--threads", str(threads),
                "--ctx-size", "2048"]
        if kv_disk:
            args += ["--kv-disk", kv_disk]
        self.log = open(log, "ab") if log else subprocess.DEVNULL
        self.sock = sock
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                if self.call({"type": "health"})[-1].get("status") == "ready":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the engine did not become ready")

    def call(self, request):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        s.sendall((json.dumps(request) + "\n").encode())
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()]

    def turn(self, rid, conversation, messages, max_tokens):
        events = self.call({"id": rid, "conversation": conversation, "messages": messages,
                            "params": {"temperature": 0, "max_tokens": max_tokens}})
        done = [e for e in events if e.get("event") in ("done", "error")][-1]
        if done["event"] != "done":
            raise RuntimeError(json.dumps(done))
        text = "".join(e.get("text", "") for e in events if e.get("event") == "token")
        return text, done

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--history", type=int, default=300, help="words in the system prompt")
    ap.add_argument("--answer", type=int, default=32, help="max_tokens of turn 1")
    args = ap.parse_args()
    words = ("the quick brown fox jumps over the lazy dog while a careful engineer measures "
             "every millisecond of the serving path ").split()
    system = " ".join(words[i % len(words)] for i in range(args.history))
    turn1 = [{"role": "system", "content": system},
             {"role": "user", "content": "Summarize the text above in one paragraph."}]
    rows = {"restart + disk": [], "no restart": [], "restart, no disk": []}
    for run in range(args.runs):
        tmp = tempfile.mkdtemp(prefix="glm-kvdisk-ttft-")
        sock, kv, log = tmp + "/e.sock", tmp + "/kv", tmp + "/engine.log"
        try:
            e = Engine(args.model, sock, args.threads, kv, log)
            text, _ = e.turn("a1", "a", turn1, args.answer)
            turn2 = turn1 + [{"role": "assistant", "content": text},
                             {"role": "user", "content": "Now say it in one sentence."}]
            t0 = time.time()
            e.stop()
            stop_s = time.time() - t0
            t0 = time.time()
            e = Engine(args.model, sock, args.threads, kv, log)
            start_s = time.time() - t0
            _, d = e.turn("a2", "a", turn2, 8)
            rows["restart + disk"].append(d)
            e.turn("b1", "b", turn1, args.answer)
            _, d = e.turn("b2", "b", turn2, 8)
            rows["no restart"].append(d)
            e.stop()
            e = Engine(args.model, sock, args.threads, None, log)
            _, d = e.turn("c2", "a", turn2, 8)
            rows["restart, no disk"].append(d)
            e.stop()
            saved = [l for l in open(log, errors="replace") if "kv-disk: saved on stop" in l]
            print(f"run {run + 1}: stop with save {stop_s:.2f} s ({saved[0].split('I ', 1)[-1].strip()}),"
                  f" restart to ready {start_s:.2f} s", file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"model {os.path.basename(args.model)}, {args.threads} threads, {args.runs} runs")
    print("| turn 2 after | prompt tokens | cached tokens | TTFT ms (each run) | median |")
    print("|---|---|---|---|---|")
    for name, ds in rows.items():
        ttft = [d["timings"]["ttft_ms"] for d in ds]
        print(f"| {name} | {ds[0]['usage']['prompt_tokens']} | {ds[0]['usage']['cached_tokens']} | "
              f"{', '.join(f'{t:.0f}' for t in ttft)} | {statistics.median(ttft):.0f} |")


if __name__ == "__main__":
    main()
