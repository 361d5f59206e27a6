#!/usr/bin/env python3
"""Tabulates the decision replays of a GPU run (psw replay-decisions --format json, one per
server: scripts/gpu-serve.sh writes them as serve-NAME.replay.json) as Markdown. Formatting only:
the replay and its verdict are psw's.

    scripts/decisions_table.py RAW_DIR [--out FILE]
"""
import argparse
import json
import pathlib
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    rows = []
    for path in sorted(args.raw.rglob("*.replay.json")):
        replay = json.loads(path.read_text())
        name = path.name.removesuffix(".replay.json")
        where = replay.get("difference", {}).get("where", "")
        rows.append(f"| {name} | {replay['events']} | {replay['actions']} | "
                    f"{'none' if replay['identical'] else 'at ' + where} |")
    if not rows:
        print(f"{args.raw}: no *.replay.json", file=sys.stderr)
        return 1
    text = "| server | events | actions | first difference |\n|---|---:|---:|---|\n" + "\n".join(rows) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
