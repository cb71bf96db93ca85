#!/bin/sh
# diffagent.sh is the scripted agent of the `loopr diff` end-to-end test: a
# plan of 1 spec, 1 phase and 3 tasks, each task writing known files:
#
#   Alpha   alpha.go (3 lines, new) and a line appended to README.md
#   Beta    "beta notes.txt" (2 lines, new: a name with a space)
#   Gamma   gamma.go (1 line) and out/gamma.txt saying BROKEN, which
#           validate.sh rejects every time: it fails, its branch stays
set -u
cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case $LOOPR_LOOP_TYPE in
plan | spec | phase) mkdir -p "$(dirname "$LOOPR_ARTIFACT")" ;;
esac
case $LOOPR_LOOP_TYPE in
plan) printf '# Plan: %s\n\n## Specs\n\n### Spec 1: Storage\n\nKeep things.\n' "$title" >"$LOOPR_ARTIFACT" ;;
spec) printf '# Spec: %s\n\n## Phases\n\n### Phase 1: Groundwork\n\nLay it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
phase) printf '# Phase: %s\n\n## Tasks\n\n### Task 1: Alpha\n\nA.\n\n### Task 2: Beta\n\nB.\n\n### Task 3: Gamma\n\nC.\n' "$title" >"$LOOPR_ARTIFACT" ;;
*)
	case $title in
	Alpha)
		printf 'package alpha\n\nconst Name = "alpha"\n' >alpha.go
		printf 'alpha was here\n' >>README.md
		;;
	Beta) printf 'one\ntwo\n' >"beta notes.txt" ;;
	Gamma)
		printf 'package gamma\n' >gamma.go
		mkdir -p out
		printf 'BROKEN\n' >out/gamma.txt
		;;
	esac
	;;
esac
