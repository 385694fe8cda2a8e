# fleet's canary traffic on one host (fleet.deploy.judge reads what it prints): requests to the server on this
# host's loopback at a fixed rate, streamed, each timed as a client sees it; or, with `answers`, the greedy
# answers to prompts (fleet.deploy.numerics). The API key is read from its file, never an argument.
# Usage: python -c TEXT load PORT KEYFILE SECONDS RATE SEED   -> one JSON line a request:
#            [at, prompt_tokens, output_tokens, ttft, e2e] (ttft and e2e null for a failed request)
#        python -c TEXT answers PORT KEYFILE TOKENS PROMPT...
#            -> one JSON line a prompt: {"prompt": ..., "output_ids": [...]} (output_ids null on failure)
import http.client, json, random, sys, threading, time

LENGTHS = ((64, 16), (128, 32), (256, 64), (512, 128), (1024, 32), (128, 256))
WORDS = "the river runs past a town where people trade grain and stories at the market".split()


def headers(keyfile):
    out = {"content-type": "application/json"}
    try:
        key = open(keyfile).read().strip() if keyfile != "-" else ""
    except OSError:
        key = ""
    if key:
        out["authorization"] = "Bearer " + key
    return out


def post(port, head, body, timeout):
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    conn.request("POST", "/generate", json.dumps(body), head)
    return conn, conn.getresponse()


def one(port, head, prompt, max_new, start, out, lock):
    sent = time.monotonic()
    ttft = e2e = None
    tokens = prompt_tokens = 0
    try:
        conn, r = post(port, head, {"text": prompt, "stream": True, "sampling_params": {
            "max_new_tokens": max_new, "ignore_eos": True, "temperature": 0}}, 300)
        if r.status == 200:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                meta = json.loads(line[5:]).get("meta_info") or {}
                if ttft is None and meta.get("completion_tokens"):
                    ttft = time.monotonic() - sent
                tokens = int(meta.get("completion_tokens") or tokens)
                prompt_tokens = int(meta.get("prompt_tokens") or prompt_tokens)
            e2e = time.monotonic() - sent if ttft is not None else None
        conn.close()
    except (OSError, ValueError, http.client.HTTPException):
        ttft = e2e = None
    times = [None, None] if ttft is None or e2e is None else [round(ttft, 6), round(e2e, 6)]
    row = [round(time.monotonic() - start, 4), prompt_tokens or len(prompt.split()), tokens, *times]
    with lock:
        out.append(row)


def load(port, keyfile, seconds, rate, seed):
    out: list = []
    threads: list = []
    head, rng, lock = headers(keyfile), random.Random(int(seed)), threading.Lock()
    start = time.monotonic()
    for i in range(int(float(seconds) * float(rate))):
        due = start + i / float(rate)
        time.sleep(max(0.0, due - time.monotonic()))
        words, max_new = rng.choice(LENGTHS)
        prompt = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(words))
        t = threading.Thread(target=one, args=(port, head, prompt, max_new, start, out, lock), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(max(1.0, 300 - (time.monotonic() - start)))
    with lock:
        for row in sorted(out):
            print(json.dumps(row))


def answers(port, keyfile, tokens, *prompts):
    head = headers(keyfile)
    for prompt in prompts:
        ids = None
        try:
            conn, r = post(port, head, {"text": prompt, "sampling_params": {
                "max_new_tokens": int(tokens), "temperature": 0}}, 120)
            if r.status == 200:
                ids = [int(t) for t in json.loads(r.read()).get("output_ids") or []]
            conn.close()
        except (OSError, ValueError, http.client.HTTPException):
            ids = None
        print(json.dumps({"prompt": prompt, "output_ids": ids}))


if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(*sys.argv[2:7])
    else:
        answers(*sys.argv[2:])
