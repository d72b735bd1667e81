#!/usr/bin/env python3
"""A small, real PyTorch DDP training job for TiHub: an MLP on a synthetic MNIST-like problem.

The data: 10 classes of 16x16 "images", each a noisy, randomly shifted and scaled copy of its class's
smooth prototype. It is generated from a fixed seed, so every rank builds the same data set without
downloading anything, and it is learnable: the loss drops steadily over a few epochs.

Distributed set-up: TiHub starts one process per instance of a distributed job and gives each the
torchrun environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK=0). This script reads it
through ``init_method="env://"``; run alone (no WORLD_SIZE) it trains as a world of one. The backend is
NCCL when the instance has a usable GPU (CUDA_VISIBLE_DEVICES set and CUDA working), gloo otherwise.

Rank 0 writes to the output directory (``--output-dir``, else $OUTPUT_DIR, else /mnt/output):
  tb/              TensorBoard event files (tb/metrics.csv instead when tensorboard is not installed)
  checkpoint.pt    model and optimizer state, epoch, per-epoch losses
  metrics.json     per-epoch loss and accuracy lists, world size, backend, timings
Every rank prints ``epoch=N loss=X ...`` once per epoch (the loss averaged over all ranks).

    python train.py --epochs 3 --output-dir /tmp/out                         # one process
    torchrun --nproc-per-node 2 train.py --epochs 3 --output-dir /tmp/out    # two, like TiHub does
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

NUM_CLASSES = 10
SIDE = 16  # images are SIDE x SIDE, flattened


def env(name: str, default, cast=str):
    value = os.environ.get(name)
    return default if value in (None, "") else cast(value)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=env("EPOCHS", 3, int), help="epochs (env EPOCHS)")
    p.add_argument("--lr", type=float, default=env("LR", 0.05, float), help="SGD learning rate (env LR)")
    p.add_argument("--batch-size", type=int, default=env("BATCH_SIZE", 64, int),
                   help="batch size per rank (env BATCH_SIZE)")
    p.add_argument("--samples", type=int, default=env("SAMPLES", 8192, int),
                   help="training samples in all (env SAMPLES)")
    p.add_argument("--seed", type=int, default=env("SEED", 1234, int), help="data and model seed (env SEED)")
    p.add_argument("--output-dir", default=env("OUTPUT_DIR", "/mnt/output"),
                   help="where rank 0 writes tb/, checkpoint.pt and metrics.json (env OUTPUT_DIR)")
    p.add_argument("--timeout", type=float, default=env("DIST_TIMEOUT", 300, float),
                   help="seconds a collective may wait for the other ranks (env DIST_TIMEOUT)")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.samples < NUM_CLASSES or args.lr <= 0:
        p.error("--epochs, --batch-size and --lr must be positive, --samples at least 10")
    return args


def output_dir(path: str) -> str:
    """The output directory, as the job sees it.

    TiHub's local backend puts a volume mounted at /mnt/output at that path when it has bubblewrap;
    without it, it links the volume into the job's working directory instead (``./mnt/output``, a
    symbolic link). Prefer that link when it is there.
    """
    if os.path.isabs(path):
        linked = os.path.join(os.getcwd(), path.lstrip("/"))
        if os.path.islink(linked) and os.path.isdir(linked):
            return linked
    return path


# -- data and model -----------------------------------------------------------------------------
def make_dataset(samples: int, seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Seeded synthetic 10-class images: smooth prototypes + shift, contrast and pixel noise."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(NUM_CLASSES, 1, 4, 4, generator=g)
    protos = F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False).squeeze(1)
    protos = (protos - protos.mean(dim=(1, 2), keepdim=True)) / protos.std(dim=(1, 2), keepdim=True)

    def draw(n: int) -> TensorDataset:
        labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        images = protos[labels]
        shifts = torch.randint(-2, 3, (n, 2), generator=g)
        images = torch.stack([torch.roll(img, (int(dy), int(dx)), dims=(0, 1))
                              for img, (dy, dx) in zip(images, shifts)])
        contrast = 0.5 + torch.rand(n, 1, 1, generator=g)
        images = contrast * images + 2.0 * torch.randn(n, SIDE, SIDE, generator=g)
        return TensorDataset(images.reshape(n, SIDE * SIDE), labels)

    return draw(samples), draw(max(NUM_CLASSES, samples // 8))


class MLP(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(SIDE * SIDE, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, NUM_CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# -- distributed set-up -------------------------------------------------------------------------
def pick_backend(local_rank: int) -> tuple[str, torch.device]:
    """NCCL on a GPU that really works; gloo on the CPU otherwise (CPU plans, CUDA build without GPU)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "").strip() and dist.is_nccl_available():
        try:
            if torch.cuda.is_available() and torch.cuda.device_count() > 0:
                device = torch.device("cuda", local_rank % torch.cuda.device_count())
                torch.cuda.set_device(device)
                torch.ones(1, device=device).add_(1)  # fails here, not in the middle of training
                return "nccl", device
        except Exception as e:  # noqa: BLE001 - any CUDA trouble means: train on the CPU
            print(f"CUDA is not usable ({type(e).__name__}: {e}); falling back to gloo on the CPU", flush=True)
    return "gloo", torch.device("cpu")


def init_distributed(timeout: float) -> tuple[int, int, str, torch.device]:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if "MASTER_ADDR" not in os.environ:  # run by hand, alone: a world of one on this machine
        if world_size != 1:
            sys.exit("WORLD_SIZE > 1 but no MASTER_ADDR/MASTER_PORT: start this with torchrun or on TiHub")
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        if "MASTER_PORT" not in os.environ:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    backend, device = pick_backend(local_rank)
    dist.init_process_group(backend=backend, init_method="env://", world_size=world_size, rank=rank,
                            timeout=dt.timedelta(seconds=timeout),
                            **({"device_id": device} if device.type == "cuda" else {}))
    return rank, world_size, backend, device


# -- logging --------------------------------------------------------------------------------------
class ScalarLog:
    """TensorBoard event files under tb/, or tb/metrics.csv when tensorboard is not installed."""

    def __init__(self, log_dir: str):
        os.makedirs(log_dir, exist_ok=True)
        self.writer = self.csv = self._file = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            print(f"tensorboard is not installed ({e}): writing {log_dir}/metrics.csv instead of event files",
                  flush=True)
            self._file = open(os.path.join(log_dir, "metrics.csv"), "w", newline="")  # noqa: SIM115
            self.csv = csv.writer(self._file)
            self.csv.writerow(["tag", "step", "value"])
        else:
            self.writer = SummaryWriter(log_dir=log_dir)

    def add(self, tag: str, value: float, step: int) -> None:
        if self.writer is not None:
            self.writer.add_scalar(tag, value, step)
        else:
            self.csv.writerow([tag, step, value])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        else:
            self._file.close()


def write_json_atomic(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# -- training -------------------------------------------------------------------------------------
def evaluate(model: nn.Module, data: TensorDataset, device: torch.device) -> float:
    model.eval()
    with torch.no_grad():
        x, y = data.tensors
        correct = (model(x.to(device)).argmax(dim=1) == y.to(device)).sum().item()
    model.train()
    return correct / len(y)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)  # one core per instance: more threads would only fight each other
    started = time.monotonic()
    rank, world_size, backend, device = init_distributed(args.timeout)
    out_dir = output_dir(args.output_dir)
    print(f"rank={rank} world_size={world_size} backend={backend} device={device} "
          f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} output_dir={out_dir}", flush=True)

    try:
        train_set, val_set = make_dataset(args.samples, args.seed)
        torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
        model = DDP(MLP().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True,
                                     seed=args.seed, drop_last=False)
        loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=0)

        log = None
        if rank == 0:
            os.makedirs(out_dir, exist_ok=True)
            log = ScalarLog(os.path.join(out_dir, "tb"))
        losses, accuracies, epoch_seconds = [], [], []
        step = 0
        for epoch in range(1, args.epochs + 1):
            t0 = time.monotonic()
            sampler.set_epoch(epoch)
            # summed on this rank, then over all ranks: the epoch's mean loss over every sample seen
            totals = torch.zeros(2, dtype=torch.float64, device=device)
            for x, y in loader:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                optimizer.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x), y)
                loss.backward()  # DDP all-reduces the gradients here
                optimizer.step()
                totals[0] += loss.detach().double() * len(y)
                totals[1] += len(y)
                step += 1
                if log is not None:
                    log.add("train/batch_loss", loss.item(), step)
            dist.all_reduce(totals, op=dist.ReduceOp.SUM)
            epoch_loss = (totals[0] / totals[1]).item()
            if not math.isfinite(epoch_loss):
                raise FloatingPointError(f"the loss diverged at epoch {epoch} ({epoch_loss}): lower --lr")
            accuracy = evaluate(model.module, val_set, device)
            losses.append(epoch_loss)
            accuracies.append(accuracy)
            epoch_seconds.append(time.monotonic() - t0)
            print(f"epoch={epoch} loss={epoch_loss:.6f} val_accuracy={accuracy:.4f} rank={rank} "
                  f"seconds={epoch_seconds[-1]:.2f}", flush=True)
            if rank == 0:
                log.add("train/loss", epoch_loss, epoch)
                log.add("val/accuracy", accuracy, epoch)

        if rank == 0:
            log.close()
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": args.epochs, "losses": losses, "args": vars(args)},
                       os.path.join(out_dir, "checkpoint.pt"))
            write_json_atomic(os.path.join(out_dir, "metrics.json"), {
                "loss": losses, "val_accuracy": accuracies, "epochs": args.epochs, "world_size": world_size,
                "backend": backend, "device": str(device), "lr": args.lr, "batch_size": args.batch_size,
                "samples": args.samples, "seed": args.seed, "epoch_seconds": epoch_seconds,
                "seconds": time.monotonic() - started,
                "tensorboard": log.writer is not None,
            })
            print(f"wrote {out_dir}/checkpoint.pt, {out_dir}/metrics.json and {out_dir}/tb/", flush=True)
        dist.barrier()  # nobody leaves before rank 0 has written its files
    finally:
        dist.destroy_process_group()
    print(f"done rank={rank} seconds={time.monotonic() - started:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
