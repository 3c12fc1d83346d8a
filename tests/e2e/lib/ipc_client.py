# SPDX-License-Identifier: MIT
"""A client of the broker socket written from the protocol description (DESIGN section 5), for the
end-to-end tests: Python's socket module only, no code shared with brokered."""
import array
import json
import os
import socket
import sys

READ = "com.workbuddy.sandbox.read"
WRITE = "com.workbuddy.sandbox.read-write"


class Conn:
    def __init__(self, path, timeout=10.0):
        import time
        deadline = time.monotonic() + timeout
        while True:
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.settimeout(timeout)
            try:
                self.s.connect(path)
                break
            except BlockingIOError:  # the listen backlog is full: the broker is busy
                self.s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.buf = b""
        self.fds = []

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.s.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

    def line(self):
        """One answer line (bytes, without the newline) and the fds that came with it."""
        while b"\n" not in self.buf:
            fds = array.array("i")
            msg, anc, _flags, _addr = self.s.recvmsg(65536, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                    self.fds.extend(fds)
            if not msg:
                raise EOFError("broker closed the connection")
            self.buf += msg
        line, self.buf = self.buf.split(b"\n", 1)
        fds, self.fds = self.fds, []
        return line, fds

    def token(self, cls, path, session, tool_call="tc", flags=None, mode=None):
        fields = [cls, path, session, tool_call]
        if flags is not None or mode is not None:
            fields += [flags or "-", mode or "-"]
        self.send(("\t".join(fields) + "\n").encode("utf-8", "surrogateescape"))
        line, fds = self.line()
        fd = fds[0] if fds else None
        for extra in fds[1:]:
            os.close(extra)
        return line.decode(), fd

    def request(self, obj):
        self.send(json.dumps(obj) + "\n")
        line, fds = self.line()
        for fd in fds:
            os.close(fd)
        return json.loads(line)


class Tap:
    """PASS/FAIL lines that the shell turns into TAP (tests/lib.sh ok)."""

    def __init__(self):
        self.failed = 0

    def ok(self, cond, desc, detail=None):
        print(("PASS " if cond else "FAIL ") + desc.replace("\n", " "), flush=True)
        if not cond:
            self.failed += 1
            if detail is not None:
                print("# " + repr(detail)[:400], flush=True)
        return cond

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, {"got": got, "want": want})


def fd_path(fd):
    return os.readlink("/proc/self/fd/%d" % fd)


def fd_mode(fd):
    import fcntl
    acc = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    return {os.O_RDONLY: "r", os.O_WRONLY: "w", os.O_RDWR: "rw"}[acc]


if __name__ == "__main__":
    # ipc_client.py SOCKET LINE: send one raw line, print the answer (debugging aid)
    c = Conn(sys.argv[1])
    c.send(sys.argv[2] + "\n")
    print(c.line()[0].decode())
