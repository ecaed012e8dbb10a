"""The soak's server process and its faults: one gdn-server incarnation
(start, SIGKILL, SIGTERM drain and what its log says the drain wrote and
lost), the full snapshot dir (a tiny tmpfs in a mount namespace, or the dir
swapped for a regular file) and the server's memory (RSS, device memory).
soak.py decides when each fault fires; README.md says what each is checked
against.
"""

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

# A tmpfs of tiny_bytes mounted over the snapshot dir in a private mount
# namespace, the real dir bound at $4 so that what the drain did write is
# copied back for the next server (which must restore exactly those).
FULL_SCRIPT = ('mount --bind "$2" "$4" && mount -t tmpfs -o size="$1" tmpfs "$2" || exit 97; '
               'pidf="$3"; snap="$2"; real="$4"; shift 4; "$@" & echo $! > "$pidf"; '
               'wait $!; rc=$?; cp "$snap"/*.gdnsnap "$real"/ 2>/dev/null; exit $rc')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


def gpu_mib(pid, metrics):
    """The server's device memory: its process in nvidia-smi, or, where
    nvidia-smi does not list it (a container's own pid namespace), the
    server's gdn_device_memory_used_bytes. None without a GPU."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        for line in out.splitlines():
            fields = [x.strip() for x in line.split(",")]
            if len(fields) == 2 and fields[0] == str(pid):
                return int(fields[1])
    try:
        with urllib.request.urlopen("http://%s/metrics" % metrics, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    found = re.search(r"^gdn_device_memory_used_bytes (\S+)", text, re.M)
    used = float(found.group(1)) if found else 0
    return int(used / 2 ** 20) if used > 0 else None


def probe_full_method(work, backend):
    """How to give one server a full snapshot dir: a tiny tmpfs in a mount
    namespace (root: unshare -m; else a user namespace), or, where neither
    is allowed (containers without CAP_SYS_ADMIN), the dir swapped for a
    regular file at the fault: every write then fails (ENOTDIR), which
    exercises the same exit status and accounting, though not ENOSPC.
    A user namespace is not tried for cuda: the driver's device access
    inside one is untested."""
    probe = os.path.join(work, "probe-mnt")
    os.makedirs(probe, exist_ok=True)
    methods = [("unshare", ["unshare", "-m"])]
    if backend == "cpu":
        methods.append(("unshare-user", ["unshare", "-Urm"]))
    for method, ns in methods:
        try:
            if subprocess.run(ns + ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe],
                              capture_output=True, timeout=20).returncode == 0:
                return method
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "enotdir"


def block_snapshot_dir(snap_dir):
    """The enotdir full dir, at its server's SIGTERM: the dir swapped for a
    regular file, so that every write of the drain fails (ENOTDIR)."""
    os.rename(snap_dir, snap_dir + ".away")
    open(snap_dir, "w").close()


def unblock_snapshot_dir(snap_dir):
    """After the enotdir drain: the real dir back in its place."""
    os.remove(snap_dir)
    os.rename(snap_dir + ".away", snap_dir)


class Server:
    """One gdn-server incarnation: its process, its real pid, its log."""

    def __init__(self, d, epoch, full):
        self.log = os.path.join(d.out, "server-%d.log" % epoch)
        cmd = [d.a.server_bin, "--listen=127.0.0.1:%d" % d.port, "--metrics_listen=127.0.0.1:0",
               "--backend=" + d.a.backend, "--snapshot_dir=" + d.snap_dir,
               "--drain_timeout_s=%d" % d.a.drain_timeout_s] + shlex.split(d.a.server_args)
        self.full_method = full and d.full_method
        pidfile = os.path.join(d.out, "server-%d.pid" % epoch)
        if self.full_method in ("unshare", "unshare-user"):
            ns = ["unshare", "-m"] if self.full_method == "unshare" else ["unshare", "-Urm"]
            cmd = ns + ["sh", "-c", FULL_SCRIPT, "sh", str(d.a.tiny_bytes), d.snap_dir, pidfile,
                        d.snap_alias] + cmd
        self.started = time.time()
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline()  # "gdn-server listening grpc=... metrics=..."
        if "listening" not in line:
            raise SystemExit("soak: server %d did not start (%s); see %s" % (epoch, line, self.log))
        self.metrics = re.search(r"metrics=(\S+)", line).group(1)
        self.pid = self.proc.pid
        if self.full_method in ("unshare", "unshare-user"):
            self.pid = self.read_pid(pidfile)
        self.ready_s = time.time() - self.started

    @staticmethod
    def read_pid(pidfile):
        """The server's pid, which sh writes right after starting it."""
        for _ in range(500):
            try:
                with open(pidfile) as f:
                    return int(f.read())
            except (OSError, ValueError):
                time.sleep(0.01)
        raise SystemExit("soak: no server pid in " + pidfile)

    def stop(self, sig, wait_s, stall_s=0):
        if stall_s > 0:
            # A stand-in for a slow drain (--stall_full_drain_s): the server is
            # stopped first, the signal waits until SIGCONT, stall_s later.
            os.kill(self.pid, signal.SIGSTOP)
            os.kill(self.pid, sig)
            time.sleep(stall_s)
            os.kill(self.pid, signal.SIGCONT)
        else:
            os.kill(self.pid, sig)
        try:
            rc = self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            rc = "timeout"
        self.proc.stdout.close()
        with open(self.log) as f:
            text = f.read()
        lost_ids = re.findall(r"drain: NOT written: session '([^']*)'", text)
        said = re.search(r"(\d+) session\(s\) could not be written to --snapshot_dir and are lost",
                         text)
        wrote = re.search(
            r"drain: wrote (\d+) session\(s\), (\d+) bytes, .* in ([^;]+); (\d+) failed", text)
        return {"rc": rc, "lost_ids": lost_ids, "said_lost": int(said.group(1)) if said else 0,
                "wrote": int(wrote.group(1)) if wrote else None,
                "drain_bytes": int(wrote.group(2)) if wrote else None,
                "drain_time": wrote.group(3) if wrote else None,
                "failed": int(wrote.group(4)) if wrote else None}
