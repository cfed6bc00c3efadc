#!/usr/bin/python3
"""Loopback mock of the cloud metadata services ckpt polls for notices.

Usage: metadata_mock.py --provider NAME [--port N]

NAME is a provider of ckptrun's table (ckptrun/notice/notice.h) that has a
serve_NAME method below: adding a provider here is adding that method.

Binds 127.0.0.1 (port 0 by default) and prints "PORT <n>" on stdout, then
serves one provider's paths with that provider's headers and error replies
(AWS and Tencent share paths, so one mock process serves one provider).

Control endpoints (any method):
  /_mock/notice?kind=terminate|stop|hibernate|rebalance|maintenance&in=SECONDS
      switch a notice on; `in` is the deadline from now (azure: in=blank gives
      a blank NotBefore; &vm=NAME lists another VM in Resources;
      aws: &legacy=only serves only spot/termination-time;
      volcengine: &fmt=isoz|iso|space|epoch|epochms|offset|quoted, the form
      of the time, isoz by default)
  /_mock/clear                         no notice, no hostile mode
  /_mock/hostile?mode=garbage|huge|badjson|500|slow|pasttime|badtime|wrongtype|off
  /_mock/config?token=required|optional|v1only|forbidden|error500&ttl_cap=S&revoke=1
      aws/aliyun token behaviour; revoke=1 invalidates every issued token;
      &none=404|empty: volcengine's answer while there is no notice
  /_mock/state                         JSON: counters, acks, tokens issued

Standard library only; run with /usr/bin/python3.
"""
import argparse
import email.utils
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOCK = threading.Condition()
S = {
    "provider": None,
    "notice": None,     # dict(kind, deadline (epoch s) or None, vm, legacy)
    "hostile": None,
    "token_mode": "required",
    "ttl_cap": None,
    "tokens": {},       # token -> expiry epoch
    "counters": {},
    "acks": [],
    "version": 0,       # bumps on every change (GCP ETags, Azure incarnation)
    "event_id": "602d9444-d2cd-49c7-8624-8643e7171297",
    "none_reply": "404",  # volcengine without a notice: 404 or an empty 200
}


def count(name, n=1):
    S["counters"][name] = S["counters"].get(name, 0) + n


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def rfc1123(t):
    return email.utils.formatdate(t, usegmt=True)


def tencent_time(t):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t + 8 * 3600))


PAST = 1505722920  # 2017-09-18T08:22:00Z


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "metadata-mock"

    def log_message(self, fmt, *args):  # quiet unless asked
        if os.environ.get("MOCK_VERBOSE"):
            sys.stderr.write("mock: " + (fmt % args) + "\n")

    # ---- plumbing ---------------------------------------------------------
    def reply(self, code, body=b"", ctype="text/plain", headers=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def body_in(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def do_GET(self):
        self.route("GET")

    def do_PUT(self):
        self.route("PUT")

    def do_POST(self):
        self.route("POST")

    def route(self, method):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        body = self.body_in()
        if u.path.startswith("/_mock/"):
            return self.control(u.path[len("/_mock/"):], q)
        with LOCK:
            count("requests")
        p = S["provider"]
        getattr(self, "serve_" + p)(method, u.path, q, body)

    # ---- control ----------------------------------------------------------
    def control(self, what, q):
        with LOCK:
            if what == "notice":
                inn = q.get("in", "120")
                S["notice"] = {
                    "kind": q.get("kind", "terminate"),
                    "deadline": None if inn == "blank" else time.time() + float(inn),
                    "vm": q.get("vm"),
                    "legacy": q.get("legacy"),
                    "fmt": q.get("fmt", "isoz"),
                    "set_at": time.time(),
                }
                S["version"] += 1
            elif what == "clear":
                S["notice"] = None
                S["hostile"] = None
                S["version"] += 1
            elif what == "hostile":
                m = q.get("mode", "off")
                S["hostile"] = None if m == "off" else m
                S["version"] += 1
            elif what == "config":
                if "token" in q:
                    S["token_mode"] = q["token"]
                if "ttl_cap" in q:
                    S["ttl_cap"] = int(q["ttl_cap"]) if q["ttl_cap"] else None
                if q.get("revoke"):
                    S["tokens"].clear()
                if "none" in q:
                    S["none_reply"] = q["none"]
            elif what != "state":
                return self.reply(404, "unknown control\n")
            LOCK.notify_all()
            state = {"counters": dict(S["counters"]), "acks": list(S["acks"]),
                     "tokens": len(S["tokens"]), "notice": S["notice"],
                     "hostile": S["hostile"]}
        return self.reply(200, json.dumps(state), "application/json")

    # ---- hostile replies (on notice paths only) ---------------------------
    def hostile(self, good_empty, past_body):
        """Serves the hostile reply if a mode is set. @return True if served."""
        m = S["hostile"]
        if not m:
            return False
        with LOCK:
            count("hostile_" + m)
        if m == "garbage":
            self.reply(200, os.urandom(300))
        elif m == "huge":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(10 * 1024 * 1024))
            self.end_headers()
            try:
                for _ in range(160):
                    self.wfile.write(b"{" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif m == "badjson":
            self.reply(200, '{"action": "terminate", "time": "2030-01-01T00:00', "application/json")
        elif m == "wrongtype":
            self.reply(200, '[{"action": 1, "time": 2}, "Events", {"Events": 5}]', "application/json")
        elif m == "500":
            self.reply(500, "Internal Server Error\n")
        elif m == "slow":
            time.sleep(8)
            if good_empty is None:
                self.reply(404, "Not Found\n")
            else:
                self.reply(200, good_empty)
        elif m == "pasttime":
            self.reply(200, past_body)
        elif m == "badtime":
            self.reply(200, past_body.replace("2017", "2017-13").replace("Sep", "Foo")
                       .replace("08:22", "99:22"))
        else:
            self.reply(500, "unknown hostile mode\n")
        return True

    # ---- tokens (AWS IMDSv2, Alibaba hardened mode) -------------------------
    def token_put(self, ttl_header):
        with LOCK:
            count("token_puts")
            mode = S["token_mode"]
        if mode == "v1only":
            return self.reply(405, "Method Not Allowed\n")
        if mode == "forbidden":
            return self.reply(403, "Forbidden\n")
        if mode == "error500":
            return self.reply(500, "Internal Server Error\n")
        try:
            ttl = int(self.headers.get(ttl_header, ""))
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= 21600:
            return self.reply(400, "Bad Request\n")
        with LOCK:
            if S["ttl_cap"]:
                ttl = min(ttl, S["ttl_cap"])
            tok = hashlib.sha256(os.urandom(16)).hexdigest()[:56]
            S["tokens"][tok] = time.time() + ttl
            count("tokens_issued")
        self.reply(200, tok, headers={ttl_header: str(ttl)})

    def token_ok(self, header):
        """@return True when the request may proceed (token valid or optional)."""
        tok = self.headers.get(header)
        with LOCK:
            mode = S["token_mode"]
            exp = S["tokens"].get(tok) if tok else None
            if tok:
                count("gets_with_token")
            else:
                count("gets_without_token")
            if exp is not None and exp > time.time():
                return True
            if mode in ("optional", "v1only", "forbidden") and not tok:
                return True
            count("unauthorized")
        return False

    # ---- AWS --------------------------------------------------------------
    def serve_aws(self, method, path, q, body):
        if path == "/latest/api/token":
            if method != "PUT":
                return self.reply(405, "Method Not Allowed\n")
            return self.token_put("X-aws-ec2-metadata-token-ttl-seconds")
        if method != "GET":
            return self.reply(405, "Method Not Allowed\n")
        if not self.token_ok("X-aws-ec2-metadata-token"):
            return self.reply(401, "Unauthorized\n")
        n = S["notice"]
        if path == "/latest/meta-data/spot/instance-action":
            with LOCK:
                count("instance_action")
            past = json.dumps({"action": "terminate", "time": iso(PAST)}, indent=4)
            if self.hostile(None, past):
                return
            if n and n["kind"] in ("terminate", "stop", "hibernate") and n["legacy"] != "only":
                return self.reply(200, json.dumps({"action": n["kind"], "time": iso(n["deadline"])},
                                                  indent=4), "application/json")
            return self.reply(404, "Not Found\n")
        if path == "/latest/meta-data/spot/termination-time":
            if self.hostile(None, iso(PAST)):
                return
            if n and n["kind"] in ("terminate", "stop"):
                return self.reply(200, iso(n["deadline"]) + "\n")
            return self.reply(404, "Not Found\n")
        if path == "/latest/meta-data/events/recommendations/rebalance":
            if self.hostile(None, '{"noticeTime": "2017-13-45T08:22:00Z"}'):
                return
            if n and n["kind"] == "rebalance":
                return self.reply(200, json.dumps({"noticeTime": iso(n["set_at"])}), "application/json")
            return self.reply(404, "Not Found\n")
        return self.reply(404, "Not Found\n")

    # ---- GCP --------------------------------------------------------------
    def gcp_value(self, path):
        n = S["notice"]
        if path.endswith("/instance/preempted"):
            return "TRUE" if n and n["kind"] == "terminate" else "FALSE"
        if n and n["kind"] == "maintenance":
            return "TERMINATE_ON_HOST_MAINTENANCE"
        return "NONE"

    def gcp_etag(self, value):
        return hashlib.sha1(("%s/%s/%s" % (value, S["hostile"], S["version"] if S["hostile"] else 0))
                            .encode()).hexdigest()[:16]

    def serve_gcp(self, method, path, q, body):
        if self.headers.get("Metadata-Flavor") != "Google":
            with LOCK:
                count("gcp_missing_header")
            return self.reply(403, "Missing Metadata-Flavor:Google header.\n")
        if path not in ("/computeMetadata/v1/instance/preempted",
                        "/computeMetadata/v1/instance/maintenance-event"):
            return self.reply(404, "Not Found\n")
        key = "preempted" if path.endswith("preempted") else "maintenance"
        with LOCK:
            count("gcp_" + key)
            if q.get("wait_for_change") == "true":
                count("gcp_longpolls")
                deadline = time.time() + min(float(q.get("timeout_sec", "60") or 60), 60)
                last = q.get("last_etag", "0")
                while self.gcp_etag(self.gcp_value(path)) == last and time.time() < deadline:
                    LOCK.wait(deadline - time.time())
            value = self.gcp_value(path)
            etag = self.gcp_etag(value)
        if self.hostile("FALSE" if key == "preempted" else "NONE", "MAYBE"):
            return
        return self.reply(200, value, "application/text",
                          {"ETag": etag, "Metadata-Flavor": "Google"})

    # ---- Azure ------------------------------------------------------------
    def serve_azure(self, method, path, q, body):
        if self.headers.get("Metadata") != "true":
            with LOCK:
                count("azure_missing_header")
            return self.reply(400, json.dumps({"error": "Bad request. Required metadata header not specified"}),
                              "application/json")
        if path == "/metadata/instance/compute/name":
            return self.reply(200, "vm0")
        if path != "/metadata/scheduledevents" or not q.get("api-version"):
            return self.reply(400, '{"error": "Bad request"}', "application/json")
        if method == "POST":
            try:
                doc = json.loads(body)
                ids = [r["EventId"] for r in doc["StartRequests"]]
            except (ValueError, KeyError, TypeError):
                return self.reply(400, '{"error": "Bad request"}', "application/json")
            with LOCK:
                S["acks"].extend(ids)
                count("acks", len(ids))
            return self.reply(200, "")
        with LOCK:
            count("azure_gets")
        n = S["notice"]
        past = json.dumps({"DocumentIncarnation": 3, "Events": [self.azure_event(
            "Preempt", rfc1123(PAST), "vm0")]})
        if self.hostile(json.dumps({"DocumentIncarnation": 1, "Events": []}), past):
            return
        events = []
        if n:
            kind = {"terminate": "Preempt", "maintenance": "Reboot", "freeze": "Freeze"}.get(
                n["kind"], "Terminate")
            nb = "" if n["deadline"] is None else rfc1123(n["deadline"])
            events.append(self.azure_event(kind, nb, n["vm"] or "vm0"))
        doc = {"DocumentIncarnation": 1 + S["version"], "Events": events}
        return self.reply(200, json.dumps(doc), "application/json")

    def azure_event(self, kind, not_before, vm):
        return {"EventId": S["event_id"], "EventType": kind, "ResourceType": "VirtualMachine",
                "Resources": [vm], "EventStatus": "Scheduled", "NotBefore": not_before,
                "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}

    # ---- Alibaba ----------------------------------------------------------
    def serve_aliyun(self, method, path, q, body):
        if path == "/latest/api/token":
            if method != "PUT":
                return self.reply(405, "Method Not Allowed\n")
            return self.token_put("X-aliyun-ecs-metadata-token-ttl-seconds")
        if not self.token_ok("X-aliyun-ecs-metadata-token"):
            return self.reply(403, "Forbidden\n")
        if path != "/latest/meta-data/instance/spot/termination-time":
            return self.reply(404, "Not Found\n")
        with LOCK:
            count("aliyun_gets")
        if self.hostile(None, iso(PAST)):
            return
        n = S["notice"]
        if n and n["kind"] == "terminate":
            return self.reply(200, iso(n["deadline"]))
        return self.reply(404, "Not Found\n")

    # ---- Tencent ----------------------------------------------------------
    def serve_tencent(self, method, path, q, body):
        if path != "/latest/meta-data/spot/termination-time":
            return self.reply(404, "Not Found\n")
        with LOCK:
            count("tencent_gets")
        if self.hostile(None, tencent_time(PAST)):
            return
        n = S["notice"]
        if n and n["kind"] == "terminate":
            return self.reply(200, tencent_time(n["deadline"]))
        return self.reply(404, "Not Found\n")

    # ---- Volcano Engine ---------------------------------------------------
    # Documented: the release time in UTC when release is near. Not
    # documented: the answer without a notice and the time's exact form, so
    # the mock serves each form ckptrun accepts (&fmt=) and either answer.
    def serve_volcengine(self, method, path, q, body):
        if path != "/latest/spot_instance_termination_time":
            return self.reply(404, "Not Found\n")
        with LOCK:
            count("volcengine_gets")
        if self.hostile(None, iso(PAST)):
            return
        n = S["notice"]
        if n and n["kind"] == "terminate":
            return self.reply(200, volc_time(n["deadline"], n["fmt"]))
        if S["none_reply"] == "empty":
            return self.reply(200, "")
        return self.reply(404, "Not Found\n")


def volc_time(t, fmt):
    if fmt == "epoch":
        return "%d" % t
    if fmt == "epochms":
        return "%d" % (t * 1000)
    if fmt == "offset":  # the same instant as China Standard Time, with its offset
        return time.strftime("%Y-%m-%dT%H:%M:%S+08:00", time.gmtime(t + 8 * 3600))
    if fmt == "space":
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
    if fmt == "iso":
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    if fmt == "quoted":
        return '"%s"' % iso(t)
    return iso(t)  # isoz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", required=True,
                    choices=sorted(m[len("serve_"):] for m in dir(Handler) if m.startswith("serve_")))
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    S["provider"] = a.provider
    if a.provider == "aliyun":
        S["token_mode"] = "optional"
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
