"""The requests of examples/python-openai.py with Python's standard library only (no `pip install`), against a
running fhirgate (`npm start` in another terminal): what the `openai` SDK sends and reads, written out.

    python3 examples/python-http.py

Settings (environment): FHIRGATE_URL (default http://127.0.0.1:8103/), TOKEN (a Medplum access token; default: a new
one from `npm run -s token`, run in this checkout), PROJECT_ID (default: the demo project), PATIENT_ID (default: Maria
Lopez of the demo project).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FHIRGATE_URL = os.environ.get("FHIRGATE_URL", "http://127.0.0.1:8103/").rstrip("/")
PROJECT_ID = os.environ.get("PROJECT_ID", "a1f0c0de-0000-4000-8000-000000000001")
PATIENT_ID = os.environ.get("PATIENT_ID", "a1f0c0de-0000-4000-8000-000000000301")


def current_token() -> str:
    """A Medplum access token (valid an hour): TOKEN, or a new one from `npm run -s token`."""
    if os.environ.get("TOKEN"):
        return os.environ["TOKEN"]
    checkout = Path(__file__).resolve().parent.parent
    printed = subprocess.run(["npm", "run", "-s", "token"], cwd=checkout, check=True, capture_output=True, text=True)
    return printed.stdout.strip()


TOKEN = current_token()


def call(method: str, path: str, body: dict[str, Any] | None = None) -> urllib.request.Request:
    """A request to fhirgate's /v1, with the two headers every client sends: the token and the project."""
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Project-ID": PROJECT_ID, "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    return urllib.request.Request(f"{FHIRGATE_URL}/v1{path}", data=data, headers=headers, method=method)


def send(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON answer; an error status raises urllib's HTTPError, whose body is fhirgate's {"error": {...}}."""
    with urllib.request.urlopen(call(method, path, body)) as answer:
        return json.load(answer)


def stream(path: str, body: dict[str, Any]) -> Iterator[Any]:
    """The `data:` events of a Server-Sent Events answer, until `data: [DONE]`."""
    with urllib.request.urlopen(call("POST", path, {**body, "stream": True})) as answer:
        for line in answer:
            text = line.decode().strip()
            if text == "data: [DONE]":
                return
            if text.startswith("data: "):
                yield json.loads(text[len("data: "):])


model = send("GET", "/models")["data"][0]["id"]

# 1. Chat completions: fhirgate's own fields (patient_id, conversation_id) are keys of the body.
first = send(
    "POST",
    "/chat/completions",
    {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a careful clinical assistant."},
            {"role": "user", "content": "What should I check at the next visit?"},
        ],
        "patient_id": PATIENT_ID,
    },
)
conversation_id = first["conversation_id"]
print(f"answer:        {first['choices'][0]['message']['content']}")
print(f"conversation:  {conversation_id}")

# 2. The same conversation continued, streamed.
print("streamed:      ", end="")
for chunk in stream("/chat/completions", {"model": model, "messages": [{"role": "user", "content": "And which labs?"}], "conversation_id": conversation_id}):
    if chunk["choices"]:
        print(chunk["choices"][0]["delta"].get("content") or "", end="", flush=True)
print()


def output_text(response: dict[str, Any]) -> str:
    """A Response object's text, as the SDK's `output_text` joins it."""
    return "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"] if part["type"] == "output_text")


# 3. The Responses API, a chain continued with previous_response_id.
response = send("POST", "/responses", {"model": model, "instructions": "Answer briefly.", "input": "Remember 7."})
follow_up = send("POST", "/responses", {"model": model, "input": "And 8?", "previous_response_id": response["id"]})
print(f"response:      {output_text(response)}")
print(f"continued:     {output_text(follow_up)}")
print(f"same thread:   {follow_up['conversation']['id'] == response['conversation']['id']}")
