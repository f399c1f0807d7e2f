#!/usr/bin/env python3
"""What libvirt 9.0's per-feature read-back of the guest CPU costs QEMU, without libvirt.

libvirt reads the guest CPU back after every start (qemuProcessFetchGuestCPU): one QMP
`qom-get` per CPU feature property of the vCPU object. This starts a bare QEMU (TCG, no
devices, stopped before the guest runs), lists the vCPU's boolean properties (the features),
sends one `qom-get` for each, as libvirt does, and prints how many there were and the QEMU CPU
time they took (utime + stime from /proc/PID/stat, before and after), with the median of
--runs runs.

    python3 tests/bench/qmp-cpu-features.py [--runs 5] [--qemu qemu-system-x86_64]

The README's figure ("397 qom-gets, 0.50 s of QEMU CPU") is this command's output on the
development machine. No root needed; everything it starts it ends.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CPU_PATH = "/machine/unattached/device[0]"


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.file = self.sock.makefile("rw")
        self._read()  # the greeting
        self.cmd("qmp_capabilities")

    def _read(self):
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("QEMU closed the QMP socket")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def cmd(self, name, **args):
        self.file.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.file.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(f"{name}: {reply['error']}")
        return reply["return"]

    def close(self):
        self.sock.close()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def one_run(qemu):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "qmp.sock")
        proc = subprocess.Popen(
            [qemu, "-machine", "q35,accel=tcg", "-cpu", "qemu64", "-m", "64", "-nodefaults",
             "-display", "none", "-S", "-qmp", f"unix:{path},server=on,wait=off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            qmp = Qmp(path)
            props = qmp.cmd("qom-list", path=CPU_PATH)
            features = [p["name"] for p in props if p["type"] == "bool"]
            before = cpu_seconds(proc.pid)
            for name in features:
                qmp.cmd("qom-get", path=CPU_PATH, property=name)
            spent = cpu_seconds(proc.pid) - before
            qmp.close()
            return len(features), spent
        finally:
            proc.kill()
            proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--qemu", default="qemu-system-x86_64")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: at least 1")
    version = subprocess.run([args.qemu, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    results = [one_run(args.qemu) for _ in range(args.runs)]
    counts = {n for n, _ in results}
    seconds = [s for _, s in results]
    median = statistics.median(seconds)
    n = results[0][0]
    print(f"{version}: {'/'.join(str(c) for c in sorted(counts))} qom-gets (one per CPU "
          f"feature), QEMU CPU median {median:.2f} s over {args.runs} runs "
          f"({median / n * 1000:.2f} ms each; runs: {', '.join(f'{s:.2f}' for s in seconds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
