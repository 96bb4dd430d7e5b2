"""Multi-node launches: a Kubernetes LeaderWorkerSet and a Slurm batch script, from the same spec.

Each node runs the same command with its node rank: SGLang with `--dist-init-addr LEADER:PORT --nnodes N
--node-rank R`; vLLM (multiprocessing backend) with `--nnodes N --node-rank R --master-addr LEADER`,
the other nodes `--headless`.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

import yaml

from firstlight.engines import ENGINES, MultiNode, get_engine
from firstlight.errors import RenderError
from firstlight.rendering.common import Rendering, env_lines, shell_join


def multinode(r: Rendering, what: str) -> MultiNode:
    """The engine's multi-node arguments; a spec that spans one node, or an engine without them, is refused."""
    if r.dep.parallel.nodes < 2:
        raise RenderError(f"{what} is for multi-node launches: set parallel.nodes to 2 or more")
    spec = get_engine(r.dep.engine).multinode
    if spec is None:
        able = ", ".join(name for name, a in ENGINES.items() if a.multinode is not None)
        raise RenderError(f"{r.dep.engine} has no multi-node launch; use one of {able}")
    return spec


def node_args(r: Rendering, leader: str, rank: str, worker: bool) -> list[str]:
    spec = multinode(r, "a multi-node launch")
    return spec.node_args(r.dep.parallel.nodes, leader, rank) + (list(spec.worker_args) if worker else [])


def lws(r: Rendering, image: str | None = None, shm_gib: int = 64) -> str:
    dep = r.dep
    spec = multinode(r, "a LeaderWorkerSet")
    image = image or spec.image
    name = k8s_name(r.unit_name)

    def env() -> list[dict[str, Any]]:
        plain = [{"name": v.name, "value": v.value} for v in r.env if not v.suggested]
        return plain + [{"name": s, "valueFrom": {"secretKeyRef": {"name": name, "key": s}}} for s in sorted(r.secrets)]

    # Probes and the other pods reach the leader at its pod IP: it must listen on every interface.
    argv = list(r.argv)
    if "--host" in argv:
        argv[argv.index("--host") + 1] = "0.0.0.0"
    leader_cmd = argv + node_args(r, "$(LWS_LEADER_ADDRESS)", "0", worker=False)
    worker_cmd = argv + node_args(r, "$(LWS_LEADER_ADDRESS)", "$(LWS_WORKER_INDEX)", worker=True)
    probe = {"httpGet": {"path": r.health_path, "port": dep.port}, "periodSeconds": 10, "timeoutSeconds": 5}
    startup = {**probe, "failureThreshold": math.ceil(r.start_timeout_s / 10)}

    def container(cmd: list[str], leader: bool) -> dict[str, Any]:
        c: dict[str, Any] = {
            "name": "engine",
            "image": image,
            "command": [cmd[0]],
            "args": [_k8s(a) for a in cmd[1:]],
            "env": env(),
            "resources": {"limits": {"nvidia.com/gpu": dep.parallel.gpus_per_node}},
            "ports": [{"containerPort": dep.port, "name": "http"}],
            "volumeMounts": [
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "model", "mountPath": str(dep.model), "readOnly": True},
            ],
        }
        if leader:
            c["startupProbe"] = startup
            c["readinessProbe"] = {**probe, "failureThreshold": 3}
        elif spec.workers_serve_health:  # e.g. SGLang's other nodes, once their ranks are ready
            c["readinessProbe"] = {**probe, "failureThreshold": 3}
        return c

    def pod(cmd: list[str], leader: bool) -> dict[str, Any]:
        return {
            "spec": {
                "containers": [container(cmd, leader)],
                "volumes": [
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib}Gi"}},
                    {"name": "model", "hostPath": {"path": str(dep.model), "type": "Directory"}},
                ],
            }
        }

    manifest = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            # LeaderCreated, not LeaderReady: the leader's HTTP port opens only after every worker has joined
            # the ranks, so waiting for the leader to be ready before creating workers would never end.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": dep.parallel.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod(leader_cmd, True),
                "workerTemplate": pod(worker_cmd, False),
            },
        },
    }
    notes = [
        r.header().rstrip(),
        "# LeaderWorkerSet: one group of parallel.nodes pods; the leader serves HTTP.",
        f"# startupProbe: {startup['failureThreshold']} x 10 s covers the expected load time.",
        f"# Secrets come from the Kubernetes Secret {r.unit_name.lower()} (keys: "
        f"{', '.join(sorted(r.secrets)) or 'none'}), never from this file.",
    ]
    return "\n".join(notes) + "\n" + yaml.safe_dump(manifest, sort_keys=False, width=1000)


def k8s_name(text: str) -> str:
    """A Kubernetes object name (RFC 1123: lower-case letters, digits and '-', at most 63)."""
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")
    return name[:63].rstrip("-") or "firstlight"


def _k8s(arg: str) -> str:
    """`${SECRET}` becomes Kubernetes' `$(SECRET)`, which expands from the container's environment."""
    if arg.startswith("${") and arg.endswith("}"):
        return f"$({arg[2:-1]})"
    return arg


def slurm(r: Rendering) -> str:
    dep = r.dep
    multinode(r, "the Slurm script")
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={r.unit_name}",
        f"#SBATCH --nodes={dep.parallel.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={dep.parallel.gpus_per_node}",
        "#SBATCH --exclusive",
        r.header().rstrip(),
        "set -euo pipefail",
        "",
    ]
    lines += env_lines(r, lambda name, value: f"export {name}={shlex.quote(value)}")
    if r.secrets:
        lines += [
            f': "${{{name}:?set {name} in the environment of sbatch (a secret, not stored here)}}"'
            for name in sorted(r.secrets)
        ]
    argv = shell_join(r.argv)
    lines += [
        "",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "LEADER=${NODES[0]}",
        "# One srun per node, each with its node rank; the leader serves HTTP on port " + str(dep.port) + ".",
        'for RANK in "${!NODES[@]}"; do',
        f'  srun --nodes=1 --ntasks=1 --nodelist="${{NODES[$RANK]}}" {argv} {_slurm_node_args(r)} &',
        "done",
        "wait",
        "",
    ]
    return "\n".join(lines)


def _slurm_node_args(r: Rendering) -> str:
    args = node_args(r, "@LEADER@", "@RANK@", worker=False)
    text = " ".join(shlex.quote(a) for a in args)
    text = text.replace("@LEADER@", '"$LEADER"').replace("@RANK@", '"$RANK"')
    worker_args = multinode(r, "the Slurm script").worker_args
    if worker_args:  # only on the nodes after the leader
        text += f' $([ "$RANK" -gt 0 ] && echo {" ".join(shlex.quote(a) for a in worker_args)})'
    return text
