"""The official `openai` Python SDK against a running fhirgate (`npm start` in another terminal):

  1. ask a question about a patient (chat completions);
  2. continue that conversation, streaming the answer (fhirgate's `conversation_id`, sent with `extra_body`);
  3. a Responses API chain continued with `previous_response_id`.

    pip install 'openai>=1.106'
    python3 examples/python-openai.py

Settings (environment): FHIRGATE_URL (default http://127.0.0.1:8103/), TOKEN (a Medplum access token; default: a new
one from `npm run -s token`, run in this checkout), PROJECT_ID (default: the demo project), PATIENT_ID (default: Maria
Lopez of the demo project). examples/python-http.py makes the same requests with Python's standard library only.
"""

import os
import subprocess
import time
from pathlib import Path

from openai import OpenAI

FHIRGATE_URL = os.environ.get("FHIRGATE_URL", "http://127.0.0.1:8103/").rstrip("/")
PROJECT_ID = os.environ.get("PROJECT_ID", "a1f0c0de-0000-4000-8000-000000000001")
PATIENT_ID = os.environ.get("PATIENT_ID", "a1f0c0de-0000-4000-8000-000000000301")


_token = {"value": "", "renew_at": 0.0}


def current_token() -> str:
    """A current Medplum access token: TOKEN, or one from `npm run -s token`, renewed before its hour is up."""
    if os.environ.get("TOKEN"):
        return os.environ["TOKEN"]
    if time.monotonic() >= _token["renew_at"]:
        checkout = Path(__file__).resolve().parent.parent
        printed = subprocess.run(["npm", "run", "-s", "token"], cwd=checkout, check=True, capture_output=True, text=True)
        _token.update(value=printed.stdout.strip(), renew_at=time.monotonic() + 50 * 60)
    return str(_token["value"])


# The SDK unchanged: the Medplum access token is the API key (a function, which the SDK calls before each request, so
# a long-running program always sends a current token), the project goes in X-Project-ID.
client = OpenAI(base_url=f"{FHIRGATE_URL}/v1", api_key=current_token, default_headers={"X-Project-ID": PROJECT_ID})
model = client.models.list().data[0].id

# 1. Chat completions. fhirgate's own request fields (patient_id, conversation_id) go in extra_body; its own answer
# fields (conversation_id, communication_id) are kept by the SDK beside OpenAI's.
first = client.chat.completions.create(
    model=model,
    messages=[
        {"role": "system", "content": "You are a careful clinical assistant."},
        {"role": "user", "content": "What should I check at the next visit?"},
    ],
    extra_body={"patient_id": PATIENT_ID},
)
conversation_id = first.to_dict()["conversation_id"]
print(f"answer:        {first.choices[0].message.content}")
print(f"conversation:  {conversation_id}")

# 2. The same conversation continued, streamed: fhirgate sends its earlier turns to the model as history.
stream = client.chat.completions.create(
    model=model,
    stream=True,
    messages=[{"role": "user", "content": "And which labs?"}],
    extra_body={"conversation_id": conversation_id},
)
print("streamed:      ", end="")
for chunk in stream:
    if chunk.choices:
        print(chunk.choices[0].delta.content or "", end="", flush=True)
print()

# 3. The Responses API: a response's id names its reply on record; previous_response_id continues its conversation.
response = client.responses.create(model=model, instructions="Answer briefly.", input="Remember 7.")
follow_up = client.responses.create(model=model, input="And 8?", previous_response_id=response.id)
print(f"response:      {response.output_text}")
print(f"continued:     {follow_up.output_text}")
print(f"same thread:   {follow_up.to_dict()['conversation']['id'] == response.to_dict()['conversation']['id']}")
