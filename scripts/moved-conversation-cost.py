#!/usr/bin/env python3
"""The cost of a moved conversation's first turn (docs/operations.md, "Several nodes").

Starts two `glmserve serve` nodes on one model, builds conversations of about HISTORY tokens
on node A, then times the next turn three ways, each conversation once:
  cached  the turn on node A, whose KV holds the history (prefills only the new message)
  moved   the same turn on node B, which never saw the conversation (prefills the history)
  after   the turn after that on node B (its KV now holds it: cached again)
Wall time of a non-streamed request with max_tokens 1 (= time to first token + one HTTP
round trip), median of N conversations; the engine's cached_tokens beside it.
usage: moved-conversation-cost.py BUILD/glmserve MODEL.gguf [--history 600] [-n 5] [--threads 2]
"""
import argparse, json, os, signal, socket, statistics, subprocess, tempfile, time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("model")
ap.add_argument("--history", type=int, default=600, help="history tokens, about")
ap.add_argument("-n", type=int, default=5)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


tmp = tempfile.mkdtemp()
nodes = []
for name in ("a", "b"):
    port = free_port()
    p = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", str(port), "--threads",
                          str(a.threads), "--db", f"{tmp}/{name}.db", "--socket",
                          f"{tmp}/{name}.sock", "--kv-disk", "off"],
                         stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/{name}.log", "w"))
    nodes.append((port, p))


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    j = json.load(urllib.request.urlopen(req, timeout=600))
    return (time.perf_counter() - t0) * 1000, j


try:
    for port, _ in nodes:
        for _ in range(600):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health").status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
    rows = {"cached": [], "moved": [], "after": []}
    for i in range(a.n):
        conv = f"moved-{os.getpid()}-{i}"
        msgs = [{"role": "user", "content": f"conversation {i}: " + "tell me more. " * 20}]
        prompt = 0
        while prompt < a.history:  # the history, on node A
            _, j = post(nodes[0][0], {"messages": msgs, "max_tokens": 24, "temperature": 0,
                                      "conversation": conv})
            prompt = j["usage"]["prompt_tokens"]
            msgs += [{"role": "assistant", "content": j["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "and then? " * 10}]
        turn = {"messages": msgs, "max_tokens": 1, "temperature": 0, "conversation": conv}
        for key, port in (("cached", nodes[0][0]), ("moved", nodes[1][0])):
            ms, j = post(port, turn)
            rows[key].append((ms, j["usage"]["prompt_tokens"],
                              j["usage"]["prompt_tokens_details"]["cached_tokens"]))
        msgs2 = msgs + [{"role": "assistant", "content": j["choices"][0]["message"]["content"]},
                        {"role": "user", "content": "one more thing."}]
        ms, j = post(nodes[1][0], {**turn, "messages": msgs2})
        rows["after"].append((ms, j["usage"]["prompt_tokens"],
                              j["usage"]["prompt_tokens_details"]["cached_tokens"]))
    print(f"model {os.path.basename(a.model)}, --threads {a.threads}, {a.n} conversations")
    print("turn     median ms   prompt tokens   cached tokens")
    for key, r in rows.items():
        print(f"{key:8} {statistics.median(x[0] for x in r):9.1f}   "
              f"{statistics.median(x[1] for x in r):13.0f}   {statistics.median(x[2] for x in r):13.0f}")
    c, m = statistics.median(x[0] for x in rows["cached"]), statistics.median(x[0] for x in rows["moved"])
    print(f"moved / cached: {m / c:.1f}x")
finally:
    for _, p in nodes:
        p.send_signal(signal.SIGTERM)
    for _, p in nodes:
        p.wait(30)
    subprocess.run(["rm", "-rf", tmp])
