#!/bin/bash
# Cold start of `palace recall`: median wall time of 9 runs, beside `python -c pass`.
# The lexical case needs a palace indexed without models: cp -r example-palace /tmp/lexp; rm -rf /tmp/lexp/.palace;
# PALACE_HOME=/tmp/no-models palace --palace /tmp/lexp index
med() { local n=$1; shift; local ts=(); for i in $(seq $n); do s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); ts+=($(( (e-s)/1000000 ))); done; printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(( (n+1)/2 ))p"; }
cd "$(dirname "$0")/.."  # the repository root, wherever it is cloned
echo "python -c pass: $(med 9 .venv/bin/python -c pass) ms"
echo "recall, embeddings: $(med 9 .venv/bin/palace --palace example-palace recall 'why add jitter to retries' --format json) ms"
echo "recall, lexical palace (no models, no vectors): $(med 9 env PALACE_HOME=/tmp/no-models .venv/bin/palace --palace /tmp/lexp recall 'why add jitter to retries' --format json) ms"
