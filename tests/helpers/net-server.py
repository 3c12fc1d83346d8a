#!/usr/bin/env python3
# A local server for the network tests: it records what it receives, so that a test can check
# that a refused client reached nothing. Listens on 127.0.0.1 only (or a Unix socket).
#
#   net-server.py unix PATH LOG          stream socket at PATH
#   net-server.py abstract NAME LOG      stream socket in the abstract namespace
#   net-server.py udp PORTFILE LOG       UDP on 127.0.0.1, a free port written to PORTFILE
#
# Each connection's bytes (or each datagram) are appended to LOG, one line per connection with
# "connection" first; LOG.ready appears once it listens. It answers "pong\n" to every connection.
import os
import socket
import sys

kind, where, log = sys.argv[1], sys.argv[2], sys.argv[3]


def record(data):
    with open(log, "ab") as f:
        f.write(data + b"\n")


if kind == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    with open(where, "w") as f:
        f.write(str(s.getsockname()[1]))
    open(log + ".ready", "w").close()
    while True:
        data, _ = s.recvfrom(65536)
        record(b"datagram " + data)

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + where if kind == "abstract" else where)
s.listen(16)
open(log + ".ready", "w").close()
while True:
    c, _ = s.accept()
    c.settimeout(5)
    got = b""
    try:
        c.sendall(b"pong\n")
        while True:
            d = c.recv(4096)
            if not d:
                break
            got += d
    except OSError:
        pass
    record(b"connection " + got)
    c.close()
