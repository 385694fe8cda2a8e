"""Records the messages real torch raises for what the simulated torch (sandbox/sim/pkgs/torch/_tensor.py) raises:
run on a machine with a CUDA GPU; prints one JSON line per message (tests/fixtures/logs/torch_messages.jsonl)."""
import json

import torch


def said(fn):
    try:
        fn()
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return None


a = torch.arange(8, dtype=torch.int32, device=0)
b = torch.arange(4, dtype=torch.int32, device=0)
cases = {
    "ne, sizes differ": lambda: a != b,
    "item of many": lambda: a.item(),
    "copy_, sizes differ": lambda: a.copy_(b),
    "ne, devices differ": lambda: a != torch.arange(8, dtype=torch.int32),
}
if torch.cuda.device_count() > 1:
    cases["ne, two GPUs"] = lambda: a != torch.arange(8, dtype=torch.int32, device=1)
for case, fn in cases.items():
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "case": case,
                      "text": said(fn)}))
