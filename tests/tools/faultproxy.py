#!/usr/bin/env python3
"""faultproxy.py -- an HTTP/1.1 forwarding proxy that breaks a share of the
requests passing through it, for the object-store fault tests.

    faultproxy.py --upstream 127.0.0.1:PORT [--rate 0.15] [--seed 1]
                  [--faults 500,503,reset,stall,truncate,flip] [--stall-s 3]

Listens on a free loopback port and prints "PORT <n>" on stdout. The client
talks to it as if it were the store (point the endpoint at it). Each request
is, with probability --rate, answered with one fault picked at random:
  500       500 InternalError (S3 XML body and x-ms-error-code)
  503       503 SlowDown / ServerBusy
  reset     the connection is reset (RST) before any reply
  stall     nothing is sent for --stall-s seconds, then the connection closes
  truncate  the request is forwarded, the reply cut in the middle of its body
  flip      an object GET's 200 or 206 reply (one with an ETag) arrives whole, with
            one byte of its body changed: what the client's own checks (the
            MD5 ETag, Content-MD5, chunk checksums) must catch and fetch again
Other requests are forwarded unchanged (one upstream connection each).
--flip-once replaces the random draw: the first GET of each path (and range)
that can be flipped is, later ones pass (every object is damaged exactly once: a
deterministic test that each one is fetched again).
A slow link can be added to every forwarded request (ckptrun doctor tests):
  --delay-ms N     N ms of extra latency per request
  --upload-bps N   request bodies pass through one shared link of N bytes/s
                   (parallel uploads share it, as they share a real uplink):
                   read from the client 64 KiB at a time at that pace, through
                   a small receive buffer, so the client's own count of bytes
                   sent moves as it would over such a link
--stats FILE keeps FILE a JSON object of the counts (requests by method on
arrival, "forwarded" once a reply went back whole, each fault), rewritten
whole at every change: a test waits on it instead of guessing how far the
client got.
Only loopback addresses are accepted as upstream. Stdlib only.
"""
import argparse
import json
import os
import random
import signal
import socket
import socketserver
import struct
import sys
import threading
import time

LOCK = threading.Lock()
STATS = {"forwarded": 0}
STATS_FILE = [None]  # --stats


def count(what):
    with LOCK:
        STATS[what] = STATS.get(what, 0) + 1
        if STATS_FILE[0]:
            tmp = STATS_FILE[0] + ".tmp"
            with open(tmp, "w") as f:
                json.dump(STATS, f)
            os.replace(tmp, STATS_FILE[0])


def read_head(f):
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line)


def content_length(lines):
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def flip_body(head, reply):
    """One byte of an object GET's 200 or 206 body changed; other replies as
    they are."""
    sep = reply.find(b"\r\n\r\n")
    if not head[0].startswith(b"GET ") or sep < 0 or sep + 4 >= len(reply):
        return reply
    lines = reply[:sep].split(b"\r\n")
    if (b" 200 " not in lines[0] + b" " and b" 206 " not in lines[0] + b" ") or not any(
            l.split(b":", 1)[0].strip().lower() == b"etag" for l in lines[1:]):
        return reply
    at = sep + 4 + (len(reply) - sep - 4) // 2
    return reply[:at] + bytes([reply[at] ^ 0x20]) + reply[at + 1:]


class Handler(socketserver.StreamRequestHandler):
    def pick(self):
        with LOCK:
            if self.server.rng.random() < self.server.rate:
                return self.server.rng.choice(self.server.faults)
        return None

    def error_reply(self, status, reason, code):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
                "<Message>injected by faultproxy</Message></Error>" % code).encode()
        head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\n"
                "x-ms-error-code: %s\r\nContent-Length: %d\r\n\r\n"
                % (status, reason, code.replace("SlowDown", "ServerBusy"), len(body)))
        self.wfile.write(head.encode() + body)
        self.wfile.flush()

    def reset(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack("ii", 1, 0))
        self.connection.close()

    def read_body(self, nbytes):
        """The request body; with --upload-bps each 64 KiB piece waits for its
        turn on the shared uplink before it is read (the client's socket
        fills and its upload slows down to the link's pace)."""
        if not self.server.upload_bps:
            return self.rfile.read(nbytes)
        parts, left = [], nbytes
        while left > 0:
            n = min(left, 1 << 16)
            with LOCK:
                start = max(time.time(), self.server.link_free)
                self.server.link_free = start + n / self.server.upload_bps
                until = self.server.link_free
            time.sleep(max(0.0, until - time.time()))
            part = self.rfile.read(n)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def forward(self, head, body):
        if self.server.delay_s:  # latency
            time.sleep(self.server.delay_s)
        up = socket.create_connection(self.server.upstream, timeout=30)
        try:
            out = [head[0]]
            for line in head[1:]:
                if line.split(b":", 1)[0].strip().lower() in (b"connection", b"keep-alive"):
                    continue
                out.append(line)
            out.append(b"Connection: close\r\n\r\n")
            up.sendall(b"".join(out) + body)
            chunks = []
            while True:
                data = up.recv(1 << 16)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks)
        finally:
            up.close()

    def handle(self):
        while True:
            head = read_head(self.rfile)
            if not head:
                return
            count(head[0].split(b" ", 1)[0].decode("ascii", "replace"))
            body = self.read_body(content_length(head))
            fault = None if self.server.flip_once else self.pick()
            if fault:
                count(fault)
            if fault == "500":
                self.error_reply(500, "Internal Server Error", "InternalError")
                continue
            if fault == "503":
                self.error_reply(503, "Slow Down", "SlowDown")
                continue
            if fault == "reset":
                self.reset()
                return
            if fault == "stall":
                time.sleep(self.server.stall_s)
                self.connection.close()
                return
            reply = self.forward(head, body)
            if fault == "truncate":
                sep = reply.find(b"\r\n\r\n")
                cut = len(reply) // 2 if sep < 0 else sep + 4 + (len(reply) - sep - 4) // 2
                if cut >= len(reply):
                    cut = max(0, sep)   # no body: cut inside the headers
                self.wfile.write(reply[:cut])
                self.wfile.flush()
                self.reset()
                return
            if self.server.flip_once:
                path = head[0].split(b" ")[1] if head[0].startswith(b"GET ") else None
                if path is not None:  # each range of an object is its own read
                    path += b"".join(b" " + l.split(b":", 1)[1].strip() for l in head[1:]
                                     if l.split(b":", 1)[0].strip().lower()
                                     in (b"range", b"x-ms-range"))
                with LOCK:
                    if path is not None and path not in self.server.flipped:
                        fault = "flip"
                if fault:
                    flipped = flip_body(head, reply)
                    if flipped is not reply:
                        with LOCK:
                            self.server.flipped.add(path)
                        count("flip")
                    reply = flipped
            elif fault == "flip":
                reply = flip_body(head, reply)
            self.wfile.write(reply)
            self.wfile.flush()
            count("forwarded")
            # Upstream answered "Connection: close"; so does the client's reply.
            return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rate", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", default="500,503,reset,stall,truncate,flip")
    ap.add_argument("--stall-s", type=float, default=3.0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--flip-once", action="store_true")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--upload-bps", type=float, default=0.0)
    ap.add_argument("--stats", metavar="FILE")
    a = ap.parse_args()
    STATS_FILE[0] = a.stats
    host, _, port = a.upstream.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("faultproxy: upstream must be a loopback address")
    srv = Server(("127.0.0.1", a.port), Handler)
    if a.upload_bps:
        # connections inherit it: the kernel holds little of a body ahead
        # of the paced reads (64 KiB, doubled by the kernel)
        srv.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    srv.upstream = (host, int(port))
    srv.rate = a.rate
    srv.rng = random.Random(a.seed)
    srv.faults = [f for f in a.faults.split(",") if f]
    srv.stall_s = a.stall_s
    srv.flip_once = a.flip_once
    srv.flipped = set()
    srv.delay_s = a.delay_ms / 1000.0
    srv.upload_bps = a.upload_bps
    srv.link_free = 0.0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print("faultproxy: %s" % STATS, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
