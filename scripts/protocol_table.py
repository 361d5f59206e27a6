#!/usr/bin/env python3
"""Turns the protocol benchmark's JSON (Google Benchmark) into the table of results/protocol.md."""
import json
import sys

NAMES = {8192: "8 KB (BERT-base's tokens)", 4816896: "4.8 MB (ResNet-152, batch 8)",
         8582496: "8.6 MB (Inception-v3, batch 8)"}


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        kind, _, arg = b["name"].partition("/")  # e.g. BM_GrpcRawInfer/4816896/iterations:20/real_time
        size = int(arg.split("/")[0])
        unit = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
        rows.setdefault(size, {})[kind] = b | {"ms": b["real_time"] * unit}
    print("| input | gRPC call | to server | front end | to client | generated stub, input copied | psw / stub "
          "| socket there and back | memcpy there and back | gRPC / socket |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sorted(rows):
        r = rows[size]
        g, c = r["BM_GrpcRawInfer"], r["BM_GrpcRawInferStubCopied"]
        s, m = r["BM_UnixSocketRoundTrip"], r["BM_MemcpyRoundTrip"]
        print(f"| {NAMES.get(size, f'{size:,} bytes')} | {g['ms']:.3f} | {g['to_server_ms']:.3f} | {g['front_end_ms']:.3f} "
              f"| {g['to_client_ms']:.3f} | {c['ms']:.3f} | {g['ms'] / c['ms']:.2f} | {s['ms']:.3f} | {m['ms']:.3f} "
              f"| {g['ms'] / s['ms']:.1f} |")
    if not all("BM_GrpcRawInferSpaced" in r and "BM_MemcpyRoundTripSpaced" in r for r in rows.values()):
        return
    print()
    print("The same psw call and memcpy with the host idle for 150 ms before each (20 each), as cold requests "
          "come, against the back-to-back medians above; `held`: the same again with the host's CPU wake-up "
          "latency held at 0 (Note [CPU wake-up latency]: idle CPUs poll instead of halting):")
    print()
    print("| input | gRPC call, 150 ms apart | to server | front end | to client | ÷ back to back "
          "| held | ÷ not held | memcpy there and back, 150 ms apart | ÷ back to back | held |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    skipped = set()
    for size in sorted(rows):
        r = rows[size]
        g, gs = r["BM_GrpcRawInfer"], r["BM_GrpcRawInferSpaced"]
        m, ms = r["BM_MemcpyRoundTrip"], r["BM_MemcpyRoundTripSpaced"]
        gh, mh = r.get("BM_GrpcRawInferSpacedHeld"), r.get("BM_MemcpyRoundTripSpacedHeld")
        for h in (gh, mh):
            if h is not None and h.get("error_occurred"):
                skipped.add(h.get("error_message", "skipped"))
        held_ok = lambda h: h is not None and not h.get("error_occurred")
        gh_cells = f"{gh['ms']:.3f} | {gh['ms'] / gs['ms']:.2f}" if held_ok(gh) else "- | -"
        mh_cell = f"{mh['ms']:.3f}" if held_ok(mh) else "-"
        print(f"| {NAMES.get(size, f'{size:,} bytes')} | {gs['ms']:.3f} | {gs['to_server_ms']:.3f} "
              f"| {gs['front_end_ms']:.3f} | {gs['to_client_ms']:.3f} | {gs['ms'] / g['ms']:.2f} "
              f"| {gh_cells} | {ms['ms']:.3f} | {ms['ms'] / m['ms']:.2f} | {mh_cell} |")
    for message in sorted(skipped):
        print()
        print(f"Not held: {message}")
    if not all("BM_RestBinaryInfer" in r and "BM_RestBinaryInferSpaced" in r for r in rows.values()):
        return  # a run from before the REST calls were measured
    print()
    print("The same call through the REST front end on loopback TCP, the input and the output as binary tensor data "
          "after their JSON headers (cpp-httplib's client, one kept-alive connection), timed whole, back to back and "
          "150 ms apart, against psw's gRPC call above:")
    print()
    print("| input | gRPC call | REST call | REST / gRPC | gRPC call, 150 ms apart | REST call, 150 ms apart | REST / gRPC |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for size in sorted(rows):
        r = rows[size]
        g, gs = r["BM_GrpcRawInfer"], r["BM_GrpcRawInferSpaced"]
        h, hs = r["BM_RestBinaryInfer"], r["BM_RestBinaryInferSpaced"]
        print(f"| {NAMES.get(size, f'{size:,} bytes')} | {g['ms']:.3f} | {h['ms']:.3f} | {h['ms'] / g['ms']:.2f} "
              f"| {gs['ms']:.3f} | {hs['ms']:.3f} | {hs['ms'] / gs['ms']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
