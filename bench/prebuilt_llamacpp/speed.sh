#!/bin/bash
# interleaved: py-sync, compiled, py-sync, compiled; study job paused for the duration
kill -STOP $(cat /tmp/study.pid) 2>/dev/null
trap 'kill -CONT $(cat /tmp/study.pid) 2>/dev/null' EXIT
cd /tmp/pscmp
for r in 1 2; do
  SKIP_BRUTE=1 /tmp/pysync-venv/bin/python brute.py sync 8 2>/dev/null | grep "tokens/s"
  SKIP_BRUTE=1 /work/main/.venv/bin/python brute.py compiled 8 2>/dev/null | grep "tokens/s"
done
