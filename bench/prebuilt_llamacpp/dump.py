# Evidence script for docs/judges.md "A prebuilt llama.cpp for the first run?" (paths as run on 2026-12-02).
# shared venv: the compiled backend's prompt, token ids and label log-probs (trie) on the default judge
import json
import sys

sys.path.insert(0, "/work/wt/firstrun/tests")
from trustjudge.backends import get_backend
from trustjudge.backends._base import LabelRequest

b = get_backend("llamacpp/qwen2.5-coder-1.5b")
out = []
for text in ("It is four.", "4", "The answer is 5 because 2+2 makes five."):
    user = f"Question: What is 2+2?\nResponse: {text}\nRate the response from 1 to 10. Reply with the score followed by ]."
    prompt = b.format_prompt("You are a strict grader.", user, "Score: ")
    labels = tuple(f"{i}]" for i in range(1, 11))
    b.reset_cache()
    lps = b.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    out.append({"ids": b._encode(prompt), "labels": [b._encode_label(l) for l in labels], "trie": list(lps)})
json.dump(out, open("/tmp/pscmp/cases.json", "w"))
print(b.fingerprint() if hasattr(b, "fingerprint") else "", [len(c["ids"]) for c in out])
