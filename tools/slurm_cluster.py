"""A real one-node Slurm cluster on loopback, for the tests and for trying `--executor slurm` by hand.

    python tools/slurm_cluster.py up     [--root DIR]   # then: export SLURM_CONF=DIR/etc/slurm.conf
    python tools/slurm_cluster.py status [--root DIR]
    python tools/slurm_cluster.py down   [--root DIR]

`up` starts, from Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server; run as root, no init
system needed), in this order, each waited for with a timeout:

1. munged, as the `munge` user, with a key made for this cluster (its socket directory 0755);
2. mariadbd, a database of this cluster only (TCP on 127.0.0.1, a free port);
3. slurmdbd, the accounting daemon, on that database: `sacct` answers as on a real cluster, and
   submitit reads job states through it;
4. slurmctld and slurmd (one node with this machine's CPUs, named after this host, 127.0.0.1), with
   the project's own minimal configuration: proctrack/linuxproc and task/none (no cgroups: they do
   not work in a container), SlurmdTimeout of 10 s (a dead node is noticed within seconds),
   JobRequeue=0 (a job on a node that dies ends NODE_FAIL instead of waiting for the node),
   ReturnToService=2 (a node that comes back is used again) and KillWait=2 (a cancelled job is
   killed 2 s after the SIGTERM that submitit's jobs ignore). Partitions: `debug` (default, UP) and
   `closed` (DOWN: a queue that never starts a job).

Everything lives under one folder (default /tmp/companion-slurm): configuration, key, sockets, the
database, state, spool, logs and pid files. Each daemon carries COMPANION_SLURM_ROOT=<folder> in its
environment; `down` stops them (SIGTERM, then SIGKILL after a timeout), then every process still
carrying that mark and every descendant of one (job steps and the jobs they ran), checks that none
is left and removes the folder. Nothing else on the machine is touched: other Slurm or MariaDB
instances, /etc/munge and /etc/slurm are left alone.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_ROOT = Path("/tmp/companion-slurm")
MARK = "COMPANION_SLURM_ROOT"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")  # start order; stopped in reverse
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
CLUSTER = "companion"
PARTITION, CLOSED = "debug", "closed"


class ClusterError(RuntimeError):
    """The cluster did not come up (or go down); the message ends with the daemons' logs."""


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Cluster:
    """The cluster under `root`: its paths, its environment (`env`), and `up`, `down`, `status`."""

    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT):
        self.root = Path(root).resolve()
        self.etc, self.log, self.run = self.root / "etc", self.root / "log", self.root / "run"
        self.conf = self.etc / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket.2"
        self.node = socket.gethostname().split(".")[0]

    # ------------------------------------------------------------------ environment and commands

    @property
    def env(self) -> dict[str, str]:
        """What a client needs to use this cluster (sbatch, squeue, sacct, scancel, submitit)."""
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster (`SLURM_CONF` set), with a timeout."""
        return subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout, check=check)

    # ------------------------------------------------------------------ up

    def up(self, timeout: float = 120) -> "Cluster":
        """Start the five daemons (see the module docstring); raise ClusterError with their logs if one
        does not come up within `timeout` seconds. A cluster already running under `root` is taken down
        first."""
        missing = [d for d in DAEMONS if shutil.which(d) is None]
        if missing:
            raise ClusterError(f"{', '.join(missing)} not found: apt-get install -y {PACKAGES}")
        if os.geteuid() != 0:
            raise ClusterError("the test cluster runs its daemons as root (slurmd must); run as root")
        if self.root.exists():
            self.down()
        deadline = time.monotonic() + timeout
        try:
            self._write_config()
            self._start_munge(deadline)
            self._start_mariadb(deadline)
            self._start("slurmdbd", ["slurmdbd", "-D"])
            self._wait(deadline, "slurmdbd answering sacctmgr",
                       lambda: self.command("sacctmgr", "-n", "-P", "list", "cluster", check=False).returncode == 0)
            if CLUSTER not in self.command("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster").stdout.split():
                self.command("sacctmgr", "-i", "add", "cluster", CLUSTER)
            self._start("slurmctld", ["slurmctld", "-D", "-i"])
            self._wait(deadline, "slurmctld answering scontrol ping",
                       lambda: "is UP" in self.command("scontrol", "ping", check=False).stdout)
            self._start("slurmd", ["slurmd", "-D", "-N", self.node])
            self._wait(deadline, f"node {self.node} idle", lambda: self.node_state() == "idle")
        except Exception as err:
            logs = self.logs()
            try:
                self.down(remove=False)  # the logs stay under root
            except ClusterError as also:
                logs += f"\nand taking it down: {also}"
            raise ClusterError(f"{err}\n{logs}") from None
        return self

    def _write_config(self) -> None:
        for d in (self.etc, self.log, self.run, self.root / "state", self.root / "spool", self.root / "mysql"):
            d.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        ctld, slurmd, dbd, mysql = _free_ports(4)
        (self.run / "mysql.port").write_text(str(mysql))
        cpus = os.cpu_count() or 1
        r = self.root
        self.conf.write_text(f"""\
# The companion's one-node test cluster (tools/slurm_cluster.py); generated, not edited.
ClusterName={CLUSTER}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/run/slurmctld.pid.slurm
SlurmdPidFile={r}/run/slurmd.pid.slurm
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd}
# with auth/munge, AccountingStoragePass names the munge socket that connections to slurmdbd use
AccountingStoragePass={self.munge_socket}
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=30
MessageTimeout=10
KillWait=2
InactiveLimit=0
MinJobAge=600
JobRequeue=0
MailProg=/bin/true
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
PartitionName={CLOSED} Nodes={self.node} MaxTime=INFINITE State=DOWN
""")
        dbd_conf = self.etc / "slurmdbd.conf"
        dbd_conf.write_text(f"""\
# The companion's test cluster: accounting in its own MariaDB (tools/slurm_cluster.py).
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost={self.node}
DbdAddr=127.0.0.1
DbdPort={dbd}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/run/slurmdbd.pid.slurm
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={mysql}
StorageUser=slurm
StoragePass=companion
StorageLoc=slurm_acct_db
""")
        dbd_conf.chmod(0o600)  # slurmdbd refuses a config others can read (it holds the password)

    def _start_munge(self, deadline: float) -> None:
        mdir = self.munge_socket.parent
        mdir.mkdir(exist_ok=True)
        mdir.chmod(0o755)  # munged checks its socket directory: not writable by others
        key = mdir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        uid, gid = pwd.getpwnam("munge").pw_uid, grp.getgrnam("munge").gr_gid
        for p in (mdir, key):
            os.chown(p, uid, gid)
        self._start("munged", ["munged", "-F", f"--socket={self.munge_socket}", f"--key-file={key}",
                               f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
                               f"--seed-file={mdir}/munged.seed", "--num-threads=4"], user="munge")

        def works() -> bool:
            cred = subprocess.run(["munge", "-n", "-S", str(self.munge_socket)], capture_output=True, timeout=10)
            return cred.returncode == 0 and subprocess.run(
                ["unmunge", "-S", str(self.munge_socket)], input=cred.stdout, capture_output=True,
                timeout=10).returncode == 0

        self._wait(deadline, "munge credentials (munge -n | unmunge)", works)

    def _start_mariadb(self, deadline: float) -> None:
        data, sock = self.root / "mysql", self.root / "run" / "mysqld.sock"
        port = (self.run / "mysql.port").read_text()
        if not (data / "mysql").is_dir():
            _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                  "--auth-root-authentication-method=normal", "--skip-test-db"], max(deadline - time.monotonic(), 1))
        self._start("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                 f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                                 "--user=root", f"--pid-file={self.run}/mariadbd.pid.db",
                                 f"--log-error={self.log}/mariadbd.log", "--innodb-buffer-pool-size=32M",
                                 "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2"])
        self._wait(deadline, "mariadbd answering", lambda: subprocess.run(
            ["mariadb-admin", "--no-defaults", f"--socket={sock}", "-u", "root", "ping"],
            capture_output=True, timeout=10).returncode == 0)
        _run(["mariadb", "--no-defaults", f"--socket={sock}", "-u", "root", "-e",
              "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'companion'; "
              "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"], 30)

    def _start(self, name: str, argv: list[str], user: str | None = None) -> None:
        """Start one daemon in the foreground of its own session, marked, its output in log/<name>.out;
        its pid in run/<name>.pid."""
        env = {**os.environ, **self.env, MARK: str(self.root)}
        with open(self.log / f"{name}.out", "ab") as out:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=self.root,
                                    **({"user": user, "group": user, "extra_groups": []} if user else {}))
        (self.run / f"{name}.pid").write_text(str(proc.pid))
        time.sleep(0.2)
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited at once (code {proc.returncode})")

    def _wait(self, deadline: float, what: str, ready) -> None:
        while True:
            try:
                if ready():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {what}")
            for name in DAEMONS:
                pid = self.pid(name)
                if pid is not None and not _alive(pid):
                    raise ClusterError(f"{name} died while waiting for {what}")
            time.sleep(0.3)

    # ------------------------------------------------------------------ state

    def pid(self, name: str) -> int | None:
        try:
            return int((self.run / f"{name}.pid").read_text())
        except (OSError, ValueError):
            return None

    def node_state(self) -> str:
        """sinfo's state of the node (idle, mixed, allocated, down*, drained, …), or '' if unknown."""
        out = self.command("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", check=False).stdout.split()
        return out[0] if out else ""

    def _job_of(self, env: dict[str, str]) -> bool:
        """Whether a process with environment `env` belongs to a job of this cluster: Slurm gave it a job id
        and it was submitted against this cluster's configuration (a job carries its submitter's environment,
        not the daemons' mark)."""
        return "SLURM_JOB_ID" in env and env.get("SLURM_CONF") == str(self.conf)

    def processes(self) -> dict[int, str]:
        """{pid: command line} of every live process of this cluster: the marked ones (its daemons, and
        the job steps slurmd started, which inherit the mark), the jobs' (`_job_of`, orphans included) and
        their descendants."""
        table = _process_table()
        mine = {pid for pid, (_, env, _) in table.items() if env.get(MARK) == str(self.root) or self._job_of(env)}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _, _) in table.items() if ppid in mine and pid not in mine}
            mine |= more
            grew = bool(more)
        return {pid: table[pid][2] for pid in sorted(mine)}

    def status(self) -> str:
        lines = [f"cluster {CLUSTER} under {self.root} (SLURM_CONF={self.conf})"]
        for name in DAEMONS:
            pid = self.pid(name)
            lines.append(f"  {name:<9} {'pid ' + str(pid) if pid and _alive(pid) else 'not running'}")
        if self.conf.exists():
            for cmd in (["sinfo"], ["squeue"]):
                res = self.command(*cmd, check=False, timeout=15)
                lines.append((res.stdout + res.stderr).rstrip())
        return "\n".join(lines)

    def logs(self, tail: int = 25) -> str:
        """The last `tail` lines of every daemon log, for an error message."""
        parts = []
        for path in sorted(self.log.glob("*")) + sorted((self.root / "munge").glob("*.log")):
            try:
                lines = path.read_text(errors="replace").splitlines()[-tail:]
            except OSError:
                continue
            parts.append(f"--- {path} (last {len(lines)} lines)\n" + "\n".join(lines))
        return "\n".join(parts) or f"(no logs under {self.log})"

    # ------------------------------------------------------------------ node death, down

    def kill_node(self, settle: float = 2.0) -> list[int]:
        """The node dies: SIGKILL slurmd and every process it started (job steps and their jobs), as a
        machine losing power. slurmctld, slurmdbd and the rest stay. Returns the pids.

        One pass is not enough under load: a job step slurmd was forking when it died comes to life
        after the first look (orphaned, so no longer below slurmd) and would finish its job as if the
        node lived. So the node's processes are looked for again until none has been seen for `settle`
        seconds: slurmd's own (its pid file, or a marked process still running slurmd), every marked
        slurmstepd, every job process of this cluster (`_job_of`: an orphan whose step died while it was
        being started is no longer below any of them), and their descendants."""
        slurmd, doomed = self.pid("slurmd"), set()
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < settle:
            table = _process_table()
            node = {pid for pid, (_, env, cmd) in table.items()
                    if (env.get(MARK) == str(self.root)
                        and (pid == slurmd or _program(cmd) in ("slurmd", "slurmstepd"))) or self._job_of(env)}
            found = {pid for pid in table if pid in node or _has_ancestor(pid, node, table)} - doomed
            for pid in found:
                _signal(pid, signal.SIGKILL)
            _reap(found | doomed)
            if found:
                doomed |= found
                quiet_since = time.monotonic()
            time.sleep(0.1)
        return sorted(doomed)

    def start_slurmd(self, timeout: float = 60) -> None:
        """Bring the node back (a rebooted machine): start slurmd and wait until it is idle again."""
        self._start("slurmd", ["slurmd", "-D", "-N", self.node])
        self._wait(time.monotonic() + timeout, f"node {self.node} idle", lambda: self.node_state() == "idle")

    def down(self, timeout: float = 30, remove: bool = True) -> None:
        """Stop every process of this cluster (daemons in reverse order with SIGTERM, SIGKILL after
        `timeout`; then anything left), check none remains (else ClusterError naming them), and
        remove the folder unless `remove` is False."""
        for name in reversed(DAEMONS):
            pid = self.pid(name)
            if pid is not None and _alive(pid) and pid in self.processes():
                _signal(pid, signal.SIGTERM)
                end = time.monotonic() + timeout
                while _alive(pid) and time.monotonic() < end:
                    _reap({pid})
                    time.sleep(0.1)
                _signal(pid, signal.SIGKILL)
                _reap({pid})
        end = time.monotonic() + timeout
        while (left := self.processes()) and time.monotonic() < end:
            for pid in left:
                _signal(pid, signal.SIGKILL)
            _reap(set(left))
            time.sleep(0.1)
        if left:
            raise ClusterError(f"still running after down: {left}")
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(argv: list[str], timeout: float) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise ClusterError(f"{argv[0]} failed (code {out.returncode}): {(out.stdout + out.stderr)[-2000:]}")


def _process_table() -> dict[int, tuple[int, dict[str, str], str]]:
    """{pid: (parent pid, environment, command line)} of every live (non-zombie) process."""
    table = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":
                continue
            raw = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        table[int(entry.name)] = (int(stat[1]), env, cmd)
    return table


def _program(cmd: str) -> str:
    """The program a command line runs: "slurmd" for "/usr/sbin/slurmd -D -N vm", "slurmstepd" for the title a job
    step gives itself ("slurmstepd: [12.batch]")."""
    return Path(cmd.split(" ", 1)[0]).name.rstrip(":")


def _has_ancestor(pid: int, ancestors: set[int], table: dict) -> bool:
    seen = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        pid = table[pid][0]
        if pid in ancestors:
            return True
    return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pids) -> None:
    """Collect the exit status of those of `pids` that are children of this process (no zombies)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--root", default=str(DEFAULT_ROOT), help=f"the cluster's folder (default {DEFAULT_ROOT})")
    args = parser.parse_args(argv)
    cluster = Cluster(args.root)
    try:
        if args.action == "up":
            start = time.monotonic()
            cluster.up()
            print(f"cluster up in {time.monotonic() - start:.1f} s; use it with:\n  export SLURM_CONF={cluster.conf}")
        elif args.action == "down":
            start = time.monotonic()
            cluster.down()
            print(f"cluster down in {time.monotonic() - start:.1f} s; no process of it is left")
        else:
            print(cluster.status())
    except ClusterError as err:
        print(f"slurm_cluster {args.action}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
