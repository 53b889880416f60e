#!/usr/bin/env python3
"""Writes nodes.csv and pods.csv here: a small synthetic trace in the openb format.

It lets `troupe simulate` run on a fresh clone without the Alibaba trace. The numbers are
invented, shaped like the published openb statistics (mostly 8-GPU and 2-GPU nodes; about 13%
CPU-only pods, 38% pods sharing one GPU, 47% one whole GPU, a few 2-, 4- and 8-GPU pods, asking
together for ~98% of the GPUs), so policies rank roughly as they do on the real trace.
Deterministic: run it again and the files come out the same.
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(7)

# (count, gpus, model, cpu_milli, memory_mib)
NODE_KINDS = [
    (20, 8, "G2", 96000, 393216),
    (16, 2, "T4", 104000, 524288),
    (6, 4, "V100M16", 32000, 131072),
    (4, 2, "P100", 16000, 122880),
    (2, 8, "G3", 128000, 786432),
]

nodes = []
for count, gpus, model, cpu, mem in NODE_KINDS:
    for _ in range(count):
        nodes.append((gpus, model, cpu, mem))
rng.shuffle(nodes)
capacity = sum(n[0] for n in nodes) * 1000

SHARES = [810, 470, 320, 650, 230, 500, 250]
pods = []
requested = 0
while requested < 0.98 * capacity:
    r = rng.random()
    if r < 0.13:
        num_gpu, milli = 0, 0
    elif r < 0.51:
        num_gpu, milli = 1, rng.choice(SHARES)
    elif r < 0.975:
        num_gpu, milli = 1, 1000
    else:
        num_gpu, milli = rng.choice([2, 4, 8]), 1000
    cpu = rng.choice([2000, 4000, 6000, 8000, 12000, 16000]) * max(1, num_gpu)
    mem = cpu // 1000 * rng.choice([2048, 4096])
    pods.append((cpu, mem, num_gpu, milli))
    requested += num_gpu * milli

with open(os.path.join(HERE, "nodes.csv"), "w") as f:
    f.write("sn,cpu_milli,memory_mib,gpu,model\n")
    for i, (gpus, model, cpu, mem) in enumerate(nodes):
        f.write(f"example-node-{i:03d},{cpu},{mem},{gpus},{model}\n")
with open(os.path.join(HERE, "pods.csv"), "w") as f:
    f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n")
    for i, (cpu, mem, num_gpu, milli) in enumerate(pods):
        f.write(f"example-pod-{i:04d},{cpu},{mem},{num_gpu},{milli},\n")
print(f"{len(nodes)} nodes ({capacity // 1000} GPUs), {len(pods)} pods asking {requested / capacity:.1%} of the GPUs")
