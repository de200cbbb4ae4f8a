#!/usr/bin/env python3
"""Hostile traffic for the fault campaign (bench/chaos): fuzzed messages, a
slowloris and a flood, sent to sipedge's SIP port.

    hostile.py fuzz --target IP:PORT --count N --rate R --seeds PATH... [--tcp-share F] [--seed S]
    hostile.py slowloris --target IP:PORT --sources IP,IP,... --conns N --secs S
    hostile.py flood --target IP:PORT --source IP --rate R --secs S

Each prints one line of key=value figures on stdout when done.

fuzz mutates the seed messages (Go fuzz corpus files, `go test fuzz v1`
with []byte("...") or string("...") values, and raw .dat messages such as
the RFC 4475 torture tests) and sends N of them at R a second: most as UDP
datagrams, a share (--tcp-share, 0.1) over TCP connections, twenty
messages a connection, from 127.0.0.1. Mutations: bit flips, bytes that
matter to SIP (NUL, CR, LF, ':', ';', '<', '"', 0xff), cut, repeated and
swapped spans, truncation, a wrong or huge Content-Length, a header 5 KB
long, 100 Vias, a torn or missing blank line, two messages in one, a new
Call-ID, random bytes. The same --seed gives the same messages.

slowloris opens --conns TCP connections, spread over --sources (local
addresses to bind, e.g. 127.0.0.2), and on each sends the head of an
INVITE one byte a second, never finishing it; a connection the server
closes is counted (with how long it lived) and opened again at the next
second, until --secs pass. A connection refused or closed before its first byte counts as
refused.

flood sends SIP OPTIONS datagrams, each with its own Call-ID, from
--source at --rate a second for --secs seconds.
"""

import argparse
import glob
import os
import random
import re
import selectors
import socket
import sys
import time

GO_VALUE = re.compile(rb'(?:\[\]byte|string)\("((?:[^"\\]|\\.)*)"\)')


def go_unquote(s):
    """Decodes the body of a Go interpreted string literal."""
    out = bytearray()
    i = 0
    simple = {ord("a"): 7, ord("b"): 8, ord("f"): 12, ord("n"): 10, ord("r"): 13,
              ord("t"): 9, ord("v"): 11, ord("\\"): 92, ord("'"): 39, ord('"'): 34}
    while i < len(s):
        c = s[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == ord("x"):
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif e in (ord("u"), ord("U")):
            n = 4 if e == ord("u") else 8
            out += chr(int(s[i + 2:i + 2 + n], 16)).encode("utf-8", "surrogatepass")
            i += 2 + n
        else:  # octal \ooo
            out.append(int(s[i + 1:i + 4], 8) & 0xFF)
            i += 4
    return bytes(out)


def load_seeds(paths):
    seeds = []
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "**", "*"), recursive=True)) if os.path.isdir(p) else [p]
    for f in files:
        if not os.path.isfile(f) or f.endswith((".md", ".go", ".sh")):
            continue
        data = open(f, "rb").read()
        if data.startswith(b"go test fuzz v1"):
            seeds += [go_unquote(m.group(1)) for m in GO_VALUE.finditer(data)]
        else:
            seeds.append(data)
    return [s for s in seeds if len(s) > 8]


NASTY = [b"\x00", b"\r", b"\n", b"\r\n", b":", b";", b"<", b">", b'"', b"%", b"\xff", b" ", b"\t", b",", b"@", b"[", b"]"]
HEADERS = [
    b"Via: SIP/2.0/UDP [::1:5060;branch=z9hG4bKx",
    b"Via: SIP/2.0/UDP 999.999.999.999:99999;rport=70000",
    b"CSeq: 4294967296 INVITE",
    b"CSeq: -1 ACK",
    b"Max-Forwards: -1",
    b"Max-Forwards: 0",
    b"Content-Length: -5",
    b"Content-Length: 99999999999999999999",
    b"Expires: 99999999999999999999",
    b"From: <sip:a@b>",
    b"To: <sip:a@b>;tag=x;tag=y",
    b"Route: <sip:127.0.0.1;lr>,<sip:10.0.0.1;lr>",
    b"Call-ID: ",
    b"Contact: *",
    b"Contact: <sip:a@b>;expires=-1",
    b"Content-Type: multipart/mixed;boundary=",
    b"Authorization: Digest username=\"a\", nonce=, response",
]


def mutate(rng, msg):
    m = bytearray(msg)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(15)
        n = len(m)
        if n == 0:
            m += b"INVITE"
            continue
        if k == 0:  # bit flips
            for _ in range(rng.randint(1, 8)):
                m[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif k == 1:  # a byte that matters
            i = rng.randrange(n + 1)
            m[i:i] = rng.choice(NASTY)
        elif k == 2:  # cut a span
            i = rng.randrange(n)
            del m[i:i + rng.randint(1, 64)]
        elif k == 3:  # repeat a span
            i = rng.randrange(n)
            span = m[i:i + rng.randint(1, 128)]
            m[i:i] = span * rng.randint(1, 8)
        elif k == 4:  # truncate
            del m[rng.randrange(n):]
        elif k == 5:  # Content-Length
            v = rng.choice([b"0", b"1", b"-1", b"65536", b"4294967297", b"99999999999999999999", b"1e3", b""])
            m = bytearray(re.sub(rb"(?im)^(content-length|l)\s*:.*$", b"Content-Length: " + v, bytes(m), count=1))
        elif k == 6:  # a long header
            i = m.find(b"\r\n")
            m[i + 2:i + 2] = b"X-Long: " + b"a" * rng.choice([1000, 4096, 5000, 20000]) + b"\r\n"
        elif k == 7:  # many Vias
            i = m.find(b"\r\n")
            m[i + 2:i + 2] = b"Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK%d\r\n" % rng.randrange(1 << 30) * rng.choice([70, 100, 300])
        elif k == 8:  # line endings
            m = bytearray(bytes(m).replace(b"\r\n\r\n", rng.choice([b"\r\n", b"\n\n", b"\r\r", b"\r\n \r\n"]), 1))
        elif k == 9:  # a nasty header
            i = m.find(b"\r\n")
            m[i + 2:i + 2] = rng.choice(HEADERS) + b"\r\n"
        elif k == 10:  # two messages in one
            m += bytes(m[: rng.randrange(n)])
        elif k == 11:  # swap two spans
            i, j = sorted(rng.randrange(n) for _ in range(2))
            a, b = m[i:i + 16], m[j:j + 16]
            m[j:j + 16], m[i:i + 16] = a, b
        elif k == 12:  # random bytes
            i = rng.randrange(n)
            m[i:i + rng.randint(1, 32)] = rng.randbytes(rng.randint(1, 32))
        elif k == 13:  # start line
            i = m.find(b" ")
            if i > 0:
                m[:i] = rng.choice([b"INVITE", b"ACK", b"BYE", b"CANCEL", b"OPTIONS", b"SIP/2.0", b"INVIT\x00E", b"invite", b"X" * 300, b""])
        else:
            break
    # A new Call-ID half the time, so that mutants do not all land on one
    # transaction.
    if rng.random() < 0.5:
        m = bytearray(re.sub(rb"(?im)^(call-id|i)\s*:.*$", b"Call-ID: fz%d@h" % rng.randrange(1 << 40), bytes(m), count=1))
    return bytes(m[:65000])


def host_port(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


def fuzz(a):
    rng = random.Random(a.seed)
    seeds = load_seeds(a.seeds)
    if not seeds:
        sys.exit("hostile.py: no seed messages in %s" % a.seeds)
    target = host_port(a.target)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    sent = udp_sent = tcp_sent = responses = tcp_conns = tcp_refused = 0
    t0 = time.monotonic()
    batch = []
    while sent < a.count:
        msg = mutate(rng, rng.choice(seeds))
        if rng.random() < a.tcp_share:
            batch.append(msg)
            if len(batch) == 20 or sent + 1 == a.count:
                tcp_conns += 1
                try:
                    c = socket.create_connection(target, timeout=2)
                    c.sendall(b"".join(batch))
                    c.settimeout(0.05)
                    try:
                        while c.recv(65536):
                            responses += 1
                    except OSError:
                        pass
                    c.close()
                except OSError:
                    tcp_refused += 1
                tcp_sent += len(batch)
                batch = []
        else:
            try:
                udp.sendto(msg, target)
            except OSError:
                pass
            udp_sent += 1
        sent += 1
        while True:
            try:
                udp.recv(65536)
                responses += 1
            except OSError:
                break
        ahead = sent / a.rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    time.sleep(0.5)
    while True:
        try:
            udp.recv(65536)
            responses += 1
        except OSError:
            break
    print("sent=%d udp=%d tcp=%d tcp_connections=%d tcp_refused=%d responses=%d seeds=%d secs=%.1f" % (
        sent, udp_sent, tcp_sent, tcp_conns, tcp_refused, responses, len(seeds), time.monotonic() - t0))


SLOW_HEAD = (b"INVITE sip:12025550123@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.2:5060;branch=z9hG4bKslow\r\n"
             b"From: <sip:slow@127.0.0.2>;tag=1\r\nTo: <sip:12025550123@127.0.0.1>\r\nCall-ID: slow@h\r\n" + b"X-Slow: " + b"a" * 100000)


def slowloris(a):
    target = host_port(a.target)
    sources = a.sources.split(",")
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> [opened at, bytes sent]
    opened = refused = closed = reopen = 0
    lives = []
    t0 = time.monotonic()

    def open_one(i):
        nonlocal opened, refused
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((sources[i % len(sources)], 0))
            s.settimeout(2)
            s.connect(target)
            s.setblocking(False)
        except OSError:
            refused += 1
            s.close()
            return
        opened += 1
        conns[s] = [time.monotonic(), 0]
        sel.register(s, selectors.EVENT_READ)

    for i in range(a.conns):
        open_one(i)
    next_byte = time.monotonic()
    i = a.conns
    while time.monotonic() - t0 < a.secs:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                at, n = conns.pop(s)
                sel.unregister(s)
                s.close()
                if n == 0:
                    refused += 1
                else:
                    closed += 1
                    lives.append(time.monotonic() - at)
                reopen += 1
        if time.monotonic() >= next_byte:
            next_byte += 1
            for _ in range(reopen):
                open_one(i)
                i += 1
            reopen = 0
            for s, st in list(conns.items()):
                try:
                    s.send(SLOW_HEAD[st[1]:st[1] + 1])
                    st[1] += 1
                except OSError:
                    pass
    now = time.monotonic()
    still = [now - st[0] for st in conns.values()]
    print("opened=%d refused=%d closed_by_server=%d max_life=%.1f still_open=%d oldest_open=%.1f" % (
        opened, refused, closed, max(lives, default=0), len(still), max(still, default=0)))


def flood(a):
    target = host_port(a.target)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.source, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    port = s.getsockname()[1]
    head = ("OPTIONS sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP %s:%d;branch=z9hG4bKfl" % (a.source, port)).encode()
    tail = ("\r\nFrom: <sip:flood@%s>;tag=f\r\nTo: <sip:127.0.0.1>\r\nCall-ID: fl%%d@h\r\nCSeq: 1 OPTIONS\r\n"
            "Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n" % a.source)
    sent = errors = 0
    t0 = time.monotonic()
    end = t0 + a.secs
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - t0) * a.rate)
        while sent < due:
            try:
                s.sendto(head + b"%d" % sent + (tail % sent).encode(), target)
            except OSError:
                errors += 1
            sent += 1
        time.sleep(0.001)
    print("sent=%d errors=%d secs=%.1f" % (sent, errors, time.monotonic() - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fuzz")
    f.add_argument("--target", required=True)
    f.add_argument("--count", type=int, default=20000)
    f.add_argument("--rate", type=float, default=2000)
    f.add_argument("--seeds", nargs="+", required=True)
    f.add_argument("--tcp-share", type=float, default=0.1)
    f.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("slowloris")
    s.add_argument("--target", required=True)
    s.add_argument("--sources", default="127.0.0.2")
    s.add_argument("--conns", type=int, default=200)
    s.add_argument("--secs", type=float, default=10)
    fl = sub.add_parser("flood")
    fl.add_argument("--target", required=True)
    fl.add_argument("--source", default="127.0.0.9")
    fl.add_argument("--rate", type=float, default=20000)
    fl.add_argument("--secs", type=float, default=5)
    a = ap.parse_args()
    {"fuzz": fuzz, "slowloris": slowloris, "flood": flood}[a.cmd](a)


if __name__ == "__main__":
    main()
