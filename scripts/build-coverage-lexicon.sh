#!/usr/bin/env bash
# Regenerates operator/dreamkeeper/data/coverage/english-words.txt.gz, the lowercase English lexicon the merge
# coverage check uses to tell ordinary lowercase words from identifiers such as "rockyl" or "xebia".
# Source: Debian's wamerican + wbritish (SCOWL, see the NOTICE beside the output). Only all-lowercase entries
# are kept (capitalised entries are proper nouns, which the check must keep protecting), plus contractions;
# possessive forms are dropped because the check strips possessives before looking a word up.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in /usr/share/dict/american-english /usr/share/dict/british-english; do
  [[ -r $f ]] || { echo "missing $f: apt-get install wamerican wbritish" >&2; exit 1; }
done
out=operator/dreamkeeper/data/coverage/english-words.txt.gz
cat /usr/share/dict/american-english /usr/share/dict/british-english \
  | grep -E "^[a-z]+('(t|ll|re|ve|d|m))?$" \
  | LC_ALL=C sort -u \
  | gzip -9n > "$out"
echo "wrote $out ($(zcat "$out" | wc -l) words)"
