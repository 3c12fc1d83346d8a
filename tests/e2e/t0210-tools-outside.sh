#!/usr/bin/env bash
# The same everyday commands aimed outside the workspace (at $OUTSIDE, owned by the test's own user,
# so only brokered stands in the way): each fails with a permission error, $OUTSIDE stays
# byte-identical, and the refusal is in the audit log.
. "$(dirname "$0")/../lib.sh"
require_core
need bash dash sed truncate dd tee

(cd "$OUTSIDE" && printf 'hello\nworld\n' >f && printf 'other\n' >g && mkdir -p sub empty &&
	printf 'a\n' >sub/a && ln -s f lnk && chmod 640 g && mkfifo fifo)
O=$(cd "$OUTSIDE" && pwd -P)
printf 'ws\n' >"$WS/w"

# "%" stands for the outside directory, "@" for the tool prefix
CASES='
redirect~echo x > %/f
append~echo y >> %/f
redirect-new~echo x > %/n
cp-into~@cp w %/h
cp-over~@cp w %/g
mv-within~@mv %/f %/g
mv-out~@mv w %/moved
sed-i~@sed -i s/hello/bye/ %/f
truncate~@truncate -s 0 %/f
dd~@dd if=w of=%/h
tee~echo teed | @tee %/h
rm~@rm %/f
rm-f~@rm -f %/f
rm-r~@rm -r %/sub
rmdir~@rmdir %/empty
mkdir-p~@mkdir -p %/new/deep
ln~@ln %/f %/hl
ln-s~@ln -s f %/sl
ln-sf~@ln -sf g %/lnk
chmod~@chmod 600 %/f
chmod-dir~@chmod 700 %/sub
touch~@touch %/f
touch-new~@touch %/t
mkfifo~@mkfifo %/p
'
IMPLS="bash+coreutils|bash|
dash+coreutils|dash|
busybox|/bin/busybox sh|/bin/busybox 
absolute-paths|bash|/usr/bin/"

ndeny() {
	local e
	e=$(audit_escape "$O")
	audit_log | grep -F " decision=deny " | grep -cF -e " normalisedPath=$e/" -e " normalisedTo=$e/"
}

while IFS='|' read -r impl shell prefix; do
	case $impl in busybox) [ -x /bin/busybox ] || { skip "$impl" "no /bin/busybox"; continue; } ;; esac
	i=-1
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		IFS='~' read -r name cmd <<<"$line"
		i=$((i + 1))
		in_sample "$impl" "$i" "$cmd" || continue
		cmd=${cmd//@/$prefix}
		cmd=${cmd//%/$O}
		before=$(ndeny)
		# busybox ln -f ignores its unlink's EACCES, then symlink() meets the existing name: the
		# kernel reports EEXIST before checking write permission, natively as well.
		OUTSIDE_ERR_RE=
		[ "$impl:$name" = busybox:ln-sf ] && OUTSIDE_ERR_RE="File exists"
		# shellcheck disable=SC2086
		OUTSIDE_ERR_RE=$OUTSIDE_ERR_RE outside_check "$impl: $name" $shell -c "$cmd"
		[ "$(ndeny)" -gt "$before" ]
		ok $? "$impl: $name: a decision=deny audit line names a path in \$OUTSIDE"
		is "$(cat "$WS/w")" ws "$impl: $name: workspace source intact"
	done <<<"$CASES"
done <<<"$IMPLS"

if command -v python3 >/dev/null 2>&1; then
	for code in 'open("%/f","w")' 'open("%/f","a")' 'open("%/n","x")' 'open("%/f","r+")' \
		'import os; os.replace("%/f","%/g")' 'import os; os.truncate("%/f", 0)' \
		'import os; os.remove("%/f")' 'import os; os.mkdir("%/d")' 'import os; os.rmdir("%/empty")' \
		'import os; os.chmod("%/f", 0o600)' 'import os; os.utime("%/f", (1, 1))' \
		'import os; os.symlink("f","%/s")' 'import os; os.link("%/f","%/hl")' \
		'import shutil; shutil.rmtree("%/sub")' 'import os; os.mkfifo("%/p")' \
		'import os; os.chown("%/f", os.getuid(), os.getgid())'; do
		outside_check "python3: ${code//%/\$O}" python3 -c "${code//%/$O}"
	done
	# mmap of an outside file: read-only works, a shared writable mapping must not be obtainable
	out=$(cd "$WS" && "$BROKERED" run -- python3 -c "
import mmap
fh = open('$O/f', 'rb')
m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
print(m[:5].decode())
try:
    mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    print('writable-mapping')
except OSError as e:
    print('refused', e.errno)
" 2>&1)
	is "$(printf '%s\n' "$out" | head -1)" hello "python3 mmap of an outside file: read-only mapping reads"
	case $out in *writable-mapping*) ok 1 "python3 mmap: no writable shared mapping of an outside file" ;;
	*) ok 0 "python3 mmap: no writable shared mapping of an outside file" ;; esac
else
	skip "python3 outside cases" "python3 not installed"
fi

if command -v perl >/dev/null 2>&1; then
	# perl -i warns "Can't do inplace edit ... Permission denied" and exits 0, natively as well
	OUTSIDE_STATUS_ANY=1 outside_check "perl -i" perl -i -pe 's/hello/bye/' "$O/f"
	outside_check "perl open >" perl -e 'open(my $h, ">", $ARGV[0]) or die "open: $!\n"' "$O/f"
	outside_check "perl unlink" perl -e 'unlink($ARGV[0]) or die "unlink: $!\n"' "$O/f"
	outside_check "perl rename" perl -e 'rename($ARGV[0], $ARGV[1]) or die "rename: $!\n"' "$O/f" "$O/g"
	outside_check "perl chmod" perl -e 'chmod(0600, $ARGV[0]) or die "chmod: $!\n"' "$O/f"
	outside_check "perl utime" perl -e 'utime(1, 1, $ARGV[0]) or die "utime: $!\n"' "$O/f"
else
	skip "perl outside cases" "perl not installed"
fi

# Reading outside stays possible, and copying from outside into the workspace works.
cmp_out=$(brk run -- cp "$O/f" copied 2>&1)
is "$?" 0 "cp from outside into the workspace: exit 0 ($cmp_out)"
cmp -s "$O/f" copied
ok $? "cp from outside into the workspace: same bytes"

done_testing
