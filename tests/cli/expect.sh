#!/usr/bin/env bash
# Usage: expect.sh EXIT_CODE REGEX -- COMMAND [ARGS...]
# Runs COMMAND; passes when it exits with EXIT_CODE and its combined output matches the
# extended regular expression REGEX. Prints what it got otherwise.
set -u
expected_code=$1
pattern=$2
shift 3
output=$("$@" 2>&1)
code=$?
if [[ $code -ne $expected_code ]]; then
  echo "FAIL: expected exit code $expected_code, got $code"
  echo "command: $*"
  echo "output:"; echo "$output"
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "FAIL: output does not match /$pattern/"
  echo "command: $*"
  echo "output:"; echo "$output"
  exit 1
fi
echo "ok: exit $code, output matches /$pattern/"
