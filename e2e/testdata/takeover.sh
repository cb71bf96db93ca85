#!/bin/sh
# The "interactive agent" of TestAttachUnderTmux (attach_args): it reads a
# line from the terminal and writes it to manual.txt in its cwd.
printf 'take over: type a line: '
read -r line
printf '%s\n' "$line" > manual.txt
echo "wrote manual.txt"
