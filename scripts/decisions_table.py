#!/usr/bin/env python3
"""Tabulates the decision replays of GPU runs (psw replay-decisions --format json, one per
server: scripts/gpu-serve.sh writes them as serve-NAME.replay.json in its raw folder) as Markdown,
each raw folder's environment (its environment.md) above its rows. Formatting only: the replay
and its verdict are psw's.

    scripts/decisions_table.py RAW_DIR... [--out FILE]
"""
import argparse
import json
import pathlib
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=pathlib.Path, nargs="+")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    parts = ["# Decisions of psw serve replayed through the scheduling policy\n",
             "Produced by `scripts/decisions_table.py` from the `*.replay.json` that `scripts/gpu-serve.sh` "
             "writes for every server it stops (`psw replay-decisions --format json` of the server's "
             "`--decisions` log). A difference names the log's line and the first action that differs.\n"]
    total = 0
    for raw in args.raw:
        replays = sorted(raw.rglob("*.replay.json"))
        if not replays:
            print(f"{raw}: no *.replay.json", file=sys.stderr)
            return 1
        parts.append(f"## {raw.name}\n")
        environment = raw / "environment.md"
        if environment.exists():
            parts.append(environment.read_text().strip() + "\n")
        parts.append("| server | events | actions | first difference |\n|---|---:|---:|---|")
        for path in replays:
            replay = json.loads(path.read_text())
            name = path.name.removesuffix(".replay.json")
            where = replay.get("difference", {}).get("where", "")
            parts.append(f"| {name} | {replay['events']:,} | {replay['actions']:,} | "
                         f"{'none' if replay['identical'] else 'at ' + where} |")
            total += 1
        parts.append("")
    text = "\n".join(parts) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())
