#!/bin/bash
# median wall ms of N runs of a command
med() { local n=$1; shift; local ts=(); for i in $(seq $n); do s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); ts+=($(( (e-s)/1000000 ))); done; printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(( (n+1)/2 ))p"; }
cd /work/main
echo "python -c pass: $(med 9 .venv/bin/python -c pass) ms"
echo "palace recall (embeddings): $(med 9 .venv/bin/palace --palace example-palace recall 'why add jitter to retries' --format json) ms"
echo "palace recall (lexical only): $(PALACE_HOME=/tmp/no-models med 9 env PALACE_HOME=/tmp/no-models .venv/bin/palace --palace example-palace recall 'why add jitter to retries' --format json) ms"
echo "palace --help: $(med 9 .venv/bin/palace --help) ms"
