"""A one-node Slurm on this machine, for the tests of `--executor slurm`: munged, slurmctld and slurmd
(Debian's `munge` and `slurm-wlm`, which `.ci/run` installs) started as root from a config of their own in a
temporary folder - free ports, their own munge key and socket, `localhost` as controller and only node, with
this machine's CPUs, no accounting - and stopped after, daemons killed by the ids they were started with.

`SlurmCluster.start` raises `SlurmUnavailable` with the reason (not root, a program missing, a daemon that
did not come up: the tail of its log) so the tests skip saying why. The client commands (sbatch, squeue, ...)
find this cluster through `SLURM_CONF`, which the caller sets to `SlurmCluster.conf`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL = 8
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")

SLURM_CONF = """\
ClusterName=plstitch-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
# the munge socket of this cluster; cred_expire: how long a requeued job waits before it may start again
# (default 120 s)
AuthInfo=socket={munge_socket},cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
MinJobAge=600
NodeName=localhost CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be started here; the message says why (the tests skip with it)."""


def unavailable_reason() -> str | None:
    """Why no Slurm can be started here (not root, programs missing), else None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "starting slurmctld/slurmd/munged needs root"
    missing = [name for name in (*DAEMONS, *CLIENTS) if _program(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge)"
    return None


def _program(name: str) -> str | None:
    """The program's path: on PATH, or in the sbin folders the daemons live in (not on every user's PATH)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _memory_mb() -> int:
    """Half this machine's memory in MB: below what slurmd finds, so the node is never drained for it."""
    return max(256, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20 // 2)


class SlurmCluster:
    """munged, slurmctld and slurmd for one `localhost` node, all files under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.cpus = os.cpu_count() or 1
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with `SLURM_CONF` naming this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *command: str, check: bool = True) -> str:
        """A Slurm client command against this cluster; its stdout."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> None:
        """Write the configs, start the daemons and wait until the node is idle (else `SlurmUnavailable`)."""
        reason = unavailable_reason()
        if reason:
            raise SlurmUnavailable(reason)
        for folder in ("state", "spool", "munge"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        (self.root / "munge").chmod(0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = self.root / "munge" / "munge.socket"
        self.conf.write_text(
            SLURM_CONF.format(
                root=self.root, munge_socket=socket_path, cpus=self.cpus, memory_mb=_memory_mb(),
                ctld_port=_free_port(), slurmd_port=_free_port(),
            ),
            encoding="utf-8",
        )  # fmt: skip
        munge = self.root / "munge"
        self._daemon(
            "munged", "munged", "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
            f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={munge / 'munged.log'}",
        )  # fmt: skip
        self._wait(socket_path.exists, "munged", munge / "munged.log")
        self._daemon("slurmctld", "slurmctld", "-D", "-f", str(self.conf))
        self._wait(self._controller_answers, "slurmctld", self.root / "slurmctld.log")
        self._daemon("slurmd", "slurmd", "-D", "-f", str(self.conf), "-N", "localhost")
        self._wait(self._node_idle, "slurmd", self.root / "slurmd.log")

    def _daemon(self, name: str, *command: str) -> None:
        program = _program(command[0]) or command[0]
        with (self.root / f"{name}.console").open("w") as log:
            self.processes[name] = subprocess.Popen(
                [program, *command[1:]], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def _controller_answers(self) -> bool:
        return self.run("sinfo", "-h", check=False) != ""

    def _node_idle(self) -> bool:
        return self.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle"

    def _wait(self, ready, name: str, log: Path) -> None:
        """Wait until `ready()`; a daemon that exits or does not come up in time stops all, with its log."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                break
            if ready():
                return
            time.sleep(0.3)
        self.stop()
        tails = []
        for path in (log, self.root / f"{name}.console"):
            if path.exists():
                tails += path.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:]
        raise SlurmUnavailable(f"{name} did not come up: " + " | ".join(line.strip() for line in tails))

    def stop(self) -> None:
        """Cancel every job, wait for them to end, then stop slurmd, slurmctld and munged (by their ids)."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            jobs = self._jobs()
            if jobs:
                self.run("scancel", *jobs, check=False)
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while time.monotonic() < deadline and self._jobs():
                    time.sleep(0.5)
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _jobs(self) -> list[str]:
        """The ids of the jobs not yet ended."""
        return self.run("squeue", "-h", "-o", "%i", check=False).split()

    def wait_for(self, job_id: str, states: set[str], timeout: float = 60.0) -> str:
        """Wait until job `job_id` is in one of `states` (squeue); its state."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            lines = self.run("squeue", "-h", "-r", "--states=all", "-o", "%i|%T", "-j", job_id, check=False)
            state = dict(line.split("|", 1) for line in lines.split() if "|" in line).get(job_id, "")
            if state in states:
                return state
            time.sleep(0.3)
        raise TimeoutError(f"job {job_id} is {state or 'unknown'}, not {sorted(states)}, after {timeout} s")


@contextmanager
def module_slurm(folder: Path, env: Mapping[str, str] | None = None) -> Iterator[SlurmCluster]:
    """A started one-node Slurm in `folder` with `SLURM_CONF` (and `env`, which its jobs inherit) set, stopped
    after: a test module's fixture. Skips the module with the reason where submitit or Slurm is missing."""
    pytest.importorskip("submitit", reason="--executor slurm needs the extra: pip install 'plstitch[slurm]'")
    cluster = SlurmCluster(folder)
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        pytest.skip(f"no Slurm here: {exc}")
    mp = pytest.MonkeyPatch()
    mp.setenv("SLURM_CONF", str(cluster.conf))
    for name, value in (env or {}).items():
        mp.setenv(name, value)
    try:
        yield cluster
    finally:
        mp.undo()
        cluster.stop()
