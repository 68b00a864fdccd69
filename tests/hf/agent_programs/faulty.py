"""A program that fails in the way its first argument names, after one model call (so the gateway saw it)."""

import json
import os
import subprocess
import sys
import time

import openai

fault = sys.argv[1]
json.load(sys.stdin)
openai.OpenAI(max_retries=0).chat.completions.create(model=os.environ["AGENTRL_MODEL"],
                                                     messages=[{"role": "user", "content": "hi"}])
if fault == "exit":
    print("something went wrong in the harness", file=sys.stderr)
    sys.exit(3)
if fault == "no-outcome":
    print()
if fault == "not-json":
    print("done: source fixed")
if fault == "not-an-object":
    print(json.dumps(["def f(): pass"]))
if fault == "no-source":
    print(json.dumps({"patch": "..."}))
if fault == "hang":
    # a child of its own that would outlive it, the test's marker on its command line
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[2]])
    time.sleep(600)
