# shellcheck shell=bash
W_NAME=build
W_DESC="build: make -j2 of $(n 30) C files + link"
W_CMD='make -s -j2 >/dev/null'
W_TARGET='native 1.05'
w_prepare() {
	local i k nf
	nf=$(n 30)
	mkdir -p "$1/src"
	for ((i = 0; i < nf; i++)); do
		{
			printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n'
			printf 'struct s%d { int a; double b; char name[32]; };\n' "$i"
			for ((k = 0; k < 12; k++)); do
				printf 'static int g%d_%d(struct s%d *p, int x) { for (int j = 0; j < x; j++) p->a += j * %d; snprintf(p->name, sizeof p->name, "%%d", p->a); return p->a + (int)strlen(p->name); }\n' "$i" "$k" "$i" "$k"
			done
			printf 'int f%d(int x) { struct s%d v = {0}; int r = 0;' "$i" "$i"
			for ((k = 0; k < 12; k++)); do printf ' r += g%d_%d(&v, x);' "$i" "$k"; done
			printf ' return r; }\n'
		} >"$1/src/f$i.c"
	done
	{
		printf 'int main(void) { int r = 0;'
		for ((i = 0; i < nf; i++)); do printf ' { extern int f%d(int); r += f%d(3); }' "$i" "$i"; done
		printf ' return r == 42; }\n'
	} >"$1/src/main.c"
	# -pipe: no temporary files in /tmp (read-only under bubblewrap's --ro-bind / /)
	cat >"$1/Makefile" <<'MK'
CFLAGS = -O2 -pipe -Wall
SRCS = $(wildcard src/*.c)
OBJS = $(SRCS:src/%.c=obj/%.o)
prog: $(OBJS)
	$(CC) -o $@ $(OBJS)
obj/%.o: src/%.c | obj
	$(CC) $(CFLAGS) -c -o $@ $<
obj:
	mkdir -p obj
MK
}
