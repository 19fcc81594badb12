#!/bin/sh
# Embed a PTX file in C: tools/embed_ptx.sh SYMBOL FILE.ptx > FILE.c
# The PTX is ASCII; each line becomes a string literal, the whole a NUL-terminated array.
printf '/* generated from %s by tools/embed_ptx.sh; do not edit */\n' "$2"
printf 'const char %s[] =\n' "$1"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/\\n"/' "$2"
printf ';\n'
