#!/usr/bin/env python3
"""Serving under load, the seed study's way (docs/performance.md, "Serving under load").

  serve_load.py URL [URL ...] [--users 1,4,8,16] [--rounds 2] [--tokens 32]
                [--prompts ../shared/data/prompts/seed-study.json] [--api completions|chat]

Each URL is an OpenAI-compatible server (glmserve `serve`/`web`, llama-server, vLLM...): its
base, e.g. http://127.0.0.1:8080. For each user count N, the servers take turns, round by round
(A, B, A, B, ...): N users at once, each sending the study's prompts in turn (user i starts at
prompt i mod 3), one streamed request after the other, `--tokens` tokens each. Per server and
N, over all its rounds: TTFT p50/p90 (request sent to first token text), TPOT median ((last
token - first token) / (tokens - 1), tokens from the stream's usage), end-to-end median, and
total tokens/s (the generated tokens of a round over its wall time; median of rounds).
Standard library only; the prompts file is the study's JSON ({"prompts":[{"name","text"}]}).
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROMPTS = os.path.join(HERE, "..", "..", "shared", "data", "prompts", "seed-study.json")


def ms(x):
    """Milliseconds: whole ones from 100 up, else 3 significant digits (a tiny model's TTFT is
    under 1 ms)."""
    return f"{x:.0f} ms" if x != x or x >= 100 else f"{x:.3g} ms"


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one_request(url, api, text, tokens):
    """Streams one answer; returns (ttft_s, e2e_s, completion_tokens, tpot_s or None)."""
    u = urlparse(url)
    if api == "chat":
        path = "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": text}]}
    else:
        path = "/v1/completions"
        body = {"prompt": text}
    body.update({"model": "default", "max_tokens": tokens, "temperature": 0, "stream": True,
                 "stream_options": {"include_usage": True}})
    data = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
    start = time.perf_counter()
    writer.write((f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json"
                  f"\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data)
    await writer.drain()
    status = (await reader.readline()).decode()
    if " 200 " not in status:
        rest = await reader.read()
        raise RuntimeError(f"{url}: {status.strip()} {rest[-300:]!r}")
    first = last = None
    n_text = 0
    usage = None
    async for raw in reader:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        chunk = json.loads(payload)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for c in chunk.get("choices", []):
            piece = c.get("text") if api != "chat" else (c.get("delta") or {}).get("content")
            if piece:
                now = time.perf_counter()
                first = first if first is not None else now
                last = now
                n_text += 1
    end = time.perf_counter()
    writer.close()
    if first is None:
        raise RuntimeError(f"{url}: an answer without text")
    n = usage.get("completion_tokens", n_text) if usage else n_text
    tpot = (last - first) / (n - 1) if n > 1 else None
    return first - start, end - start, n, tpot


async def one_round(url, api, prompts, users, tokens, per_user):
    async def user(i):
        out = []
        for k in range(per_user):
            out.append(await one_request(url, api, prompts[(i + k) % len(prompts)], tokens))
        return out
    start = time.perf_counter()
    results = await asyncio.gather(*(user(i) for i in range(users)))
    wall = time.perf_counter() - start
    flat = [r for rs in results for r in rs]
    return flat, sum(r[2] for r in flat) / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--users", default="1,4,8,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--per-user", type=int, default=3, help="requests per user per round")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds per server, first")
    ap.add_argument("--api", choices=["completions", "chat"], default="completions")
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS)
    a = ap.parse_args()
    with open(a.prompts, encoding="utf-8") as f:
        prompts = [p["text"] for p in json.load(f)["prompts"]]
    for url in a.urls:
        for _ in range(a.warmup):
            asyncio.run(one_round(url, a.api, prompts, 1, a.tokens, len(prompts)))
    print(f"prompts: {a.prompts} ({len(prompts)}), {a.tokens} tokens each, api {a.api}, "
          f"{a.rounds} alternated rounds\n")
    print("| users | server | TTFT p50 | TTFT p90 | TPOT p50 | end-to-end p50 | tokens/s |")
    print("|---|---|---|---|---|---|---|")
    for users in [int(x) for x in a.users.split(",")]:
        got = {url: ([], []) for url in a.urls}
        for _ in range(a.rounds):
            for url in a.urls:  # A, B, A, B...
                flat, tps = asyncio.run(one_round(url, a.api, prompts, users, a.tokens,
                                                  a.per_user))
                got[url][0].extend(flat)
                got[url][1].append(tps)
        for url in a.urls:
            flat, tps = got[url]
            ttft = [r[0] * 1000 for r in flat]
            tpot = [r[3] * 1000 for r in flat if r[3] is not None]
            e2e = [r[1] * 1000 for r in flat]
            print(f"| {users} | {url} | {ms(percentile(ttft, .5))} | {ms(percentile(ttft, .9))}"
                  f" | {ms(percentile(tpot, .5))} | {ms(percentile(e2e, .5))}"
                  f" | {statistics.median(tps):.1f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
