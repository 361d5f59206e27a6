"""What the report scripts read from psw: project YAML files as psw reads them, in JSON.

The scripts only lay numbers out; every file they need is parsed by psw (`psw config-json`,
Note [Config files as JSON]), never by a regular expression over YAML. The binary is $PSW, or
build/cli/psw under the project root.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def psw_path():
    p = os.environ.get("PSW") or os.path.join(ROOT, "build", "cli", "psw")
    return p if os.path.exists(p) else None


def config_json(kind, path):
    """The YAML file `path` of `kind` (hardware, model, experiment, serve, serving) as JSON."""
    psw = psw_path()
    if psw is None:
        sys.exit(f"{os.path.basename(sys.argv[0])}: no psw binary (set PSW=build/cli/psw) to read {path}")
    out = subprocess.run([psw, "config-json", kind, path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: psw config-json {kind} {path}: {out.stderr.strip()}")
    return json.loads(out.stdout)
