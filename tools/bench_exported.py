#!/usr/bin/env python3
"""Times training steps of a model exported by `tapestry export --to pytorch` on the batches that
`tapestry bench --model DIR --dump-batches FILE` timed Tapestry on: the same sentence pairs, the
same Adam settings and gradient clipping, the model in training mode (its dropout on). The last
line is 'RESULT {json}' with the keys of Tapestry's (train_ms_median, train_real_tok_s, ...).

usage: bench_exported.py PACKAGE BATCHES [--threads N] [--blas-threads N] [--warmup N] [--iters N]
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("package", help="the directory `tapestry export --to pytorch` wrote")
    p.add_argument("batches", help="the JSON file `tapestry bench --dump-batches` wrote")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads [1]")
    p.add_argument("--blas-threads", type=int, default=0,
                   help="OpenBLAS threads (0: as many as --threads) [0]")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps [2]")
    p.add_argument("--iters", type=int, default=8, help="timed steps [8]")
    a = p.parse_args()
    # OpenBLAS reads its thread count when it loads, so before torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.blas_threads or a.threads)
    import torch  # noqa: E402

    torch.set_num_threads(a.threads)
    sys.path.insert(0, a.package)
    from model import PAD, load_model, make_batch  # noqa: E402

    with open(a.batches) as f:
        spec = json.load(f)
    batches = [make_batch(list(zip(b["src"], b["tgt"]))) for b in spec["batches"]]
    opt = spec["optimizer"]
    model = load_model(a.package)
    model.train()
    params = [q for q in model.parameters() if q.requires_grad]
    adam = torch.optim.Adam(params, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"])
    times, losses = [], []
    for i in range(a.warmup + a.iters):
        batch = batches[i % len(batches)]
        t0 = time.perf_counter()
        adam.zero_grad(set_to_none=True)
        loss = model.loss(batch)
        loss.backward()
        if opt["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, opt["clip"])
        adam.step()
        losses.append(loss.item())
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    tokens = statistics.mean(int((b.tgt_out != PAD).sum()) for b in batches)
    step = statistics.median(times)
    print(f"train : {step * 1e3:9.1f} ms/batch over {len(times)} iters | "
          f"{tokens / step:9.0f} real tgt tok/s | loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    res = {
        "impl": "pytorch-export", "threads": a.threads, "blas_threads": a.blas_threads or a.threads,
        "torch": torch.__version__, "params": sum(q.numel() for q in params),
        "batch": len(spec["batches"][0]["src"]), "pool": len(batches),
        "train_ms_median": step * 1e3, "train_real_tok_s": tokens / step,
        "loss_first": losses[0], "loss_last": losses[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
