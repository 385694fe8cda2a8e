"""Serving benchmark (SIMULATED sglang 0.5.9): `python -m sglang.bench_serving ...`.

v0.5.9's arguments and result block (FACTS.md §2). It sends real HTTP requests to the server
(streaming /generate for --backend sglang, /v1/completions or /v1/chat/completions for the
OpenAI-style backends) and measures what comes back: nothing here reads the simulator's model.
Offline hosts: --dataset-name random-ids needs no download; sharegpt and random need
--dataset-path (without it the download fails, as it does on a host without internet).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse
import warnings
from dataclasses import dataclass, field
from datetime import datetime

from sglang_sim_core.engine import count_tokens

SHAREGPT_URL = (
    "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/"
    "ShareGPT_V3_unfiltered_cleaned_split.json"
)

BACKENDS = ["sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat", "lmdeploy",
            "lmdeploy-chat", "trt", "gserver", "truss"]
DATASETS = ["sharegpt", "custom", "openai", "random", "random-ids", "generated-shared-prefix", "mmmu", "image",
            "mooncake"]


class ConnectionError(OSError):  # noqa: A001 - named as requests names it, for the traceback
    pass


ConnectionError.__module__ = "requests.exceptions"


@dataclass
class Request:
    prompt: str | list[int]
    prompt_len: int
    output_len: int


@dataclass
class Output:
    success: bool = False
    generated_text: str = ""
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (wall time, tokens in this chunk)
    start: float = 0.0
    prompt_len: int = 0
    error: str = ""


def _auth_headers() -> dict[str, str]:
    key = os.environ.get("OPENAI_API_KEY")
    return {"authorization": f"Bearer {key}"} if key else {}


def _connect(base_url: str) -> tuple[http.client.HTTPConnection, str]:
    u = urllib.parse.urlsplit(base_url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    return cls(u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80), timeout=6 * 3600), u.path


def _sse_events(resp: http.client.HTTPResponse):
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def send_request(args: argparse.Namespace, base_url: str, req: Request) -> Output:
    out = Output(prompt_len=req.prompt_len)
    stream = not args.disable_stream
    ignore_eos = not args.disable_ignore_eos
    extra = json.loads(args.extra_request_body) if args.extra_request_body else {}
    if args.backend in ("sglang", "sglang-native"):
        path = "/generate"
        payload: dict = {"sampling_params": {"temperature": 0.0, "max_new_tokens": req.output_len,
                                              "ignore_eos": ignore_eos}, "stream": stream, **extra}
        payload["input_ids" if isinstance(req.prompt, list) else "text"] = req.prompt
    elif args.backend.endswith("-chat"):
        path = "/v1/chat/completions"
        payload = {"model": args.model, "messages": [{"role": "user", "content": req.prompt}], "temperature": 0.0,
                   "max_completion_tokens": req.output_len, "stream": stream, "ignore_eos": ignore_eos, **extra}
    else:
        path = "/v1/completions"
        payload = {"model": args.model, "prompt": req.prompt, "temperature": 0.0, "max_tokens": req.output_len,
                   "stream": stream, "ignore_eos": ignore_eos, **extra}
    headers = {"content-type": "application/json", **_auth_headers()}
    out.start = time.perf_counter()
    try:
        conn, prefix = _connect(base_url)
        conn.request("POST", prefix.rstrip("/") + path, body=json.dumps(payload), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            out.error = f"HTTP {resp.status}: {resp.read().decode('utf-8', 'replace')}"
            return out
        if not stream:
            data = json.loads(resp.read())
            out.latency = out.ttft = time.perf_counter() - out.start
            if path == "/generate":
                out.generated_text = data["text"]
                out.output_len = data["meta_info"]["completion_tokens"]
            else:
                choice = data["choices"][0]
                out.generated_text = choice.get("text") or (choice.get("message") or {}).get("content", "")
                out.output_len = data["usage"]["completion_tokens"]
            out.chunks.append((time.perf_counter(), out.output_len))
            out.success = True
            return out
        last = out.start
        tokens_seen = 0
        for event in _sse_events(resp):
            now = time.perf_counter()
            if path == "/generate":
                text = event.get("text", "")
                n = event.get("meta_info", {}).get("completion_tokens", tokens_seen)
                if text == out.generated_text and n == tokens_seen:
                    continue
                out.generated_text = text
            else:
                choice = (event.get("choices") or [{}])[0]
                delta = choice.get("text")
                if delta is None:
                    delta = (choice.get("delta") or {}).get("content") or ""
                usage = event.get("usage") or {}
                n = usage.get("completion_tokens", tokens_seen + (1 if delta else 0))
                if not delta and n == tokens_seen:
                    continue
                out.generated_text += delta
            if tokens_seen == 0:
                out.ttft = now - out.start
            else:
                out.itl.append(now - last)
            out.chunks.append((now, max(0, n - tokens_seen)))
            tokens_seen = n
            last = now
        out.output_len = tokens_seen
        out.latency = time.perf_counter() - out.start
        out.success = tokens_seen > 0 or req.output_len == 0
        conn.close()
    except (OSError, ValueError, http.client.HTTPException) as e:
        out.error = repr(e)
    return out


# ---------------------------------------------------------------------------------- datasets
def _download(url: str, dest: str) -> str:
    if os.path.exists(dest):
        return dest
    print(f"Downloading from {url} to {dest}")
    host = urllib.parse.urlsplit(url).hostname
    raise ConnectionError(
        f"HTTPSConnectionPool(host='{host}', port=443): Max retries exceeded with url: "
        f"{urllib.parse.urlsplit(url).path} (Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection "
        f"object at 0x7f3a2c1d5f10>: Failed to resolve '{host}' ([Errno -3] Temporary failure in name resolution)\"))"
    )


def _sharegpt(args: argparse.Namespace) -> list[Request]:
    path = args.dataset_path or _download(SHAREGPT_URL, "/tmp/ShareGPT_V3_unfiltered_cleaned_split.json")
    with open(path) as f:
        data = json.load(f)
    reqs = []
    for conv in data:
        turns = conv.get("conversations") or conv.get("conversation") or []
        if len(turns) < 2:
            continue
        prompt, completion = turns[0].get("value", ""), turns[1].get("value", "")
        out_len = args.sharegpt_output_len or max(1, count_tokens(completion))
        reqs.append(Request(prompt, max(1, count_tokens(prompt)), out_len))
        if len(reqs) >= args.num_prompts:
            break
    return reqs


def _lengths(args: argparse.Namespace, rng: random.Random) -> list[tuple[int, int]]:
    lo_in = max(int(args.random_input_len * args.random_range_ratio), 1)
    lo_out = max(int(args.random_output_len * args.random_range_ratio), 1)
    return [(rng.randint(lo_in, args.random_input_len), rng.randint(lo_out, args.random_output_len))
            for _ in range(args.num_prompts)]


def sample_requests(args: argparse.Namespace) -> list[Request]:
    rng = random.Random(args.seed)
    if args.dataset_name == "random-ids":
        return [Request([rng.randrange(100, 150000) for _ in range(n_in)], n_in, n_out)
                for n_in, n_out in _lengths(args, rng)]
    if args.dataset_name == "random":
        source = _sharegpt(args)  # random samples text out of ShareGPT
        words = " ".join(r.prompt for r in source if isinstance(r.prompt, str)).split() or ["hello"]
        reqs = []
        for n_in, n_out in _lengths(args, rng):
            start = rng.randrange(len(words))
            text = " ".join(words[(start + i) % len(words)] for i in range(n_in))
            reqs.append(Request(text, n_in, n_out))
        return reqs
    if args.dataset_name == "sharegpt":
        return _sharegpt(args)
    raise ValueError(f"Unknown dataset: {args.dataset_name}")


# ---------------------------------------------------------------------------------- metrics
def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _std(values: list[float]) -> float:
    return statistics.pstdev(values) if values else 0.0


def calculate_metrics(outputs: list[Output], duration: float, bench_start: float) -> dict:
    ok = [o for o in outputs if o.success]
    if not ok:
        warnings.warn(
            "All requests failed. This is likely due to a misconfiguration on the benchmark arguments.",
            stacklevel=2,
        )
    e2e = [o.latency * 1000 for o in ok]
    ttft = [o.ttft * 1000 for o in ok]
    tpot = [(o.latency - o.ttft) / (o.output_len - 1) * 1000 for o in ok if o.output_len > 1]
    itl = [x * 1000 for o in ok for x in o.itl]
    total_in = sum(o.prompt_len for o in ok)
    total_out = sum(o.output_len for o in ok)
    buckets: dict[int, int] = {}
    for o in ok:
        for t, n in o.chunks:
            sec = int(t - bench_start)
            buckets[sec] = buckets.get(sec, 0) + n
    events = sorted([(o.start, 1) for o in ok] + [(o.start + o.latency, -1) for o in ok])
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    duration = max(duration, 1e-9)
    return {
        "completed": len(ok),
        "total_input_tokens": total_in,
        "total_input_text_tokens": total_in,
        "total_output_tokens": total_out,
        "total_output_tokens_retokenized": sum(count_tokens(o.generated_text) for o in ok),
        "request_throughput": len(ok) / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "max_output_tokens_per_s": float(max(buckets.values(), default=0)),
        "max_concurrent_requests": peak,
        "total_throughput": (total_in + total_out) / duration,
        "concurrency": sum(o.latency for o in ok) / duration,
        "mean_e2e_latency_ms": _mean(e2e),
        "median_e2e_latency_ms": _pct(e2e, 50),
        "std_e2e_latency_ms": _std(e2e),
        "p90_e2e_latency_ms": _pct(e2e, 90),
        "p99_e2e_latency_ms": _pct(e2e, 99),
        "mean_ttft_ms": _mean(ttft),
        "median_ttft_ms": _pct(ttft, 50),
        "std_ttft_ms": _std(ttft),
        "p99_ttft_ms": _pct(ttft, 99),
        "mean_tpot_ms": _mean(tpot),
        "median_tpot_ms": _pct(tpot, 50),
        "std_tpot_ms": _std(tpot),
        "p99_tpot_ms": _pct(tpot, 99),
        "mean_itl_ms": _mean(itl),
        "median_itl_ms": _pct(itl, 50),
        "std_itl_ms": _std(itl),
        "p95_itl_ms": _pct(itl, 95),
        "p99_itl_ms": _pct(itl, 99),
        "max_itl_ms": max(itl, default=0.0),
    }


def print_result_block(args: argparse.Namespace, m: dict, duration: float) -> None:
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Backend:", args.backend))
    print("{:<40} {:<10}".format("Traffic request rate:", args.request_rate))
    print("{:<40} {:<10}".format("Max request concurrency:",
                                 args.max_concurrency if args.max_concurrency else "not set"))
    print("{:<40} {:<10}".format("Successful requests:", m["completed"]))
    print("{:<40} {:<10.2f}".format("Benchmark duration (s):", duration))
    print("{:<40} {:<10}".format("Total input tokens:", m["total_input_tokens"]))
    print("{:<40} {:<10}".format("Total input text tokens:", m["total_input_text_tokens"]))
    print("{:<40} {:<10}".format("Total generated tokens:", m["total_output_tokens"]))
    print("{:<40} {:<10}".format("Total generated tokens (retokenized):", m["total_output_tokens_retokenized"]))
    print("{:<40} {:<10.2f}".format("Request throughput (req/s):", m["request_throughput"]))
    print("{:<40} {:<10.2f}".format("Input token throughput (tok/s):", m["input_throughput"]))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", m["output_throughput"]))
    print("{:<40} {:<10.2f}".format("Peak output token throughput (tok/s):", m["max_output_tokens_per_s"]))
    print("{:<40} {:<10}".format("Peak concurrent requests:", m["max_concurrent_requests"]))
    print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", m["total_throughput"]))
    print("{:<40} {:<10.2f}".format("Concurrency:", m["concurrency"]))
    print("{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean E2E Latency (ms):", m["mean_e2e_latency_ms"]))
    print("{:<40} {:<10.2f}".format("Median E2E Latency (ms):", m["median_e2e_latency_ms"]))
    print("{:<40} {:<10.2f}".format("P90 E2E Latency (ms):", m["p90_e2e_latency_ms"]))
    print("{:<40} {:<10.2f}".format("P99 E2E Latency (ms):", m["p99_e2e_latency_ms"]))
    print("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean TTFT (ms):", m["mean_ttft_ms"]))
    print("{:<40} {:<10.2f}".format("Median TTFT (ms):", m["median_ttft_ms"]))
    print("{:<40} {:<10.2f}".format("P99 TTFT (ms):", m["p99_ttft_ms"]))
    print("{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean TPOT (ms):", m["mean_tpot_ms"]))
    print("{:<40} {:<10.2f}".format("Median TPOT (ms):", m["median_tpot_ms"]))
    print("{:<40} {:<10.2f}".format("P99 TPOT (ms):", m["p99_tpot_ms"]))
    print("{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"))
    print("{:<40} {:<10.2f}".format("Mean ITL (ms):", m["mean_itl_ms"]))
    print("{:<40} {:<10.2f}".format("Median ITL (ms):", m["median_itl_ms"]))
    print("{:<40} {:<10.2f}".format("P95 ITL (ms):", m["p95_itl_ms"]))
    print("{:<40} {:<10.2f}".format("P99 ITL (ms):", m["p99_itl_ms"]))
    print("{:<40} {:<10.2f}".format("Max ITL (ms):", m["max_itl_ms"]))
    print("=" * 50)


# ---------------------------------------------------------------------------------- run
def _get_json(base_url: str, path: str) -> dict:
    conn, prefix = _connect(base_url)
    try:
        conn.request("GET", prefix.rstrip("/") + path, headers=_auth_headers())
        resp = conn.getresponse()
        return json.loads(resp.read() or b"{}")
    except (OSError, http.client.HTTPException) as e:
        u = urllib.parse.urlsplit(base_url)
        raise ConnectionError(
            f"HTTPConnectionPool(host='{u.hostname}', port={u.port}): Max retries exceeded with url: {path} "
            f"(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3a2c1d5f10>: "
            f"Failed to establish a new connection: {e}'))"
        ) from None
    finally:
        conn.close()


def _progress(done: int, total: int, start: float) -> None:
    elapsed = time.perf_counter() - start
    bar = "█" * int(10 * done / max(total, 1))
    rate = done / elapsed if elapsed > 0 else 0.0
    print(f"\r{int(100 * done / max(total, 1)):3d}%|{bar:<10}| {done}/{total} [{elapsed:05.2f}s, {rate:.2f}it/s]",
          end="" if done < total else "\n", file=sys.stderr, flush=True)


def benchmark(args: argparse.Namespace, base_url: str, reqs: list[Request]) -> None:
    if not reqs:
        raise ValueError("No requests sampled: check --num-prompts and the dataset arguments.")
    print(f"Starting warmup with {args.warmup_requests} sequences...")
    for _ in range(max(args.warmup_requests, 0)):
        warm = Request(reqs[0].prompt, reqs[0].prompt_len, min(reqs[0].output_len, 16))
        test_output = send_request(args, base_url, warm)
        if not test_output.success:
            raise ValueError(
                "Warmup failed - Please make sure benchmark arguments "
                f"are correctly specified. Error: {test_output.error}"
            )
    print(f"Warmup completed with {args.warmup_requests} sequences. Starting main benchmark run...")
    if args.flush_cache:
        conn, prefix = _connect(base_url)
        conn.request("POST", prefix.rstrip("/") + "/flush_cache", headers=_auth_headers())
        conn.getresponse().read()
        conn.close()

    outputs: list[Output | None] = [None] * len(reqs)
    limit = threading.BoundedSemaphore(args.max_concurrency) if args.max_concurrency else None
    done = [0]
    lock = threading.Lock()
    start = time.perf_counter()

    def run_one(i: int) -> None:
        try:
            outputs[i] = send_request(args, base_url, reqs[i])
        finally:
            if limit is not None:
                limit.release()
            with lock:
                done[0] += 1
                if not args.disable_tqdm:
                    _progress(done[0], len(reqs), start)

    rng = random.Random(args.seed)
    threads = []
    for i in range(len(reqs)):
        if limit is not None:
            limit.acquire()
        t = threading.Thread(target=run_one, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        if args.request_rate != float("inf"):
            time.sleep(rng.expovariate(args.request_rate))
    for t in threads:
        t.join()
    duration = time.perf_counter() - start
    results = [o for o in outputs if o is not None]
    metrics = calculate_metrics(results, duration, start)
    print_result_block(args, metrics, duration)

    try:
        server_info = _get_json(base_url, "/get_server_info")
    except ConnectionError:
        server_info = None
    if args.output_file:
        output_file = args.output_file
    elif args.dataset_name.startswith("random"):
        output_file = (f"{args.backend}_{datetime.now().strftime('%m%d')}_{args.num_prompts}_"
                       f"{args.random_input_len}_{args.random_output_len}.jsonl")
    else:
        output_file = f"{args.backend}_{datetime.now().strftime('%m%d')}_{args.num_prompts}_sharegpt.jsonl"
    record = {
        "tag": args.tag,
        "backend": args.backend,
        "dataset_name": args.dataset_name,
        "request_rate": "inf" if args.request_rate == float("inf") else args.request_rate,
        "max_concurrency": args.max_concurrency,
        "sharegpt_output_len": args.sharegpt_output_len,
        "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio,
        "server_info": server_info,
        "duration": duration,
        **metrics,
        "accept_length": None,
    }
    if args.output_details:
        record["output_lens"] = [o.output_len for o in results]
        record["ttfts"] = [o.ttft for o in results]
        record["itls"] = [o.itl for o in results]
        record["generated_texts"] = [o.generated_text for o in results]
        record["errors"] = [o.error for o in results]
    with open(output_file, "a") as f:
        f.write(json.dumps(record) + "\n")


def run_benchmark(args: argparse.Namespace) -> None:
    random.seed(args.seed)
    if args.port is None:
        args.port = {"sglang": 30000, "sglang-native": 30000, "sglang-oai": 30000, "sglang-oai-chat": 30000,
                     "lmdeploy": 23333, "lmdeploy-chat": 23333, "vllm": 8000, "vllm-chat": 8000,
                     "trt": 8000, "gserver": 9988, "truss": 8080}.get(args.backend, 30000)
    base_url = args.base_url.rstrip("/") if args.base_url else f"http://{args.host}:{args.port}"
    if args.model is None:
        model_list = _get_json(base_url, "/v1/models").get("data", [])
        args.model = model_list[0]["id"] if model_list else None
        if args.model is None:
            print("No model specified or found. Please provide a model using `--model`.")
            sys.exit(1)
    print(f"benchmark_args={args}\n")
    reqs = sample_requests(args)
    print(f"#Input tokens: {sum(r.prompt_len for r in reqs)}")
    print(f"#Output tokens: {sum(r.output_len for r in reqs)}")
    benchmark(args, base_url, reqs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    parser.add_argument("--backend", type=str, choices=BACKENDS, default="sglang",
                        help="Must specify a backend, depending on the LLM Inference Engine.")
    parser.add_argument("--base-url", type=str, default=None,
                        help="Server or API base url if not using http host and port.")
    parser.add_argument("--host", type=str, default="0.0.0.0", help="Default host is 0.0.0.0.")
    parser.add_argument("--port", type=int,
                        help="If not set, the default port is configured according to its default value for "
                        "different LLM Inference Engines.")
    parser.add_argument("--dataset-name", type=str, default="sharegpt", choices=DATASETS,
                        help="Name of the dataset to benchmark on.")
    parser.add_argument("--dataset-path", type=str, default="", help="Path to the dataset.")
    parser.add_argument("--model", type=str,
                        help="Name or path of the model. If not set, the default model will request /v1/models "
                        "for conf.")
    parser.add_argument("--served-model-name", type=str, help="The name of the model as served by the serving service.")
    parser.add_argument("--tokenizer", type=str,
                        help="Name or path of the tokenizer. If not set, using the model conf.")
    parser.add_argument("--num-prompts", type=int, default=1000, help="Number of prompts to process. Default is 1000.")
    parser.add_argument("--sharegpt-output-len", type=int, default=None,
                        help="Output length for each request. Overrides the output length from the ShareGPT dataset.")
    parser.add_argument("--sharegpt-context-len", type=int, default=None,
                        help="The context length of the model for the ShareGPT dataset.")
    parser.add_argument("--random-input-len", type=int, default=1024,
                        help="Number of input tokens per request, used only for random dataset.")
    parser.add_argument("--random-output-len", default=1024, type=int,
                        help="Number of output tokens per request, used only for random dataset.")
    parser.add_argument("--random-range-ratio", type=float, default=0.0,
                        help="Range of sampled ratio of input/output length, used only for random dataset.")
    parser.add_argument("--request-rate", type=float, default=float("inf"),
                        help="Number of requests per second. If this is inf, then all the requests are sent at time 0.")
    parser.add_argument("--use-trace-timestamps", action="store_true")
    parser.add_argument("--max-concurrency", type=int, default=None, help="Maximum number of concurrent requests.")
    parser.add_argument("--output-file", type=str, help="Output JSONL file name.")
    parser.add_argument("--output-details", action="store_true", help="Output details of benchmarking.")
    parser.add_argument("--print-requests", action="store_true")
    parser.add_argument("--disable-tqdm", action="store_true", help="Specify to disable tqdm progress bar.")
    parser.add_argument("--disable-stream", action="store_true", help="Disable streaming mode.")
    parser.add_argument("--return-logprob", action="store_true", help="Return logprob.")
    parser.add_argument("--return-routed-experts", action="store_true")
    parser.add_argument("--seed", type=int, default=1, help="The random seed.")
    parser.add_argument("--disable-ignore-eos", action="store_true", help="Disable ignoring EOS.")
    parser.add_argument("--extra-request-body", metavar='{"key1": "value1", "key2": "value2"}', type=str, default=None,
                        help="Append given JSON object to the request payload.")
    parser.add_argument("--apply-chat-template", action="store_true", help="Apply chat template")
    parser.add_argument("--profile", action="store_true", help="Use Torch Profiler.")
    parser.add_argument("--lora-name", type=str, nargs="*", default=None)
    parser.add_argument("--prompt-suffix", type=str, default="")
    parser.add_argument("--pd-separated", action="store_true")
    parser.add_argument("--flush-cache", action="store_true", help="Flush the cache before running the benchmark")
    parser.add_argument("--warmup-requests", type=int, default=1,
                        help="Number of warmup requests to run before the benchmark")
    parser.add_argument("--tokenize-prompt", action="store_true")
    parser.add_argument("--tag", type=str, default=None, help="The tag to be dumped to output.")
    group = parser.add_argument_group("generated-shared-prefix dataset arguments")
    group.add_argument("--gsp-num-groups", type=int, default=64)
    group.add_argument("--gsp-prompts-per-group", type=int, default=16)
    group.add_argument("--gsp-system-prompt-len", type=int, default=2048)
    group.add_argument("--gsp-question-len", type=int, default=128)
    group.add_argument("--gsp-output-len", type=int, default=256)
    return parser


if __name__ == "__main__":
    run_benchmark(build_parser().parse_args())
