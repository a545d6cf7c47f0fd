#!/usr/bin/env python3
"""Load figures for the gateway's HTTP layer (docs/gateway.md, "Figures"). Standard library only.

  gateway_load.py hold    URL N          N idle keep-alive connections, then /health probes
  gateway_load.py streams URL N          N streaming answers at once: how many stream together
  gateway_load.py ttft    SOCKET URL.. -c N -r R
                                         time to first token at N concurrent streams through each
                                         gateway URL and straight through the engine SOCKET,
                                         rounds alternated (socket, A, B, socket, A, B, ...);
                                         medians, and each URL's overhead over the socket
  gateway_load.py page    URL.. -t T     the page's chat path: one conversation per URL, T turns
                                         alternated across the URLs, time from the POST of
                                         .../chat to its first token event (3 warm-up turns)

Start the engine as `glmserve engine --echo --echo-delay MS --max-batch 512 --max-queue 4096`.
"""
import argparse
import asyncio
import http.client
import json
import resource
import statistics
import sys
import time
from urllib.parse import urlparse


def addr(url):
    u = urlparse(url)
    return u.hostname, u.port or 80


def chat_body(stream, max_tokens, text="hello there"):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}],
                       "stream": stream, "max_tokens": max_tokens}).encode()


def post(path, body, keep_alive=True):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")
    if not keep_alive:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


async def get_once(reader, writer, path):
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return status


async def probe_health(url, timeout=2.0):
    t0 = time.monotonic()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(*addr(url)), timeout)
        status = await asyncio.wait_for(get_once(r, w, "/health"), timeout)
        w.close()
        return status, (time.monotonic() - t0) * 1000
    except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError):
        return None, (time.monotonic() - t0) * 1000


async def hold(url, n):
    conns, answered = [], 0

    async def one():
        nonlocal answered
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(*addr(url)), 5)
            conns.append(w)
            if await asyncio.wait_for(get_once(r, w, "/v1/models"), 5) == 200:
                answered += 1
        except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError):
            pass

    t0 = time.monotonic()
    for i in range(0, n, 500):  # connect in batches (the backlog of the slower server is small)
        await asyncio.gather(*(one() for _ in range(min(500, n - i))))
    opened = time.monotonic() - t0
    probes = [await probe_health(url) for _ in range(5)]
    ok = [ms for status, ms in probes if status == 200]
    print(json.dumps({"connections": n, "answered": answered, "open_s": round(opened, 2),
                      "health_ok": len(ok), "health_ms_median":
                      round(statistics.median(ok), 2) if ok else None}))
    for w in conns:
        w.close()


async def stream_one(url, body, started, deadline):
    """Returns (status, first token time or None); counts streams that have started."""
    try:
        r, w = await asyncio.open_connection(*addr(url))
        t0 = time.monotonic()
        w.write(post("/v1/chat/completions", body, keep_alive=False))
        await w.drain()
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), deadline)
        status = int(head[9:12])
        first = None
        while True:
            chunk = await asyncio.wait_for(r.read(65536), deadline)
            if not chunk:
                break
            if first is None and b'"content"' in chunk:
                first = time.monotonic() - t0
                started.append(time.monotonic())
        w.close()
        return status, first
    except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError):
        return None, None


async def streams(url, n, max_tokens):
    started = []
    t0 = time.monotonic()
    body = chat_body(True, max_tokens, "a" * max_tokens)  # the echo engine: a token a character
    results = await asyncio.gather(*(stream_one(url, body, started, 120) for _ in range(n)))
    total = time.monotonic() - t0
    # Streams that had started within one second of the first one: those held at once.
    first = min(started) if started else 0
    together = sum(1 for t in started if t - first < 1.0)
    by_status = {}
    for status, _ in results:
        by_status[str(status)] = by_status.get(str(status), 0) + 1
    print(json.dumps({"clients": n, "streaming_together": together, "statuses": by_status,
                      "total_s": round(total, 2)}))


async def socket_first_token(path, max_tokens, i):
    r, w = await asyncio.open_unix_connection(path)
    t0 = time.monotonic()
    req = {"id": f"load-{time.monotonic_ns()}-{i}", "messages":
           [{"role": "user", "content": "hello there"}], "params": {"max_tokens": max_tokens}}
    w.write(json.dumps(req).encode() + b"\n")
    await w.drain()
    first = None
    while True:
        line = await r.readline()
        if not line:
            break
        ev = json.loads(line)
        if ev.get("event") == "token" and first is None:
            first = time.monotonic() - t0
        if ev.get("event") in ("done", "error"):
            break
    w.close()
    return first


async def ttft(socket_path, urls, concurrency, rounds, max_tokens):
    layers = ["socket"] + urls
    samples = {name: [] for name in layers}
    body = chat_body(True, max_tokens)
    for _ in range(rounds):
        for name in layers:
            if name == "socket":
                firsts = await asyncio.gather(*(socket_first_token(socket_path, max_tokens, i)
                                                for i in range(concurrency)))
            else:
                res = await asyncio.gather(*(stream_one(name, body, [], 60)
                                             for _ in range(concurrency)))
                firsts = [f for _, f in res]
            samples[name] += [f * 1000 for f in firsts if f is not None]
    base = statistics.median(samples["socket"])
    out = {"concurrency": concurrency, "rounds": rounds}
    for name in layers:
        med = statistics.median(samples[name])
        q = statistics.quantiles(samples[name], n=10) if len(samples[name]) > 1 else [med] * 9
        out[name] = {"n": len(samples[name]), "ttft_ms_median": round(med, 2),
                     "ttft_ms_mean": round(statistics.fmean(samples[name]), 2),
                     "p10": round(q[0], 2), "p90": round(q[-1], 2),
                     "overhead_ms": round(med - base, 2)}
    print(json.dumps(out))


def page_first_token(url, conv, text):
    host, port = addr(url)
    c = http.client.HTTPConnection(host, port)
    body = json.dumps({"content": text, "params": {"max_tokens": 4}})
    t0 = time.perf_counter()
    c.request("POST", f"/api/conversations/{conv}/chat", body,
              {"Content-Type": "application/json"})
    r = c.getresponse()
    first, seen = None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        seen += chunk
        if first is None and b'"type":"token"' in seen:
            first = (time.perf_counter() - t0) * 1000
    c.close()
    return first


def page(urls, turns):
    convs = {}
    for url in urls:
        host, port = addr(url)
        c = http.client.HTTPConnection(host, port)
        c.request("POST", "/api/conversations", "{}", {"Content-Type": "application/json"})
        convs[url] = json.loads(c.getresponse().read())["id"]
        c.close()
    samples = {url: [] for url in urls}
    for i in range(turns + 3):
        for url in urls:
            t = page_first_token(url, convs[url], f"hello {i}")
            if i >= 3 and t is not None:
                samples[url].append(t)
    out = {"turns": turns}
    for url in urls:
        q = statistics.quantiles(samples[url], n=10)
        out[url] = {"first_token_ms_median": round(statistics.median(samples[url]), 3),
                    "p10": round(q[0], 3), "p90": round(q[-1], 3)}
    print(json.dumps(out))


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hold")
    h.add_argument("url")
    h.add_argument("n", type=int)
    s = sub.add_parser("streams")
    s.add_argument("url")
    s.add_argument("n", type=int)
    s.add_argument("--max-tokens", type=int, default=100)
    t = sub.add_parser("ttft")
    t.add_argument("socket")
    t.add_argument("urls", nargs="+")
    t.add_argument("-c", "--concurrency", type=int, default=1)
    t.add_argument("-r", "--rounds", type=int, default=10)
    t.add_argument("--max-tokens", type=int, default=4)
    g = sub.add_parser("page")
    g.add_argument("urls", nargs="+")
    g.add_argument("-t", "--turns", type=int, default=40)
    a = p.parse_args()
    if a.cmd == "hold":
        asyncio.run(hold(a.url, a.n))
    elif a.cmd == "streams":
        asyncio.run(streams(a.url, a.n, a.max_tokens))
    elif a.cmd == "page":
        page(a.urls, a.turns)
    else:
        asyncio.run(ttft(a.socket, a.urls, a.concurrency, a.rounds, a.max_tokens))


if __name__ == "__main__":
    sys.exit(main())
