#!/bin/sh
# guardvalidate.sh MARKS is the validate command of TestGuard: for the
# loop titled "validate" it writes its pid to MARKS/<id>.validate and
# sleeps: a validate command running when the daemon dies.
set -u
marks=$1
echo $$ >"$marks/$LOOPR_LOOP_ID.validate.tmp" && mv "$marks/$LOOPR_LOOP_ID.validate.tmp" "$marks/$LOOPR_LOOP_ID.validate"
exec sleep 300
