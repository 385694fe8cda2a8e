# fleet's P2P data check (fleet.host.p2pcheck parses what it prints): with the venv's torch, copy a buffer
# from each GPU to each other GPU and compare it, since the capability report can say OK while peer writes
# land in the wrong place (VFIO, nccl#2335). Prints one JSON line. Usage: python -c TEXT MIB
import json, sys
pairs: list = []
out = {"gpus": 0, "pairs": pairs, "error": None}
try:
    import torch  # type: ignore[import-not-found]  # the host's venv has it, fleet's need not
    mib = max(1, min(int(sys.argv[1]) if len(sys.argv) > 1 else 64, 1024))
    out["gpus"] = n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    count = mib * (1 << 20) // 4
    for i in range(n if n > 1 else 0):  # one GPU: nothing to copy between
        src = (torch.arange(count, dtype=torch.int32, device=i) * 2654435761 + i) & 0x7FFFFFFF
        for j in range(n):
            if i == j:
                continue
            peer = bool(torch.cuda.can_device_access_peer(i, j))
            dst = torch.empty(count, dtype=torch.int32, device=j)
            dst.copy_(src)
            torch.cuda.synchronize(j)
            back = dst.to(i)
            bad = int((back != src).sum().item())
            pairs.append({"src": i, "dst": j, "peer_access": peer, "mib": mib, "mismatched": bad})
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
print(json.dumps(out))
