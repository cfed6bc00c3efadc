#!/usr/bin/env python3
"""mock_s3.py -- a small in-memory S3 for the tests, stricter than s3rver.

    mock_s3.py --bucket B [--region R] [--access-key AK --secret-key SK]
               [--token T] [--page N] [--skew-once S] [--complete-error-once]

Listens on a free loopback port and prints "PORT <n>". Path-style only.
Unlike s3rver it:
  - verifies every request's Signature V4 with its own implementation
    (canonical request rebuilt from what arrived on the wire), the
    x-amz-content-sha256 against the body, Content-MD5 on PUT and
    POST ?delete, x-amz-checksum-crc32c on PUT, and x-amz-security-token
    when --token is given; a body sent UNSIGNED-PAYLOAD must carry one of
    the two checksums (ckpt's contract: never an unchecked body);
  - answers a request signed for another region with 400
    AuthorizationHeaderMalformed and x-amz-bucket-region (region discovery);
  - enforces If-None-Match: * and If-Match on PUT and
    CompleteMultipartUpload (412, 404);
  - with --skew-once S, runs its clock S seconds ahead: the first request
    gets 403 RequestTimeTooSkewed, later ones must be dated within 15 min;
  - with --complete-error-once, answers the first CompleteMultipartUpload
    with "200 OK" and an InternalError inside the body;
  - pages listings by --page keys (default 1000) with opaque tokens that
    need URL encoding;
  - with --imds, also serves IMDSv2 role credentials under /latest/ whose
    session token changes at every fetch and expires --role-ttl seconds
    later (requests with an unknown or expired token are refused);
  - with --tls-cert/--tls-key, speaks HTTPS;
  - records each object's x-amz-storage-class and server-side encryption
    headers, and the most requests it ever had in flight at once; an
    unsigned GET /__mock/state returns them as JSON (for the tests),
    with the number of ranged GETs (Range: bytes=A-B, answered 206);
  - with --gcs, behaves as the GCS XML API does where it differs (start it
    with --region auto): conditional writes only through
    x-goog-if-generation-match (0 = must not exist, N = generation N),
    S3's If-None-Match/If-Match refused, every object carries a
    generation (x-goog-generation), no multi-object delete.
Stdlib only; loopback only.
"""
import argparse
import base64
import calendar
import hashlib
import hmac
import json
import re
import signal
import ssl
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
OBJECTS = {}      # key -> (bytes, etag, mtime)
UPLOADS = {}      # upload id -> {part number: bytes}
ATTRS = {}        # key -> {"class": ..., "sse": ..., "kms": ...} as last PUT
INFLIGHT = {"now": 0, "max": 0}
GENERATIONS = {}  # key -> generation of its current version (--gcs)
STATE = {"skew_pending": False, "complete_error_pending": False, "uploads": 0,
         "role_fetches": 0, "role_tokens": {}}
ARGS = None


def q(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def new_generation(key):
    """A new version of key (GCS generation numbers grow); caller holds LOCK."""
    STATE["generation"] = STATE.get("generation", 1000) + 1
    GENERATIONS[key] = STATE["generation"]
    return STATE["generation"]


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC32C (Castagnoli), as x-amz-checksum-crc32c carries it."""
    c = 0xFFFFFFFF
    t = CRC32C_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def hmac256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def xml_reply(root_xml):
    return ('<?xml version="1.0" encoding="UTF-8"?>' + root_xml).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def now(self):
        return time.time() + ARGS.skew_once

    def date_time_string(self, timestamp=None):
        # send_response() writes the Date header from this: the mock's clock.
        return formatdate(self.now(), usegmt=True)

    def send(self, status, body=b"", headers=None, head_only=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head_only and body:
            self.wfile.write(body)

    def error(self, status, code, extra=None):
        body = xml_reply("<Error><Code>%s</Code><Message>mock</Message></Error>" % code)
        self.send(status, body, dict({"Content-Type": "application/xml"}, **(extra or {})),
                  head_only=self.command == "HEAD")

    # ---- Signature V4, rebuilt from the wire ----
    def check_sig(self, body):
        auth = self.headers.get("Authorization", "")
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request,"
                     r"\s*SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$", auth)
        if not m:
            return self.error(403, "AccessDenied") or False
        ak, day, region, signed, sig = m.groups()
        if ak != ARGS.access_key:
            return self.error(403, "InvalidAccessKeyId") or False
        if region != ARGS.region:
            return self.error(400, "AuthorizationHeaderMalformed",
                              {"x-amz-bucket-region": ARGS.region}) or False
        amz = self.headers.get("x-amz-date", "")
        try:
            t = calendar.timegm(time.strptime(amz, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            return self.error(403, "AccessDenied") or False
        with LOCK:
            skew_first = STATE["skew_pending"]
            STATE["skew_pending"] = False
        if skew_first or abs(t - self.now()) > 900:
            return self.error(403, "RequestTimeTooSkewed") or False
        names = signed.split(";")
        if "host" not in names or "x-amz-date" not in names or \
                "x-amz-content-sha256" not in names:
            return self.error(403, "AccessDenied") or False
        if ARGS.token and (self.headers.get("x-amz-security-token") != ARGS.token or
                           "x-amz-security-token" not in names):
            return self.error(403, "InvalidToken") or False
        if ARGS.imds:
            tok = self.headers.get("x-amz-security-token")
            with LOCK:
                exp = STATE["role_tokens"].get(tok)
            if exp is None or exp < time.time() or "x-amz-security-token" not in names:
                return self.error(400, "ExpiredToken") or False
        phash = self.headers.get("x-amz-content-sha256", "")
        if phash != "UNSIGNED-PAYLOAD" and phash != hashlib.sha256(body).hexdigest():
            return self.error(400, "XAmzContentSHA256Mismatch") or False
        path, _, query = self.path.partition("?")
        curi = q(urllib.parse.unquote(path), safe="/-_.~")
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        cquery = "&".join(k + "=" + v for k, v in sorted((q(k), q(v)) for k, v in pairs))
        hlines = []
        for n in names:
            vals = self.headers.get_all(n) or []
            hlines.append("%s:%s\n" % (n, ",".join(" ".join(v.split()) for v in vals)))
        creq = "\n".join([self.command, curi, cquery, "".join(hlines), signed, phash])
        scope = "%s/%s/s3/aws4_request" % (day, region)
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        k = hmac256(("AWS4" + ARGS.secret_key).encode(), day)
        k = hmac256(k, region)
        k = hmac256(k, "s3")
        k = hmac256(k, "aws4_request")
        want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, sig):
            sys.stderr.write("mock_s3: signature mismatch\n%s\n" % creq)
            return self.error(403, "SignatureDoesNotMatch") or False
        return True

    def check_md5(self, body, required):
        md5 = self.headers.get("Content-MD5")
        crc = self.headers.get("x-amz-checksum-crc32c")
        if crc is not None:
            if base64.b64encode(crc32c(body).to_bytes(4, "big")).decode() != crc:
                self.error(400, "BadDigest")
                return False
            if md5 is None and not required:
                return True
        if md5 is None:
            unchecked = body and self.headers.get("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"
            if required or (unchecked and crc is None):
                self.error(400, "InvalidRequest")
                return False
            return True
        if base64.b64encode(hashlib.md5(body).digest()).decode() != md5:
            self.error(400, "BadDigest")
            return False
        return True

    def conditions(self, key):
        """412/404 per If-None-Match / If-Match; None when they pass."""
        cur = OBJECTS.get(key)
        if ARGS.gcs:
            if self.headers.get("If-None-Match") or self.headers.get("If-Match"):
                return (400, "InvalidArgument")
            want = self.headers.get("x-goog-if-generation-match")
            if want is None:
                return None
            have = GENERATIONS.get(key, 0) if cur is not None else 0
            if not want.isdigit() or int(want) != have:
                return (412, "PreconditionFailed")
            return None
        inm = self.headers.get("If-None-Match")
        im = self.headers.get("If-Match")
        if inm == "*" and cur is not None:
            return (412, "PreconditionFailed")
        if im is not None:
            if cur is None:
                return (404, "NoSuchKey")
            if im.strip() != cur[1]:
                return (412, "PreconditionFailed")
        return None

    def imds(self):
        """EC2 instance metadata: IMDSv2 token and role credentials whose
        session token rotates at every fetch and expires --role-ttl later."""
        path = self.path
        if path == "/latest/api/token" and self.command == "PUT":
            if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return self.send(400)
            return self.send(200, b"imds-session-token")
        if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
            return self.send(401)
        if path == "/latest/meta-data/iam/security-credentials/":
            return self.send(200, b"ckpt-role")
        if path == "/latest/meta-data/iam/security-credentials/ckpt-role":
            with LOCK:
                STATE["role_fetches"] += 1
                tok = "role-token-%d" % STATE["role_fetches"]
                exp = time.time() + ARGS.role_ttl
                STATE["role_tokens"][tok] = exp
            doc = ('{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "%s", '
                   '"SecretAccessKey": "%s", "Token": "%s", "Expiration": "%s"}'
                   % (ARGS.access_key, ARGS.secret_key, tok,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))))
            return self.send(200, doc.encode())
        return self.send(404)

    def route(self):
        if ARGS.imds and self.path.startswith("/latest/"):
            return self.imds()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if not self.check_sig(body):
            return
        path, _, query = self.path.partition("?")
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        parts = urllib.parse.unquote(path).lstrip("/").split("/", 1)
        if parts[0] != ARGS.bucket:
            return self.error(404, "NoSuchBucket")
        key = parts[1] if len(parts) > 1 else ""
        cmd = self.command
        if not key:
            if cmd == "GET" and params.get("list-type") == "2":
                return self.list(params)
            if cmd == "POST" and "delete" in params and not ARGS.gcs:
                return self.delete_many(body)
            return self.error(400, "InvalidRequest")
        if cmd == "PUT" and "uploadId" in params:
            if not self.check_md5(body, False):
                return
            with LOCK:
                up = UPLOADS.get(params["uploadId"])
                if up is None:
                    return self.error(404, "NoSuchUpload")
                up[int(params["partNumber"])] = body
            return self.send(200, headers={"ETag": '"%s"' % hashlib.md5(body).hexdigest()})
        if cmd == "PUT":
            if not self.check_md5(body, False):
                return
            with LOCK:
                bad = self.conditions(key)
                if bad:
                    return self.error(*bad)
                etag = '"%s"' % hashlib.md5(body).hexdigest()
                OBJECTS[key] = (body, etag, self.now())
                self.attrs(key)
                gen = new_generation(key)
            return self.send(200, headers={"ETag": etag, "x-goog-generation": str(gen)})
        if cmd == "POST" and "uploads" in params:
            with LOCK:
                STATE["uploads"] += 1
                uid = base64.b64encode(b"up+/%d=" % STATE["uploads"]).decode() + "+/="
                UPLOADS[uid] = {}
                self.attrs(key)
            return self.send(200, xml_reply(
                "<InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key>"
                "<UploadId>%s</UploadId></InitiateMultipartUploadResult>"
                % (ARGS.bucket, key, uid)))
        if cmd == "POST" and "uploadId" in params:
            return self.complete(key, params["uploadId"], body)
        if cmd == "DELETE" and "uploadId" in params:
            with LOCK:
                UPLOADS.pop(params["uploadId"], None)
            return self.send(204)
        if cmd in ("GET", "HEAD"):
            with LOCK:
                cur = OBJECTS.get(key)
                gen = GENERATIONS.get(key, 0)
            if cur is None:
                return self.error(404, "NoSuchKey")
            rng = self.headers.get("Range")
            if cmd == "GET" and rng:
                # "bytes=A-B" only (what ckpt sends); past the end: 416
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng.strip())
                if not m or int(m.group(1)) > int(m.group(2)):
                    return self.error(400, "InvalidArgument")
                a, b = int(m.group(1)), int(m.group(2))
                if a >= len(cur[0]):
                    return self.error(416, "InvalidRange")
                b = min(b, len(cur[0]) - 1)
                with LOCK:
                    STATE["range_gets"] = STATE.get("range_gets", 0) + 1
                return self.send(206, cur[0][a:b + 1], {
                    "ETag": cur[1], "x-goog-generation": str(gen),
                    "Content-Range": "bytes %d-%d/%d" % (a, b, len(cur[0]))})
            return self.send(200, cur[0], {"ETag": cur[1], "x-goog-generation": str(gen)},
                             head_only=cmd == "HEAD")
        if cmd == "DELETE":
            with LOCK:
                OBJECTS.pop(key, None)
            return self.send(204)
        return self.error(405, "MethodNotAllowed")

    def complete(self, key, uid, body):
        with LOCK:
            if STATE["complete_error_pending"]:
                STATE["complete_error_pending"] = False
                return self.send(200, xml_reply(
                    "\n\n<Error><Code>InternalError</Code><Message>mock</Message></Error>"))
            up = UPLOADS.get(uid)
            if up is None:
                return self.error(404, "NoSuchUpload")
            root = ET.fromstring(body)
            nums = [int(p.findtext("PartNumber")) for p in root.iter("Part")]
            tags = [p.findtext("ETag") for p in root.iter("Part")]
            if nums != sorted(nums) or any(n not in up for n in nums):
                return self.error(400, "InvalidPart")
            for n, t in zip(nums, tags):
                if t != '"%s"' % hashlib.md5(up[n]).hexdigest():
                    return self.error(400, "InvalidPart")
            bad = self.conditions(key)
            if bad:
                return self.error(*bad)
            data = b"".join(up[n] for n in nums)
            etag = '"%s-%d"' % (hashlib.md5(b"".join(
                hashlib.md5(up[n]).digest() for n in nums)).hexdigest(), len(nums))
            OBJECTS[key] = (data, etag, self.now())
            new_generation(key)
            del UPLOADS[uid]
        return self.send(200, xml_reply(
            "<CompleteMultipartUploadResult><Key>%s</Key><ETag>%s</ETag>"
            "</CompleteMultipartUploadResult>" % (key, etag.replace('"', "&quot;"))))

    def list(self, params):
        prefix = params.get("prefix", "")
        page = min(int(params.get("max-keys", "1000")), ARGS.page)
        start = params.get("continuation-token")
        if start is not None:
            start = base64.b64decode(start[:-3]).decode()
        with LOCK:
            keys = sorted(k for k in OBJECTS if k.startswith(prefix) and
                          (start is None or k > start))
            items = [(k, OBJECTS[k]) for k in keys[:page]]
        trunc = len(keys) > page
        out = ["<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
               "<IsTruncated>%s</IsTruncated>"
               % (ARGS.bucket, prefix, len(items), "true" if trunc else "false")]
        if trunc:
            tok = base64.b64encode(items[-1][0].encode()).decode() + "+/="
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % tok)
        for k, (data, etag, mt) in items:
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified>"
                       "<ETag>%s</ETag><Size>%d</Size></Contents>"
                       % (k, time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mt)),
                          etag.replace('"', "&quot;"), len(data)))
        out.append("</ListBucketResult>")
        return self.send(200, xml_reply("".join(out)))

    def delete_many(self, body):
        if not self.check_md5(body, True):
            return
        root = ET.fromstring(body)
        keys = [o.text for o in root.iter() if o.tag.endswith("Key")]
        if len(keys) > 1000:
            return self.error(400, "MalformedXML")
        with LOCK:
            for k in keys:
                OBJECTS.pop(k, None)
        return self.send(200, xml_reply(
            "<DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"></DeleteResult>"))

    def counted(self):
        if self.path == "/__mock/state" and self.command == "GET":
            with LOCK:
                doc = json.dumps({"objects": ATTRS, "max_inflight": INFLIGHT["max"],
                                  "range_gets": STATE.get("range_gets", 0)})
            return self.send(200, doc.encode())
        with LOCK:
            INFLIGHT["now"] += 1
            INFLIGHT["max"] = max(INFLIGHT["max"], INFLIGHT["now"])
        try:
            return self.route()
        finally:
            with LOCK:
                INFLIGHT["now"] -= 1

    def attrs(self, key):
        """Remember the storage class and encryption a PUT asked for."""
        ATTRS[key] = {"class": self.headers.get("x-goog-storage-class" if ARGS.gcs
                                                else "x-amz-storage-class"),
                      "sse": self.headers.get("x-amz-server-side-encryption"),
                      "kms": self.headers.get("x-amz-server-side-encryption-aws-kms-key-id")}

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = counted


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--access-key", default="MOCKAK")
    ap.add_argument("--secret-key", default="mock/secret+key")
    ap.add_argument("--token", default="")
    ap.add_argument("--page", type=int, default=1000)
    ap.add_argument("--skew-once", type=int, default=0)
    ap.add_argument("--complete-error-once", action="store_true")
    ap.add_argument("--imds", action="store_true",
                    help="also serve EC2 role credentials under /latest/")
    ap.add_argument("--role-ttl", type=int, default=303)
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key")
    ap.add_argument("--gcs", action="store_true",
                    help="GCS XML API conditions and generations (with --region auto)")
    ARGS = ap.parse_args()
    STATE["skew_pending"] = ARGS.skew_once != 0
    STATE["complete_error_pending"] = ARGS.complete_error_once
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    if ARGS.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    finally:
        if ARGS.imds:
            sys.stderr.write("mock_s3: role credentials fetched %d times\n"
                             % STATE["role_fetches"])


if __name__ == "__main__":
    main()
