#!/usr/bin/env bash
# A write-open of a FIFO blocks until a reader comes, natively; under brokered the broker opens it
# for the target in a thread of its own (it must never block itself), so the same sequences give
# the same results: writer first, reader first, many writers at once, a waiting writer killed,
# and a run that ends while a writer still waits.
. "$(dirname "$0")/../lib.sh"
require_core

both() { # both DESC SCRIPT: run SCRIPT natively in n/ and under brokered in b/; compare outputs
	local desc=$1 script=$2 nat got
	rm -rf n b && mkdir n b
	nat=$(cd n && timeout 60 sh -c "$script" 2>&1 </dev/null; echo "status=$?")
	got=$(cd b && timeout 60 "$BROKERED" run -c "$script" 2>&1 </dev/null; echo "status=$?")
	is "$got" "$nat" "$desc: same output and status as natively"
}

both "writer first, reader later" 'mkfifo p; (sleep 0.3; cat p) & echo hello > p; wait'
both "reader first (O_RDONLY blocks), writer later" 'mkfifo p; cat p & sleep 0.3; echo hello > p; wait'
both "five writers waiting at once, then a reader" '
mkfifo p
for i in 1 2 3 4 5; do (echo "w$i" > p) & done
sleep 0.3
exec 3<p
head -n 5 <&3 | sort
exec 3<&-
wait'
both "O_NONBLOCK write-open without a reader fails with ENXIO" \
	'mkfifo p; python3 -c "
import os, errno
try:
    os.open(\"p\", os.O_WRONLY | os.O_NONBLOCK)
except OSError as e:
    print(errno.errorcode[e.errno])"'
both "a waiting writer killed; the FIFO then works again" '
mkfifo p
timeout -s KILL 0.3 sh -c "echo lost > p"; echo "killed: $?"
sleep 0.5 # the broker ends the killed writer'"'"'s wait when it learns of the death, not atomically
(sleep 0.3; echo again > p) & cat p; wait'
both "O_RDWR never blocks" 'mkfifo p; exec 3<>p; echo x >&3; read -r l <&3; echo "$l"'

# A run that ends while a writer still waits for a reader: brokered ends it and exits.
mkfifo q
timeout 30 "$BROKERED" run -c '(echo never > q) & sleep 0.2; echo done' >out 2>&1 </dev/null
is "$?:$(cat out)" "0:done" "a run whose background writer still waits ends (status 0, no hang)"
# ... and leaves nothing that still holds the FIFO: a non-blocking reader sees no writer.
is "$(python3 -c '
import os
fd = os.open("q", os.O_RDONLY | os.O_NONBLOCK)
print(repr(os.read(fd, 10)))')" "b''" "  no stale writer left on the FIFO"
done_testing
