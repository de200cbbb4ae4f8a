#!/usr/bin/env python3
"""A routing API that fails on demand, for the fault campaign (bench/chaos).

    lcrstub.py --listen 127.0.0.1:PORT --route CARRIER:GROUP [--mode MODE]

Answers sipedge's LCR requests (POST, any path; docs/lcr-api.md) with one
route, {"carrier_id": CARRIER, "gateway_group": GROUP}, and
"cache_ttl_secs": --ttl (default 0: sipedge asks again for every call), or
fails the way MODE says:

    ok        answer at once
    slow:MS   answer after MS milliseconds
    hang      read the request and never answer (the connection stays open
              until the client gives up)
    garbage   answer 200 with a body that is not a valid decision, a
              different one each time (not JSON, truncated JSON, wrong
              types, 2 MiB of JSON, HTML, a route without a carrier, an
              empty body, a negative rate, no routes), or a 500, or a
              302; --garbage-from N starts at the Nth

POST /_mode with the new MODE as the body switches modes at run time;
GET /_stats answers "requests=N answered=N" (answered counts valid
decisions sent). "Down" is not a mode: the campaign stops this process and
starts it again on the same port.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The garbage answers, in the order they are sent. sipedge's circuit
# breaker lets about six requests through in a 5 s fault, so the two
# garbage faults start at different places (--garbage-from).
GARBAGE = [
    (200, b"this is not json"),
    (200, b'{"routes": [{"carrier_id": "x", "gateway_group"'),
    (200, b'{"routes": "carrier-a"}'),
    (200, b'{"routes": [' + b'{"carrier_id": "x", "next_hop": "127.0.0.1:9"},' * 45000 + b"{}]}"),
    (200, b"<html><body>502 Bad Gateway</body></html>"),
    (200, b'{"routes": [{"gateway_group": "carrier-a"}]}'),
    (200, b""),
    (200, b'{"routes": [{"carrier_id": "x", "gateway_group": "carrier-a", "rate": -1}]}'),
    (200, b'{"cache_ttl_secs": 60}'),
    (500, b'{"error": "database is down"}'),
    (200, b"\x00\xff\xfe garbage \x1b[0m"),
    (302, b""),
]


class State:
    def __init__(self, mode, body, garbage_from):
        self.lock = threading.Lock()
        self.mode = mode
        self.body = body
        self.requests = 0
        self.answered = 0
        self.garbage = garbage_from


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as sipedge's client expects

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if code == 302:
            self.send_header("Location", "http://127.0.0.1:9/route")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.server.state
        if self.path == "/_stats":
            with st.lock:
                text = "requests=%d answered=%d mode=%s\n" % (st.requests, st.answered, st.mode)
            self.reply(200, text.encode(), "text/plain")
        else:
            self.reply(404, b"{}")

    def do_POST(self):
        st = self.server.state
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if self.path == "/_mode":
            with st.lock:
                st.mode = body.decode().strip()
            self.reply(200, b"ok\n", "text/plain")
            return
        with st.lock:
            st.requests += 1
            mode = st.mode
        if mode == "hang":
            # Hold the connection, answering nothing, until the client
            # closes it (or an hour passes).
            self.close_connection = True
            try:
                self.connection.settimeout(3600)
                while self.connection.recv(4096):
                    pass
            except OSError:
                pass
            return
        if mode.startswith("slow:"):
            time.sleep(int(mode[5:]) / 1000)
        elif mode == "garbage":
            with st.lock:
                code, junk = GARBAGE[st.garbage % len(GARBAGE)]
                st.garbage += 1
            self.reply(code, junk)
            return
        elif mode != "ok":
            self.reply(500, b'{"error": "unknown stub mode"}')
            return
        try:
            json.loads(body)
        except ValueError:
            self.reply(400, b'{"error": "not json"}')
            return
        with st.lock:
            st.answered += 1
        self.reply(200, st.body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="IP:PORT")
    ap.add_argument("--route", required=True, help="CARRIER:GROUP, the one route answered")
    ap.add_argument("--ttl", type=int, default=0, help="cache_ttl_secs of the answers")
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--garbage-from", type=int, default=0, help="the first garbage answer (0-%d)" % (len(GARBAGE) - 1))
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    carrier, group = a.route.split(":", 1)
    body = json.dumps({"routes": [{"carrier_id": carrier, "gateway_group": group, "rate": 0.004}],
                       "cache_ttl_secs": a.ttl}).encode()
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 256
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.state = State(a.mode, body, a.garbage_from)
    print("lcrstub: listening on %s, mode %s" % (a.listen, a.mode), file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
