#!/usr/bin/env bash
# Everyday file changes inside the workspace, done by bash, dash, GNU coreutils, busybox (static),
# absolute-path binaries, python3 and perl: each gives the same result as without brokered (status,
# stdout, file set, types, modes, contents, link targets, and mtimes where the command sets them)
# and leaves an audit line naming the operation and the real path.
. "$(dirname "$0")/../lib.sh"
require_core
need bash dash sed truncate dd tee

# The starting workspace of every case.
fixture() {
	printf 'hello\nworld\n' >f
	printf 'other\n' >g
	mkdir -p sub/deeper empty
	printf 'a\n' >sub/a
	printf 'b\n' >sub/deeper/b
	printf '#!/bin/sh\necho x\n' >x
	chmod 755 x
	chmod 640 g
	ln -s f lnk
}

# name ~ audit ops (ERE) ~ path the audit line must name (relative; "-": no audit check) ~ command
# "@" stands for the tool prefix of the implementation ("", "/bin/busybox ", "/usr/bin/").
CASES='
redirect~open~f~echo x > f
append~open~f~echo y >> f
redirect-new~open~n~echo x > n
noclobber~open~-~set -C; echo x > f
cp-new~open~h~@cp f h
cp-over~open~g~@cp f g
cp-r~open~copy/deeper/b~@cp -r sub copy
mv-over~rename~g~@mv f g
mv-dir~rename~moved~@mv sub moved
sed-i~rename~f~@sed -i s/hello/bye/ f
truncate-0~open|truncate~f~@truncate -s 0 f
truncate-grow~open|truncate~f~@truncate -s 100 f
dd~open~h~@dd if=f of=h 2>/dev/null
dd-notrunc~open~g~@dd if=f of=g conv=notrunc 2>/dev/null
tee~open~h~echo teed | @tee h
tee-a~open~f~echo teed | @tee -a f
rm~unlink~f~@rm f
rm-link~unlink~lnk~@rm lnk
rm-r~unlink|rmdir~sub~@rm -r sub
rm-rf-missing~unlink~-~@rm -rf not-there
rmdir~unlink|rmdir~empty~@rmdir empty
rmdir-nonempty~unlink|rmdir~-~@rmdir sub
mkdir~mkdir~d~@mkdir d
mkdir-p~mkdir~new/deep/er~@mkdir -p new/deep/er
mkdir-exists~mkdir~-~@mkdir sub
ln~link~hl~@ln f hl
ln-s~symlink~sl~@ln -s f sl
ln-sf~symlink|rename~lnk~@ln -sf g lnk
chmod~chmod~f~@chmod 600 f
chmod-x~chmod~x~@chmod 700 x
chmod-R~chmod~sub/a~@chmod -R go-rwx sub
touch-new~open|utimes|mknod~t~@touch t
touch-old~utimes|open~f~@touch f
touch-t-mtime~utimes|open~f~@touch -t 200109090146.40 f
mkfifo~mknod~p~@mkfifo p
'

# impl | shell to run the command with | tool prefix
IMPLS="bash+coreutils|bash|
dash+coreutils|dash|
busybox|/bin/busybox sh|/bin/busybox 
absolute-paths|bash|/usr/bin/"

while IFS='|' read -r impl shell prefix; do
	case $impl in busybox) [ -x /bin/busybox ] || { skip "$impl" "no /bin/busybox"; continue; } ;; esac
	i=-1
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		IFS='~' read -r name ops rel cmd <<<"$line"
		i=$((i + 1))
		in_sample "$impl" "$i" "$cmd" || continue
		cmd=${cmd//@/$prefix}
		# shellcheck disable=SC2086
		twin_check "$impl: $name ($cmd)" fixture $shell -c "$cmd"
		if [ "$rel" != - ]; then
			audit_names "$ops" "$TWIN_BRK/$rel" allow
			ok $? "$impl: $name: audit line op=$ops names $TWIN_BRK/$rel"
		fi
		case $name in *-mtime)
			is "$(stat -c %Y "$TWIN_BRK/$rel")" "$(stat -c %Y "$TWIN_NAT/$rel")" "$impl: $name: mtime as native" ;;
		esac
	done <<<"$CASES"
done <<<"$IMPLS"

# ---- audit accuracy of refused-by-the-file-system attempts on allowed paths ----
# The policy allows the workspace; an attempt that fails because the target exists must still be
# logged, with its result, and not as a policy denial.
twin_check "mkdir on an existing name" fixture mkdir f
line=$(audit_grep mkdir "$TWIN_BRK/f" '')
case $line in *" result=EEXIST "*) ok 0 "mkdir existing: audit line with result=EEXIST" ;;
*) ok 1 "mkdir existing: audit line with result=EEXIST"; printf '#   got: %s\n' "$line" ;; esac
case $line in *" decision=allow "*) ok 0 "mkdir existing in the workspace: logged as decision=allow (policy allows it)" ;;
*) ok 1 "mkdir existing in the workspace: logged as decision=allow (policy allows it)"; printf '#   got: %s\n' "$line" ;; esac
twin_check "mv -n onto an existing name" fixture mv -n g f
line=$(audit_grep rename "$TWIN_BRK/f" '')
case $line in *" decision=allow result=EEXIST "*) ok 0 "RENAME_NOREPLACE onto an existing workspace file: logged as decision=allow, result=EEXIST" ;;
*) ok 1 "RENAME_NOREPLACE onto an existing workspace file: logged as decision=allow, result=EEXIST"; printf '#   got: %s\n' "$line" ;; esac
twin_check "noclobber (O_EXCL) on an existing file" fixture sh -c 'set -C; echo x > f'
# dash and bash refuse noclobber by a stat, without any open; a real O_CREAT|O_EXCL open:
twin_check "O_CREAT|O_EXCL open of an existing file" fixture python3 -c '
import os
try:
    os.open("f", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
except OSError as e:
    print(e.strerror)'
line=$(audit_grep open "$TWIN_BRK/f" '')
case $line in *" result=EEXIST "*) ok 0 "O_CREAT|O_EXCL on an existing file: logged with result=EEXIST" ;;
*) ok 1 "O_CREAT|O_EXCL on an existing file: logged with result=EEXIST"; printf '#   got: %q\n' "$line" ;; esac

# mkdir -p with an absolute path: busybox creates every component from "/" on and relies on
# mkdir("/") failing with EEXIST, as the kernel answers.
if [ -x /bin/busybox ]; then
	twin_check "busybox mkdir -p ABSOLUTE-PATH" fixture sh -c '/bin/busybox mkdir -p "$PWD/abs/deep"'
fi
twin_check "mkdir of /, ., .. and an existing dir: errno as native" fixture python3 -c '
import os
for p in ["/", ".", "..", "sub", "sub/.", "sub/.."]:
    try:
        os.mkdir(p)
    except OSError as e:
        print(p, e.strerror)'

# cp -p / mv keep mode and times
twin_check "cp -p keeps mode and mtime" fixture sh -c 'touch -t 200001010000 g && cp -p g kept'
is "$(stat -c '%a %Y' "$TWIN_BRK/kept")" "$(stat -c '%a %Y' "$TWIN_NAT/kept")" "cp -p: mode and mtime as native"

# ---- python3 ----
if command -v python3 >/dev/null 2>&1; then
	PYCASES='
open-w~open~f~open("f","w").write("py\n")
open-a~open~f~open("f","a").write("more\n")
open-x~open~n~open("n","x").write("new\n")
open-r+~open~g~fh=open("g","r+"); fh.seek(2); fh.write("XX"); fh.close()
pathlib~open~p.txt~import pathlib; pathlib.Path("p.txt").write_text("pl\n")
os.replace~rename~g~import os; os.replace("f","g")
os.rename~rename~renamed~import os; os.rename("f","renamed")
os.truncate~truncate|open~f~import os; os.truncate("f", 3)
ftruncate~open~f~import os; fd=os.open("f", os.O_RDWR); os.ftruncate(fd, 1); os.close(fd)
mmap~open~f~import mmap; fh=open("f","r+b"); m=mmap.mmap(fh.fileno(),0); m[0:5]=b"HELLO"; m.flush(); m.close(); fh.close()
os.remove~unlink~f~import os; os.remove("f")
rmtree~unlink|rmdir~sub~import shutil; shutil.rmtree("sub")
makedirs~mkdir~a/b/c~import os; os.makedirs("a/b/c")
os.rmdir~unlink|rmdir~empty~import os; os.rmdir("empty")
os.symlink~symlink~s~import os; os.symlink("g","s")
os.link~link~hl~import os; os.link("g","hl")
os.chmod~chmod~g~import os; os.chmod("g", 0o604)
os.utime-mtime~utimes~g~import os; os.utime("g", (1, 1000000000))
copy2-mtime~open~c~import os, shutil; os.utime("g", (1, 1000000000)); shutil.copy2("g","c")
mkfifo~mknod~fifo~import os; os.mkfifo("fifo")
'
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		IFS='~' read -r name ops rel code <<<"$line"
		twin_check "python3: $name" fixture python3 -c "$code"
		audit_names "$ops" "$TWIN_BRK/$rel" allow
		ok $? "python3: $name: audit line op=$ops names $TWIN_BRK/$rel"
		case $name in *-mtime)
			is "$(stat -c %Y "$TWIN_BRK/$rel")" "$(stat -c %Y "$TWIN_NAT/$rel")" "python3: $name: mtime as native" ;;
		esac
	done <<<"$PYCASES"
else
	skip "python3 cases" "python3 not installed"
fi

# ---- perl ----
if command -v perl >/dev/null 2>&1; then
	twin_check "perl -i -pe" fixture perl -i -pe 's/hello/bye/' f
	audit_names 'rename|open|unlink' "$TWIN_BRK/f" allow
	ok $? "perl -i: audit line names $TWIN_BRK/f"
	twin_check "perl -i.bak -pe" fixture perl -i.bak -pe 's/world/there/' f
	audit_names 'rename|open|link' "$TWIN_BRK/f.bak" allow
	ok $? "perl -i.bak: audit line names the backup $TWIN_BRK/f.bak"
	twin_check "perl open >" fixture perl -e 'open(my $h, ">", "f") or die "$!"; print $h "pl\n"; close $h or die'
	audit_names open "$TWIN_BRK/f" allow
	ok $? "perl open >: audit line"
	twin_check "perl unlink/mkdir/rename/chmod/symlink/utime" fixture perl -e '
		unlink "f" or die "unlink $!"; mkdir "d" or die "mkdir $!"; rename "g", "h" or die "rename $!";
		chmod 0700, "x" or die "chmod $!"; symlink "h", "s" or die "symlink $!";
		utime 1, 1000000000, "h" or die "utime $!"; rmdir "empty" or die "rmdir $!"'
	is "$(stat -c %Y "$TWIN_BRK/h")" 1000000000 "perl utime: mtime set"
	for pair in unlink:f mkdir:d rename:h chmod:x symlink:s utimes:h 'unlink|rmdir:empty'; do
		audit_names "${pair%%:*}" "$TWIN_BRK/${pair##*:}" allow
		ok $? "perl: audit line op=${pair%%:*} names ${pair##*:}"
	done
else
	skip "perl cases" "perl not installed"
fi

done_testing
