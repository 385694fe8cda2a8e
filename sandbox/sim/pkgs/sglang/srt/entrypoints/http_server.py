"""The HTTP server and process launcher (SIMULATED sglang 0.5.9).

As in sglang: the launcher starts one scheduler process per rank and waits for all of them; only
then does the HTTP server bind its port (before that, connections are refused), /health answers
503 until the warm-up generation succeeded, then "The server is fired up and ready to roll!" and
200. A dead rank during start-up is "Rank N scheduler is dead" and exit 1. SIGTERM shuts down
cleanly: HTTP first, then the ranks, their live-state files and the load file.

Endpoints: /health, /health_generate, /model_info (/get_model_info), /server_info
(/get_server_info), /v1/models, /generate, /v1/completions, /v1/chat/completions, /flush_cache,
/metrics (with --enable-metrics). --api-key guards all but /health* and /metrics (401 otherwise).
"""

from __future__ import annotations

import http.client
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sglang_sim_core import device, engine, env, livestate, perfmodel
from sglang_sim_core.logs import uvicorn, uvicorn_error
from sglang_sim_core.rank import RankContext

from sglang.srt import sim_release
from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.server_args import ServerArgs
from sglang.version import __version__

logger = logging.getLogger(__name__)


class _State:
    def __init__(self, server_args: ServerArgs) -> None:
        self.server_args = server_args
        self.status = "Starting"
        self.stop = threading.Event()
        self.exit_code = 0
        self.procs: list[multiprocessing.Process] = []
        self.ready: list[dict[str, Any]] = []
        self.engine: engine.Engine | None = None
        self.httpd: ThreadingHTTPServer | None = None
        self.created = int(time.time())
        self.tp0_logger = _tp0_logger()


def _tp0_logger() -> logging.Logger:
    log = logging.getLogger("sglang.srt.managers.scheduler.tp0")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s TP0] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
        log.addHandler(handler)
        log.propagate = False
        log.setLevel(logging.INFO)
    return log


# ---------------------------------------------------------------------------------- launching
def _rank_layout(sa: ServerArgs) -> list[tuple[int, int, int, int]]:
    """(dp_rank, pp_rank, tp_rank, gpu_id) for every scheduler process."""
    dp = 1 if sa.enable_dp_attention else sa.dp_size
    if sa.nnodes > 1:
        return _node_layout(sa)
    layout = []
    for dp_rank in range(dp):
        for pp_rank in range(sa.pp_size):
            for tp_rank in range(sa.tp_size):
                slot = (dp_rank * sa.pp_size + pp_rank) * sa.tp_size + tp_rank
                layout.append((dp_rank, pp_rank, tp_rank, sa.base_gpu_id + slot * sa.gpu_id_step))
    return layout


def _node_layout(sa: ServerArgs) -> list[tuple[int, int, int, int]]:
    """This node's share of a multi-node server, as v0.5.9's _launch_scheduler_processes splits it: whole
    pipeline stages per node when pp >= nnodes, else a slice of every TP group."""
    pp_per_node = max(sa.pp_size // sa.nnodes, 1)
    nodes_per_pp_rank = max(sa.nnodes // sa.pp_size, 1)
    tp_per_node = sa.tp_size // nodes_per_pp_rank
    first_pp = pp_per_node * (sa.node_rank // nodes_per_pp_rank)
    first_tp = tp_per_node * (sa.node_rank % nodes_per_pp_rank)
    return [(0, pp_rank, tp_rank,
             sa.base_gpu_id + (pp_rank % pp_per_node) * tp_per_node + (tp_rank % tp_per_node) * sa.gpu_id_step)
            for pp_rank in range(first_pp, first_pp + pp_per_node)
            for tp_rank in range(first_tp, first_tp + tp_per_node)]


def _launch_subprocesses(state: _State) -> list[multiprocessing.connection.Connection]:
    sa = state.server_args
    visible = device.visible_gpus()
    if sa.tp_size > 1:
        device.p2p_read_status()
        device.nvlink_pairs()
    switches = env.profile_switches()
    nccl_p2p_disabled = os.environ.get("NCCL_P2P_DISABLE", "0").strip() == "1"
    layout = _rank_layout(sa)
    ctx = multiprocessing.get_context("fork")
    readers = []
    for dp_rank, pp_rank, tp_rank, gpu_id in layout:
        group_ids = [g for d, p, _, g in layout if d == dp_rank and p == pp_rank]
        group = [visible[g] for g in group_ids if g < len(visible)]
        gpu = visible[gpu_id] if gpu_id < len(visible) else (visible[-1] if visible else None)
        p2p = "n/a"
        if len(group) > 1:
            p2p = "ok" if device.p2p_ok([g.index for g in group]) else "refused"
        major = gpu.major if gpu else 0
        facts = {
            "sm": gpu.sm if gpu else 0,
            "sm_major": major,
            "tp": sa.tp_size,
            "world": sa.tp_size * sa.pp_size,
            "nnodes": sa.nnodes,
            "gpus_short": max(g for *_, g in layout) >= len(visible),
            "p2p": p2p,
            "p2p_broken": bool(switches.get("p2p_broken", False)),
            "nccl_p2p": p2p == "ok" and not nccl_p2p_disabled,
            "fusion_requested": bool(sa.enable_flashinfer_allreduce_fusion),
            "fusion_applied": False,
            "is_moe": sa._model.is_moe,
            "moe_backend": sa.moe_runner_backend,
            "cuda_graph": not sa.disable_cuda_graph,
            "spans_nodes": sa.nnodes > 1 and len(group_ids) < sa.tp_size,
        }
        prefix = (f" DP{dp_rank}" if sa.dp_size > 1 else "") + (f" PP{pp_rank}" if sa.pp_size > 1 else "")
        name = f"sglang::scheduler{(prefix + f' TP{tp_rank}').replace(' ', '_')}"
        if gpu is None:
            raise RuntimeError(device.NO_DRIVER)
        rank = RankContext(gpu=gpu, gpu_ordinal=gpu_id, group=group or [gpu], process_name=name, facts=facts)
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=run_scheduler_process,
            args=(sa, gpu_id, tp_rank, pp_rank, dp_rank, rank, writer),
            daemon=False,
        )
        proc.start()
        writer.close()
        state.procs.append(proc)
        readers.append(reader)
    return readers


def _wait_for_scheduler_ready(state: _State, readers: list) -> bool:
    pending = dict(enumerate(readers))
    while pending:
        if state.stop.is_set():
            return False
        ready = multiprocessing.connection.wait(list(pending.values()), timeout=0.5)
        for conn in ready:
            i = next(k for k, v in pending.items() if v is conn)
            try:
                data = conn.recv()
            except EOFError:
                if state.stop.wait(0.2):  # stopped as a whole (e.g. systemd signalled every process)
                    return False
                logger.error(f"Rank {i} scheduler is dead. Please check if there are relevant logs.")
                state.procs[i].join(timeout=5)
                logger.error(f"Exit code: {state.procs[i].exitcode}")
                state.exit_code = 1
                return False
            state.ready.append(data)
            del pending[i]
    state.ready.sort(key=lambda d: (d["tp_rank"], d["gpu_index"]))
    return True


def _stop_processes(state: _State) -> None:
    for proc in state.procs:
        if proc.is_alive():
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for proc in state.procs:
        proc.join(timeout=max(0.1, deadline - time.monotonic()))
        if proc.is_alive():
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.join(timeout=5)
        livestate.remove_app(proc.pid)
    livestate.clear_load(os.getpid())


# ---------------------------------------------------------------------------------- serving
def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048  # uvicorn's default backlog; socketserver's 5 drops SYNs under load

    def handle_error(self, request, client_address) -> None:
        """Clients that go away are not errors (uvicorn logs nothing); anything else: one line."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        uvicorn_error(f"Exception in ASGI application: {exc!r}")


class _Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    state: _State

    # -- plumbing
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        return None

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = self.path.split("?", 1)[0]
        excluded = self.state.server_args.uvicorn_access_log_exclude_prefixes or []
        if any(path.startswith(p) for p in excluded):
            return
        try:
            phrase = http.client.responses.get(int(code), "")
        except ValueError:
            phrase = ""
        uvicorn(f'{self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {code} {phrase}')

    def _json(self, code: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _empty(self, code: int) -> None:
        self.send_response(code)
        self.send_header("content-length", "0")
        self.end_headers()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw or b"{}")

    def _authorized(self, path: str) -> bool:
        key = self.state.server_args.api_key
        if not key or path.startswith("/health") or path.startswith("/metrics"):
            return True
        return self.headers.get("authorization", "") == f"Bearer {key}"

    # -- routing
    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if not self._authorized(path):
                self._json(401, {"error": "Unauthorized"})
                return
            handler = _ROUTES.get((method, path))
            if handler is None:
                self._json(404, {"detail": "Not Found"})
                return
            handler(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except (ValueError, KeyError, TypeError) as e:
            try:
                self._json(400, {"object": "error", "message": str(e), "type": "BadRequestError", "code": 400})
            except OSError:
                self.close_connection = True

    # -- endpoints
    def health(self) -> None:
        self._empty(200 if self.state.status == "Up" else 503)

    def model_info(self) -> None:
        sa = self.state.server_args
        self._json(200, {
            "model_path": sa.model_path,
            "tokenizer_path": sa.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": sa.weight_version,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": None,
            "architectures": [sa._model.architecture],
        })

    def server_info(self) -> None:
        sa = self.state.server_args
        info = {k: v for k, v in vars(sa).items() if not k.startswith("_") and k != "api_key"}
        eng = self.state.engine
        tp0 = self.state.ready[0] if self.state.ready else {}
        info.update({
            "version": __version__,
            "max_total_num_tokens": tp0.get("max_total_num_tokens"),
            "internal_states": [{
                "last_gen_throughput": round(eng.throughput(), 2) if eng else 0.0,
                "avg_spec_accept_length": None,
                "max_running_requests": tp0.get("max_running_requests"),
            }],
        })
        self._json(200, info)

    def models(self) -> None:
        sa = self.state.server_args
        ctx = self.state.ready[0]["context_len"] if self.state.ready else None
        self._json(200, {"object": "list", "data": [{
            "id": sa.served_model_name, "object": "model", "created": self.state.created, "owned_by": "sglang",
            "root": sa.served_model_name, "parent": None, "max_model_len": ctx,
        }]})

    def flush_cache(self) -> None:
        body = b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
        body += b"requests, the operation will not be performed.)\n"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def metrics(self) -> None:
        if not self.state.server_args.enable_metrics:
            self._json(404, {"detail": "Not Found"})
            return
        body = _metrics_text(self.state).encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _prompt(self, text: Any, input_ids: Any) -> tuple[str, int]:
        if input_ids is not None:
            if not isinstance(input_ids, list):
                raise ValueError("input_ids must be a list of token ids")
            return "", len(input_ids)
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        return text, max(1, engine.count_tokens(text))

    def generate(self) -> None:
        req = self._body()
        eng = self.state.engine
        assert eng is not None
        params = req.get("sampling_params") or {}
        max_new = int(params.get("max_new_tokens", 128))
        ignore_eos = bool(params.get("ignore_eos", False))
        texts = req.get("text")
        ids = req.get("input_ids")
        if isinstance(texts, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
            items = texts if isinstance(texts, list) else [None] * len(ids)
            id_items = ids if isinstance(ids, list) and ids and isinstance(ids[0], list) else [None] * len(items)
            results = []
            for t, i in zip(items, id_items, strict=True):
                prompt, n = self._prompt(t, i)
                results.append(_generate_obj(eng.generate(prompt, n, max_new, ignore_eos), self.state))
            self._json(200, results)
            return
        prompt, n_in = self._prompt(texts, ids)
        if not req.get("stream"):
            self._json(200, _generate_obj(eng.generate(prompt, n_in, max_new, ignore_eos), self.state))
            return
        self._start_stream()
        start = time.monotonic()
        rid = uuid.uuid4().hex

        def on_token(text: str, n_out: int) -> None:
            self._chunk(_sse({"text": text, "output_ids": [], "meta_info": {
                "id": rid, "finish_reason": None, "prompt_tokens": n_in, "completion_tokens": n_out,
                "cached_tokens": 0, "e2e_latency": time.monotonic() - start,
            }}))

        res = eng.generate(prompt, n_in, max_new, ignore_eos, on_token=on_token)
        final = _generate_obj(res, self.state)
        final["meta_info"]["id"] = rid
        self._chunk(_sse(final))
        self._chunk(b"data: [DONE]\n\n")
        self._end_stream()

    def completions(self, chat: bool = False) -> None:
        req = self._body()
        eng = self.state.engine
        assert eng is not None
        if chat:
            messages = req.get("messages") or []
            prompt = str(messages[-1].get("content", "")) if messages else ""
            max_new = int(req.get("max_completion_tokens") or req.get("max_tokens") or 128)
        else:
            prompt = req.get("prompt", "")
            if isinstance(prompt, list):
                prompt = prompt[0] if prompt else ""
            max_new = int(req.get("max_tokens") or 16)
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string")
        ignore_eos = bool(req.get("ignore_eos", False))
        n_in = max(1, engine.count_tokens(prompt))
        model = self.state.server_args.served_model_name
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj_type = "chat.completion" if chat else "text_completion"
        if req.get("stream"):
            self._start_stream()
            sent = {"text": ""}

            def on_token(text: str, n_out: int) -> None:
                delta = text[len(sent["text"]):]
                sent["text"] = text
                choice = {"index": 0, "finish_reason": None, "logprobs": None}
                choice.update({"delta": {"role": "assistant", "content": delta}} if chat else {"text": delta})
                self._chunk(_sse({"id": cid, "object": obj_type + ".chunk" if chat else obj_type,
                                  "created": int(time.time()), "model": model, "choices": [choice]}))

            res = eng.generate(prompt, n_in, max_new, ignore_eos, on_token=on_token)
            end = {"index": 0, "finish_reason": res.finish_reason, "logprobs": None}
            end.update({"delta": {}} if chat else {"text": ""})
            self._chunk(_sse({"id": cid, "object": obj_type + ".chunk" if chat else obj_type,
                              "created": int(time.time()), "model": model, "choices": [end],
                              "usage": _usage(res)}))
            self._chunk(b"data: [DONE]\n\n")
            self._end_stream()
            return
        res = eng.generate(prompt, n_in, max_new, ignore_eos)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": res.finish_reason,
                                  "matched_stop": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": res.text, "reasoning_content": None,
                                 "tool_calls": None}
        else:
            choice["text"] = res.text
        self._json(200, {"id": cid, "object": obj_type, "created": int(time.time()), "model": model,
                         "choices": [choice], "usage": _usage(res)})

    def chat_completions(self) -> None:
        self.completions(chat=True)


_ROUTES = {
    ("GET", "/health"): _Handler.health,
    ("GET", "/health_generate"): _Handler.health,
    ("GET", "/model_info"): _Handler.model_info,
    ("GET", "/get_model_info"): _Handler.model_info,
    ("GET", "/server_info"): _Handler.server_info,
    ("GET", "/get_server_info"): _Handler.server_info,
    ("GET", "/v1/models"): _Handler.models,
    ("GET", "/metrics"): _Handler.metrics,
    ("GET", "/flush_cache"): _Handler.flush_cache,
    ("POST", "/flush_cache"): _Handler.flush_cache,
    ("POST", "/generate"): _Handler.generate,
    ("POST", "/v1/completions"): _Handler.completions,
    ("POST", "/v1/chat/completions"): _Handler.chat_completions,
}


def _usage(res: engine.Result) -> dict[str, Any]:
    return {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
            "total_tokens": res.prompt_tokens + res.completion_tokens, "prompt_tokens_details": None}


def _generate_obj(res: engine.Result, state: _State) -> dict[str, Any]:
    finish: dict[str, Any] = {"type": res.finish_reason}
    if res.finish_reason == "length":
        finish["length"] = res.completion_tokens
    else:
        finish["matched"] = 151329
    return {"text": res.text, "output_ids": res.output_ids, "meta_info": {
        "id": res.rid, "finish_reason": finish, "prompt_tokens": res.prompt_tokens,
        "weight_version": state.server_args.weight_version, "completion_tokens": res.completion_tokens,
        "cached_tokens": 0, "e2e_latency": res.latency,
    }}


_BUCKETS = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0]


def _regression() -> engine.Regression:
    """What this release plays against its predecessor: its sim_release.json's `regression`, then the knobs."""
    released = sim_release.release().get("regression")
    fields = env.regression(released if isinstance(released, dict) else None)
    known = {k: v for k, v in fields.items() if k in engine.Regression.__dataclass_fields__}
    try:
        return engine.Regression(**known)
    except TypeError:
        return engine.Regression()


def _histogram(name: str, help_text: str, samples: list[float], labels: str) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for b in _BUCKETS:
        lines.append(f'{name}_bucket{{{labels},le="{b}"}} {float(sum(1 for s in samples if s <= b))}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(len(samples))}')
    lines.append(f"{name}_sum{{{labels}}} {sum(samples)}")
    lines.append(f"{name}_count{{{labels}}} {float(len(samples))}")
    return lines


def _metrics_text(state: _State) -> str:
    eng = state.engine
    labels = f'model_name="{state.server_args.served_model_name}"'
    if eng is None:
        return ""
    st = eng.stats
    usage = eng.tokens_in_use / max(eng.max_total_tokens, 1)
    lines = []
    for name, kind, help_text, value in [
        ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", st.prompt_tokens_total),
        ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.",
         st.generation_tokens_total),
        ("sglang:num_requests_total", "counter", "Number of requests processed.", st.requests_total),
        ("sglang:num_running_reqs", "gauge", "The number of running requests.", eng.running),
        ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", eng.queued),
        ("sglang:num_used_tokens", "gauge", "The number of used tokens.", eng.tokens_in_use),
        ("sglang:token_usage", "gauge", "The token usage.", round(usage, 4)),
        ("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", round(eng.throughput(), 2)),
        ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0),
    ]:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]
    lines += _histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                        st.ttft, labels)
    lines += _histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                        st.e2e, labels)
    lines += _histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        st.itl, labels)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- background
def _load_writer(state: _State) -> None:
    """Keep ${FLEET_SIM_RUN}/load in step with the modelled power and utilisation."""
    eng = state.engine
    assert eng is not None
    profile = state.ready[0]["profile"]
    pid = os.getpid()
    last: list[tuple[int, float, float]] | None = None
    while not state.stop.is_set():
        frac = eng.load_fraction()
        rows = []
        for r in state.ready:
            idle = r["idle_power_w"]
            power = idle + (profile["power_w"] - idle) * frac if frac > 0 else idle
            rows.append((r["gpu_index"], round(power, 2), round(profile["util_pct"] * frac)))
        if rows != last:
            try:
                livestate.write_load(pid, rows)
            except OSError:
                pass
            last = rows
        state.stop.wait(0.25)


def _batch_logger(state: _State) -> None:
    """TP0's periodic `Decode batch` lines while requests run (every decode_log_interval steps)."""
    eng = state.engine
    assert eng is not None
    interval_steps = max(1, state.server_args.decode_log_interval or 40)
    cuda_graph = state.ready[0]["cuda_graph"]
    while not state.stop.is_set():
        running = eng.running
        wait = 0.5
        if running:
            per_req = min(eng.per_request, eng.rate / running)
            usage = eng.tokens_in_use / max(eng.max_total_tokens, 1)
            state.tp0_logger.info(
                f"Decode batch, #running-req: {running}, #token: {eng.tokens_in_use}, token usage: {usage:.2f}, "
                f"cuda graph: {cuda_graph}, gen throughput (token/s): {eng.throughput():.2f}, "
                f"#queue-req: {eng.queued}"
            )
            wait = interval_steps / per_req * eng.scale
        state.stop.wait(max(0.5, min(wait, 30.0)))


def _monitor(state: _State) -> None:
    while not state.stop.wait(1.0):
        for i, proc in enumerate(state.procs):
            if not proc.is_alive():
                if state.stop.wait(0.2):  # stopped as a whole (e.g. systemd signalled every process)
                    return
                logger.error(f"Rank {i} scheduler is dead. Please check if there are relevant logs.")
                logger.error(f"Exit code: {proc.exitcode}")
                state.exit_code = 1
                state.stop.set()
                return


def _warmup(state: _State) -> None:
    sa = state.server_args
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(sa.host, sa.host)
    headers = {"content-type": "application/json"}
    if sa.api_key:
        headers["authorization"] = f"Bearer {sa.api_key}"
    try:
        conn = http.client.HTTPConnection(host, sa.port, timeout=600)
        conn.request("GET", "/model_info", headers=headers)
        conn.getresponse().read()
        body = json.dumps({"text": "The capital city of France is",
                           "sampling_params": {"temperature": 0, "max_new_tokens": 8}})
        conn.request("POST", "/generate", body=body, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        conn.close()
        if resp.status != 200:  # v0.5.9 _execute_server_warmup: assert res.status_code == 200, f"{res=}, {res.text=}"
            raise AssertionError(f"res=<Response [{resp.status}]>, res.text={text!r}")
    except Exception as e:  # noqa: BLE001 - any failure ends the launch, as in sglang
        logger.error(f"Initialization failed. warmup error: {e!r}")
        state.exit_code = 1
        state.stop.set()
        return
    state.status = "Up"
    logger.info("The server is fired up and ready to roll!")


# ---------------------------------------------------------------------------------- nodes of rank >= 1
class _DummyHealth(BaseHTTPRequestHandler):
    """launch_dummy_health_check_server: /health and /health_generate answer 200, nothing else is served."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - uvicorn runs at log_level warning
        return None

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        code = 200 if path in ("/health", "/health_generate") else 404
        body = b"" if code == 200 else b'{"detail":"Not Found"}'
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815 - any other path is FastAPI's 404, whatever the method


def _serve_nonzero_node(state: _State) -> int:
    """v0.5.9 on --node-rank >= 1: no tokenizer, no HTTP API; once its schedulers are ready, a dummy health
    server on --host/--port, then it waits on the schedulers and logs each one that ends."""
    sa = state.server_args
    try:
        httpd = _HTTPServer((sa.host, sa.port), _DummyHealth)
    except OSError as e:
        uvicorn_error(f"[Errno {e.errno}] error while attempting to bind on address "
                      f"('{sa.host}', {sa.port}): {e.strerror.lower() if e.strerror else e}")
        _stop_processes(state)
        return 1
    logger.info(f"Dummy health check server started in background thread at {sa.host}:{sa.port}")
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    while not state.stop.wait(0.5):
        dead = [p for p in state.procs if not p.is_alive()]
        if dead and not state.stop.wait(0.2):  # not a stop of the whole unit
            for proc in dead:
                logger.error(f"Scheduler or DataParallelController {proc.pid} terminated with {proc.exitcode}")
            state.exit_code = 1
            break
    httpd.shutdown()
    httpd.server_close()
    _stop_processes(state)
    return state.exit_code


# ---------------------------------------------------------------------------------- entry
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_on_signals(state: _State) -> threading.Thread:
    """SIGTERM, SIGINT and SIGHUP set `state.stop`, from a thread of its own: the handler only writes a byte to a
    pipe that thread waits on. A Python handler runs in the main thread between any two bytecodes, a second one
    inside the first too, and Event.set() holds the event's lock (not re-entrant): a handler that set the event
    itself deadlocked the main thread when a second SIGTERM came during the first one's set() (systemd signals
    every process of the unit, then fleet-launch passes its own SIGTERM on), before the flag was up, so the server
    served on until systemd's SIGKILL at TimeoutStopSec (30 s of a deploy's stop; 1 stop in 10 to 40 under the
    canary bench). Returns the thread that sets it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def _on_signal(signum: int, frame: Any) -> None:
        try:
            os.write(write_end, b"s")
        except OSError:  # the pipe is full: the stop is on its way already
            pass

    def _stopper() -> None:
        os.read(read_end, 1)
        state.stop.set()

    thread = threading.Thread(target=_stopper, name="stop-on-signal", daemon=True)
    thread.start()
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    return thread


def launch_server(server_args: ServerArgs) -> int:
    state = _State(server_args)
    logger.info(f"{server_args=}")
    stop_on_signals(state)
    readers = _launch_subprocesses(state)
    if not _wait_for_scheduler_ready(state, readers):
        _stop_processes(state)
        return state.exit_code

    if server_args.node_rank >= 1:
        return _serve_nonzero_node(state)

    tp0 = state.ready[0]
    profile = tp0["profile"]
    shape = perfmodel.shape(perfmodel.load(), server_args, random.Random())  # this start's factors and noise
    state.engine = engine.Engine(
        rate=profile["rate"] * shape.rate_factor,
        saturation=profile["saturation"],
        max_running_requests=tp0["max_running_requests"],
        token_time_scale=env.token_time_scale(),
        garbage=profile["output"] == "garbage",
        max_total_tokens=tp0["max_total_num_tokens"],
        stream_slice=env.stream_slice(),
        regression=_regression(),
        shape=shape,
    )
    _Handler.state = state
    try:
        httpd = _HTTPServer((server_args.host, server_args.port), _Handler)
    except OSError as e:
        uvicorn_error(f"[Errno {e.errno}] error while attempting to bind on address "
                      f"('{server_args.host}', {server_args.port}): {e.strerror.lower() if e.strerror else e}")
        _stop_processes(state)
        return 1
    state.httpd = httpd
    uvicorn(f"Started server process [{os.getpid()}]")
    uvicorn("Waiting for application startup.")
    uvicorn("Application startup complete.")
    uvicorn(f"Uvicorn running on http://{server_args.host}:{server_args.port} (Press CTRL+C to quit)")

    threads = [threading.Thread(target=f, args=(state,), daemon=True)
               for f in (_load_writer, _batch_logger, _monitor, _warmup)]
    def _stopper() -> None:
        state.stop.wait()
        state.status = "ShuttingDown"
        httpd.shutdown()

    threads.append(threading.Thread(target=_stopper, daemon=True))
    for t in threads:
        t.start()
    httpd.serve_forever(poll_interval=0.05)
    state.status = "ShuttingDown"
    uvicorn("Shutting down")
    httpd.server_close()
    uvicorn("Waiting for application shutdown.")
    uvicorn("Application shutdown complete.")
    uvicorn(f"Finished server process [{os.getpid()}]")
    _stop_processes(state)
    return state.exit_code
