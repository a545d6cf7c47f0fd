#!/usr/bin/env python3
"""Lints the deployment files against the real binary: deploy/container/Containerfile (its
instructions; a non-root user; the HEALTHCHECK's path), deploy/k8s/*.yaml (parsed as YAML:
Deployment, Service, PodDisruptionBudget, selectors that match, probes) and
deploy/haproxy/haproxy.cfg (haproxy -c). Every flag they pass to glmserve must be one that
`glmserve serve --help` names, and every probe path must answer 200 from a running
`glmserve serve --echo` (and, where it should, 503 while it drains).
usage: deploy_check.py BUILD/glmserve SOURCE_DIR   (exit 77: a tool is missing)"""
import os, re, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request

try:
    import yaml
except ImportError:
    print("skip: python3-yaml is not installed")
    sys.exit(77)

BIN, SRC = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def containerfile(path):
    """Instructions as (KEYWORD, text), continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in open(path, encoding="utf-8"):
        s = line.rstrip("\n")
        if not cur and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        kw, _, rest = cur.strip().partition(" ")
        out.append((kw.upper(), rest.strip()))
        cur = ""
    return out


serve_help = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout


def flags_known(args, where):
    for a in args:
        if a.startswith("--"):
            check(re.search(re.escape(a) + r"\b", serve_help) is not None,
                  f"{where}: {a} is a flag of glmserve serve")


# Containerfile
ins = containerfile(os.path.join(SRC, "deploy/container/Containerfile"))
kws = [k for k, _ in ins]
known = {"ARG", "FROM", "COPY", "RUN", "VOLUME", "ENV", "USER", "WORKDIR", "EXPOSE",
         "HEALTHCHECK", "STOPSIGNAL", "ENTRYPOINT", "CMD", "LABEL"}
check(all(k in known for k in kws), f"Containerfile instructions are known: {kws}")
check("FROM" in kws and kws.index("FROM") <= 1, "Containerfile starts FROM a base")
users = [v for k, v in ins if k == "USER"]
check(bool(users) and users[-1].split(":")[0] not in ("0", "root"),
      f"Containerfile runs as a non-root user ({users})")
check("VOLUME" in kws, "Containerfile declares a volume")
hc = " ".join(v for k, v in ins if k == "HEALTHCHECK")
hc_path = re.search(r"http://127\.0\.0\.1:8080(/[^ ]*)", hc)
check(hc_path is not None, "HEALTHCHECK probes http://127.0.0.1:8080/...")
cmd = [v for k, v in ins if k == "CMD"]
import json as _json
cmd_args = _json.loads(cmd[-1]) if cmd else []
check(cmd_args[:1] == ["serve"], "CMD runs serve")
flags_known(cmd_args, "Containerfile CMD")
check("--port" in cmd_args and cmd_args[cmd_args.index("--port") + 1] == "8080",
      "CMD listens on the EXPOSEd port 8080")

# Kubernetes manifests
docs = []
for name in sorted(os.listdir(os.path.join(SRC, "deploy/k8s"))):
    if name.endswith((".yaml", ".yml")):
        docs += [d for d in yaml.safe_load_all(open(os.path.join(SRC, "deploy/k8s", name))) if d]
by_kind = {d["kind"]: d for d in docs}
for kind in ("Deployment", "Service", "PodDisruptionBudget"):
    check(kind in by_kind, f"k8s: a {kind}")
dep = by_kind.get("Deployment", {})
tmpl = dep.get("spec", {}).get("template", {})
labels = tmpl.get("metadata", {}).get("labels", {})
sel = dep.get("spec", {}).get("selector", {}).get("matchLabels", {})
check(sel and sel.items() <= labels.items(), "k8s: the Deployment's selector matches its pods")
check(by_kind.get("Service", {}).get("spec", {}).get("selector", {}).items() <= labels.items(),
      "k8s: the Service selects the pods")
check(by_kind.get("PodDisruptionBudget", {}).get("spec", {}).get("selector", {})
      .get("matchLabels", {}).items() <= labels.items(), "k8s: the PDB selects the pods")
pod = tmpl.get("spec", {})
check(pod.get("securityContext", {}).get("runAsNonRoot") is True and
      pod.get("securityContext", {}).get("runAsUser", 0) != 0, "k8s: pods run as non-root")
c = (pod.get("containers") or [{}])[0]
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
check(c.get("args", [None])[0] == "serve", "k8s: the container runs serve")
flags_known(c.get("args", []), "k8s args")
http_paths = []
for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
    p = c.get(probe)
    check(p is not None, f"k8s: {probe}")
    if not p:
        continue
    port = (p.get("httpGet") or p.get("tcpSocket") or {}).get("port")
    check(port in ports or port in ports.values(), f"k8s: {probe} port {port} is the container's")
    if "httpGet" in p:
        http_paths.append((probe, p["httpGet"]["path"]))
check(any(p == "readinessProbe" for p, _ in http_paths), "k8s: readiness is an HTTP check")
check(pod.get("terminationGracePeriodSeconds", 30) >
      int(c["args"][c["args"].index("--drain-timeout") + 1]),
      "k8s: the grace period outlasts --drain-timeout")

# HAProxy
cfg = os.path.join(SRC, "deploy/haproxy/haproxy.cfg")
hap_path = re.search(r"option httpchk GET (\S+)", open(cfg).read())
check(hap_path is not None, "haproxy.cfg checks an HTTP path")
if shutil.which("haproxy"):
    env = dict(os.environ, GLM_BIND="127.0.0.1:1", GLM_NODE1="127.0.0.1:2",
               GLM_NODE2="127.0.0.1:3", GLM_NODE3="127.0.0.1:4")
    r = subprocess.run(["haproxy", "-c", "-f", cfg], env=env, capture_output=True, text=True)
    check(r.returncode == 0, "haproxy -c accepts haproxy.cfg " + r.stdout + r.stderr)
else:
    print("note: no haproxy here; haproxy.cfg not parsed")

# The probe paths against the real routes.
paths = [("HEALTHCHECK", hc_path.group(1) if hc_path else "/")] + http_paths
if hap_path:
    paths.append(("haproxy httpchk", hap_path.group(1)))
tmp = tempfile.mkdtemp()
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
proc = subprocess.Popen([BIN, "serve", "--echo", "--echo-delay", "300", "--port", str(port),
                         "--db", os.path.join(tmp, "c.db"), "--socket", os.path.join(tmp, "e.sock"),
                         "--kv-disk", "off", "--drain-timeout", "10"],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))


def status(path):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


try:
    deadline = time.time() + 30
    while time.time() < deadline and status("/health") != 200:
        time.sleep(0.1)
    for who, path in paths:
        check(status(path) == 200, f"{who} {path} answers 200 from a ready node")
    # Draining (SIGTERM with an answer in progress): readiness says 503, so that load balancers
    # send new conversations elsewhere, while the answer finishes.
    import threading
    body = b'{"messages":[{"role":"user","content":"' + b"x" * 20 + b'"}],"max_tokens":20}'
    answer = {}

    def slow():
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            answer["status"] = urllib.request.urlopen(req, timeout=30).status
        except Exception as e:  # noqa: BLE001
            answer["status"] = str(e)

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    seen = 0
    deadline = time.time() + 5
    while time.time() < deadline and seen != 503:
        seen = status("/health")
        time.sleep(0.05)
    check(seen == 503, f"/health is 503 while draining (saw {seen})")
    t.join()
    check(answer.get("status") == 200, f"the answer in progress finished ({answer})")
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
