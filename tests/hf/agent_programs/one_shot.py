"""A user's own agent program, run as a process: one model call with the issue and the edit menu, then the edit
the reply names (if any) is the submitted source. Stands in for any harness that speaks the OpenAI API."""

import json
import os
import sys

import openai

given = json.load(sys.stdin)
task, menu = given["task"], given["input"]["edits"]
client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY come from the gateway
reply = client.chat.completions.create(
    model=os.environ["AGENTRL_MODEL"],
    messages=[{"role": "user", "content": f"{task['issue']}\nEdits: {', '.join(menu)}"}],
).choices[0].message.content or ""
print("the model said:", reply)  # a program's own output: only the last line is its outcome
chosen = next((name for name in menu if name in reply), None)
print(json.dumps({"source": menu[chosen] if chosen else given["input"]["source"]}))
