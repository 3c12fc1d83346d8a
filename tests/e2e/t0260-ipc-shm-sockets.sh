#!/usr/bin/env bash
# IPC through the file system, as natively: POSIX semaphores and shared memory (sem_open,
# shm_open: files in /dev/shm) for multiprocessing's locks, queues and pools and for
# shared_memory; the objects of other processes stay out of reach (read yes, change no). A Unix
# socket bound by a bare name, a path without symlinks or in the scratch dir reports that name back
# (getsockname), so that the address a server hands its clients works.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

# ---- multiprocessing: a pool with each start method, a lock, a queue, shared memory ----
cat >"$TEST_DIR/mp.py" <<'EOF'
import multiprocessing as mp, sys
from multiprocessing import shared_memory

def square(x):
    return x * x

def put(q, lock):
    with lock:
        q.put("from the child")

if __name__ == "__main__":
    for method in ("fork", "forkserver", "spawn"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as p:
            print(method, p.map(square, range(5)))
        q, lock = ctx.Queue(), ctx.Lock()
        c = ctx.Process(target=put, args=(q, lock))
        c.start()
        print(method, q.get(timeout=30))
        c.join()
    s = shared_memory.SharedMemory(create=True, size=64)
    s.buf[:5] = b"hello"
    t = shared_memory.SharedMemory(name=s.name)
    print(bytes(t.buf[:5]).decode())
    t.close()
    s.close()
    s.unlink()
EOF
twin_check "multiprocessing: pools, a queue and a lock (fork, forkserver, spawn), shared_memory" true \
	timeout 120 python3 "$TEST_DIR/mp.py"
# multiprocessing's resource tracker warns about semaphores or shared memory it could not remove.
! grep -q 'leaked' "$TEST_DIR/twin/$_twin/brokered.err"
ok $? "the semaphores and shared memory are removed afterwards (no leak warning)"

# ---- another process's object: readable, never changed ----
theirs=/dev/shm/brokered-test-$$
printf 'theirs\n' >"$theirs"
chmod 666 "$theirs"
cat >"$TEST_DIR/theirs.py" <<'EOF'
import os, sys
p = sys.argv[1]
print(open(p).read().strip())
for what, call in (("write", lambda: os.close(os.open(p, os.O_WRONLY))),
                   ("truncate", lambda: os.truncate(p, 0)),
                   ("unlink", lambda: os.unlink(p)),
                   ("rename", lambda: os.rename(p, p + ".moved")),
                   ("chmod", lambda: os.chmod(p, 0o600))):
    try:
        call()
        print(what, "done")
    except OSError as e:
        print(what, e.strerror)
EOF
out=$(brk run -- python3 "$TEST_DIR/theirs.py" "$theirs" 2>&1)
is "$out" "theirs
write Permission denied
truncate Permission denied
unlink Permission denied
rename Permission denied
chmod Permission denied" "another process's object in /dev/shm: read, but not written, truncated, removed, renamed or chmod-ed"
is "$(cat "$theirs"; stat -c %a "$theirs")" "theirs
666" "  and it is unchanged"
audit_grep open "$theirs" '' | grep -q 'rule=shm:not-ours'
ok $? "  the audit log says why (rule=shm:not-ours)"
rm -f "$theirs"
# The command's own objects need no backup: nothing of them in the turn.
brk run -- python3 -c 'import os; f = os.open("/dev/shm/brokered-own-'$$'", os.O_RDWR | os.O_CREAT, 0o600); os.write(f, b"x"); os.unlink("/dev/shm/brokered-own-'$$'")'
ok $? "the command creates, writes and removes an object of its own"
[ ! -e /dev/shm/brokered-own-$$ ]
ok $? "  and it is gone"
brk undo </dev/null >/dev/null 2>&1
[ ! -e /dev/shm/brokered-own-$$ ]
ok $? "  undo does not bring it back (shared memory is not part of the turn)"

# A workspace in /dev/shm (a tmpfs) is a workspace like any other: changes backed up, undone.
shmws=$(mktemp -d /dev/shm/brokered-ws.XXXXXX)
printf 'before\n' >"$shmws/f"
(cd "$shmws" && "$BROKERED" run -- sh -c 'printf after >f && mkdir d && touch d/new' && "$BROKERED" undo </dev/null >/dev/null 2>&1)
ok $? "a workspace in /dev/shm: the command changes it, undo"
is "$(cd "$shmws" && ls; cat f)" "f
before" "  and undo gives it back"
rm -rf "$shmws"

# ---- Unix sockets: the name as bound ----
cat >"$TEST_DIR/sock.py" <<'EOF'
import os, socket, threading
def serve(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    name = s.getsockname()
    def answer():
        c, _ = s.accept()
        c.sendall(c.recv(10).upper())
        c.close()
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(name)  # the address the server reports, as a client would get it
        c.sendall(b"ping")
        got = c.recv(10).decode()
    except OSError as e:
        got = "connect: " + os.strerror(e.errno)
    name = name.replace(os.environ.get("TMPDIR", "/nowhere"), "$TMPDIR")
    print(name.replace(os.getcwd(), "$PWD"), got)
    t.join(30)
serve("here.sock")
serve(os.path.join(os.environ["TMPDIR"], "scratch.sock"))
serve(os.path.join(os.getcwd(), "absolute.sock"))
os.mkdir("sub")
serve("sub/relative.sock")
from multiprocessing.connection import Listener
with Listener(family="AF_UNIX") as l:
    print("listener in $TMPDIR:", l.address.startswith(os.environ["TMPDIR"] + "/"))
EOF
mkdir -p "$TEST_DIR/tmp"
export TMPDIR=$TEST_DIR/tmp # natively; brokered gives the command its scratch dir
twin_check "getsockname of a socket bound by a bare name, an absolute and a relative path, in \$TMPDIR; multiprocessing's Listener" true \
	python3 "$TEST_DIR/sock.py"

done_testing
