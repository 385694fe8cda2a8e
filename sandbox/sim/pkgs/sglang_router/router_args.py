"""SIMULATED sglang_router.router_args: the launcher's command line as sgl-router's router_args.py defines it
(names, defaults and choices of the regular-mode options; PD and Kubernetes options are accepted and ignored)."""

from __future__ import annotations

import argparse
import dataclasses

POLICIES = ["random", "round_robin", "cache_aware", "power_of_two"]


@dataclasses.dataclass
class RouterArgs:
    worker_urls: list[str]
    host: str = "127.0.0.1"
    port: int = 30000
    policy: str = "cache_aware"
    worker_startup_timeout_secs: int = 600
    worker_startup_check_interval: int = 30
    max_payload_size: int = 512 * 1024 * 1024
    api_key: str | None = None
    log_level: str = "info"
    request_timeout_secs: int = 1800
    retry_max_retries: int = 5
    disable_retries: bool = False
    health_failure_threshold: int = 3
    health_success_threshold: int = 2
    health_check_timeout_secs: int = 5
    health_check_interval_secs: int = 60
    health_check_endpoint: str = "/health"

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> RouterArgs:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_router.py", description="SGLang Router")
    p.add_argument("--host", type=str, default=RouterArgs.host, help="Host address to bind the router server")
    p.add_argument("--port", type=int, default=RouterArgs.port, help="Port number to bind the router server")
    p.add_argument("--worker-urls", type=str, nargs="*", default=[],
                   help="List of worker URLs (e.g., http://worker1:8000 http://worker2:8000)")
    p.add_argument("--policy", type=str, default=RouterArgs.policy, choices=POLICIES,
                   help="Load balancing policy to use")
    for name in ("--prefill-policy", "--decode-policy"):
        p.add_argument(name, type=str, default=None, choices=POLICIES)
    for name in ("--mini-lb", "--pd-disaggregation", "--dp-aware", "--enable-igw", "--service-discovery",
                 "--disable-circuit-breaker"):
        p.add_argument(name, action="store_true")
    p.add_argument("--disable-retries", action="store_true",
                   help="Disable retries (equivalent to setting retry_max_retries=1)")
    p.add_argument("--prefill", nargs="+", action="append")
    p.add_argument("--decode", nargs=1, action="append")
    ints = {
        "--worker-startup-timeout-secs": RouterArgs.worker_startup_timeout_secs,
        "--worker-startup-check-interval": RouterArgs.worker_startup_check_interval,
        "--balance-abs-threshold": 64, "--eviction-interval-secs": 120, "--max-tree-size": 2**26,
        "--max-payload-size": RouterArgs.max_payload_size, "--service-discovery-port": 80,
        "--prometheus-port": 29000, "--request-timeout-secs": RouterArgs.request_timeout_secs,
        "--retry-max-retries": RouterArgs.retry_max_retries, "--retry-initial-backoff-ms": 50,
        "--retry-max-backoff-ms": 30_000, "--cb-failure-threshold": 10, "--cb-success-threshold": 3,
        "--cb-timeout-duration-secs": 60, "--cb-window-duration-secs": 120,
        "--health-failure-threshold": RouterArgs.health_failure_threshold,
        "--health-success-threshold": RouterArgs.health_success_threshold,
        "--health-check-timeout-secs": RouterArgs.health_check_timeout_secs,
        "--health-check-interval-secs": RouterArgs.health_check_interval_secs,
        "--max-concurrent-requests": 256, "--queue-size": 100, "--queue-timeout-secs": 60,
    }
    for name, default in ints.items():
        p.add_argument(name, type=int, default=default)
    p.add_argument("--rate-limit-tokens-per-second", type=int, default=None)
    for name, default in {"--cache-threshold": 0.3, "--balance-rel-threshold": 1.5,
                          "--retry-backoff-multiplier": 1.5, "--retry-jitter-factor": 0.2}.items():
        p.add_argument(name, type=float, default=default)
    p.add_argument("--api-key", type=str, default=None,
                   help="The api key used for the authorization with the worker.  Useful when the dp aware "
                        "scheduling strategy is enaled.")
    p.add_argument("--log-dir", type=str, default=None)
    p.add_argument("--log-level", type=str, default="info", choices=["debug", "info", "warning", "error", "critical"])
    for name in ("--selector", "--prefill-selector", "--decode-selector"):
        p.add_argument(name, type=str, nargs="+", default={})
    for name in ("--service-discovery-namespace", "--model-path", "--tokenizer-path"):
        p.add_argument(name, type=str, default=None)
    p.add_argument("--prometheus-host", type=str, default="127.0.0.1")
    p.add_argument("--request-id-headers", type=str, nargs="*")
    p.add_argument("--cors-allowed-origins", type=str, nargs="*", default=[])
    p.add_argument("--health-check-endpoint", type=str, default=RouterArgs.health_check_endpoint)
    return p


def parse(argv: list[str]) -> RouterArgs:
    args = parser().parse_args(argv)
    if args.pd_disaggregation or args.service_discovery or args.enable_igw:
        parser().error("the sandbox's simulated router models the regular mode only (no PD, IGW or "
                       "service discovery)")
    return RouterArgs.from_cli_args(args)
