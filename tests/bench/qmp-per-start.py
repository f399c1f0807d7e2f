#!/usr/bin/env python3
"""What one guest start asks of QEMU over QMP, under the libvirt and QEMU installed here.

Starts a session libvirtd as an unprivileged user (configured as kvnode's per-VMI daemon: the
QEMU driver alone, no virtlogd) with libvirt's QEMU monitor debug log on, creates the domain
that `kvnode-launcher convert --virt-type qemu` makes of a small VMI, and counts the QMP
commands libvirt sent from the start to the domain running, by command name, with QEMU's CPU
time at that point (utime + stime from /proc/PID/stat) and the time `virsh create` took.
Median of --runs runs; the domain and its daemon are ended after each run.

    sudo python3 tests/bench/qmp-per-start.py [--runs 3] [--launcher build/bin/kvnode-launcher]
                                              [--user kvnode]

Run it on each libvirt/QEMU stack to compare them (README's stack table). Needs root (it runs
the daemon as --user); everything it starts it ends, by pid.
"""
import argparse
import collections
import json
import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

VMI = """apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: qmpcount
  namespace: default
  uid: 0d6a4c7e-3b5f-4c1d-9e8a-7f2b1c3d4e5f
spec:
  domain:
    resources:
      requests:
        memory: 64Mi
    devices:
      autoattachPodInterface: false
      autoattachGraphicsDevice: false
"""

SEND = re.compile(r"QEMU_MONITOR_SEND_MSG: mon=\S+ msg=(\{.*?\})\s*fd=")


def versions():
    out = subprocess.run(["/usr/sbin/libvirtd", "--version"], capture_output=True, text=True)
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True)
    return out.stdout.strip(), qemu.stdout.splitlines()[0].strip()


def qemu_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(user, xml_path, name, base):
    for d in ("h", "r", "k", "c/libvirt", "d"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    log = os.path.join(base, "libvirtd.log")
    with open(os.path.join(base, "c/libvirt/qemu.conf"), "w") as f:
        f.write('stdio_handler = "file"\n')
    with open(os.path.join(base, "c/libvirt/libvirtd.conf"), "w") as f:
        f.write('log_filters = "1:qemu.qemu_monitor 4:*"\n')
        f.write(f'log_outputs = "1:file:{log}"\n')
    driver = "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so"
    os.symlink(driver, os.path.join(base, "d/libvirt_driver_qemu.so"))
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", base], check=True)
    env = {
        "HOME": base + "/h", "XDG_RUNTIME_DIR": base + "/r", "XDG_CONFIG_HOME": base + "/c",
        "XDG_CACHE_HOME": base + "/k", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C",
        "LIBVIRT_DRIVER_DIR": base + "/d",
    }
    as_user = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[], env=env, cwd=base + "/h")
    daemon = subprocess.Popen(["/usr/sbin/libvirtd", "--timeout", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **as_user)
    uri = f"qemu+unix:///session?socket={base}/r/libvirt/libvirt-sock"
    created = False
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{base}/r/libvirt/libvirt-sock"):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError("libvirtd did not start")
            time.sleep(0.005)
        # The capabilities probe at the first connection is libvirt's, not the start's: done
        # first, so that the count below is the start alone.
        subprocess.run(["virsh", "-c", uri, "capabilities"], check=True,
                       stdout=subprocess.DEVNULL, **as_user)
        with open(log) as f:
            skip = len(f.read())
        t0 = time.monotonic()
        subprocess.run(["virsh", "-c", uri, "create", xml_path], check=True,
                       stdout=subprocess.DEVNULL, **as_user)
        create_ms = (time.monotonic() - t0) * 1000
        created = True
        pidfile = f"{base}/r/libvirt/qemu/run/{name}.pid"
        with open(pidfile) as f:
            qemu_pid = int(f.read().strip())
        cpu = qemu_cpu_seconds(qemu_pid)
        with open(log) as f:
            text = f.read()[skip:]
        commands = collections.Counter()
        for m in SEND.finditer(text):
            try:
                commands[json.loads(m.group(1)).get("execute", "?")] += 1
            except json.JSONDecodeError:
                commands["?"] += 1
        return create_ms, cpu, commands
    finally:
        # QEMU outlives its libvirtd: the domain goes first, also when a step above failed.
        if created:
            subprocess.run(["virsh", "-c", uri, "destroy", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, **as_user)
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--launcher", default=os.path.join(here, "../../build/bin/kvnode-launcher"))
    p.add_argument("--user", default="kvnode")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("qmp-per-start: needs root (it runs libvirtd as --user)")
    user = pwd.getpwnam(args.user)
    work = tempfile.mkdtemp(prefix="kvnode-qmp-")
    os.chmod(work, 0o755)
    made = []
    try:
        xml = subprocess.run([args.launcher, "convert", "--virt-type", "qemu", "--state-dir",
                              os.path.join(work, "state"), "-"], input=VMI, capture_output=True,
                             text=True)
        if xml.returncode != 0:
            sys.exit("convert: " + xml.stderr)
        # The domain's sockets and logs go where kvnode puts them; their dirs are made here
        # for the daemon's user, and removed at the end.
        for path in re.findall(r'(?:path|file)="(/[^"]+)"', xml.stdout):
            d = os.path.dirname(path)
            if not os.path.isdir(d):
                top = d
                while not os.path.isdir(os.path.dirname(top)):
                    top = os.path.dirname(top)
                made.append(top)
                os.makedirs(d)
                subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", top], check=True)
        name = re.search(r"<name>([^<]+)</name>", xml.stdout).group(1)
        xml_path = os.path.join(work, "domain.xml")
        with open(xml_path, "w") as f:
            f.write(xml.stdout)
        os.chmod(xml_path, 0o644)
        libvirt, qemu = versions()
        print(f"{libvirt}; {qemu}")
        results = []
        for i in range(args.runs):
            base = os.path.join(work, f"run{i}")
            create_ms, cpu, commands = one_run(user, xml_path, name, base)
            total = sum(commands.values())
            top = ", ".join(f"{n} {c}" for n, c in commands.most_common(4))
            print(f"run {i + 1}: {total} QMP commands ({top}); QEMU CPU at Running {cpu:.2f} s; "
                  f"virsh create {create_ms:.0f} ms")
            results.append((total, cpu, create_ms))
        print(f"median: {statistics.median(r[0] for r in results):.0f} QMP commands, QEMU CPU "
              f"{statistics.median(r[1] for r in results):.2f} s, virsh create "
              f"{statistics.median(r[2] for r in results):.0f} ms")
        if statistics.median(r[0] for r in results) == 0:
            sys.exit("qmp-per-start: no QMP command found in libvirt's log")
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
