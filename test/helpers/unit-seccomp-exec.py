#!/usr/bin/python3
"""Run a command under the system-call filter a systemd unit declares, the way systemd applies it.

    unit-seccomp-exec.py [--kill] UNIT_FILE -- COMMAND [ARG...]

Reads SystemCallFilter=, SystemCallErrorNumber= and SystemCallArchitectures= from UNIT_FILE, expands
the @groups with `systemd-analyze syscall-filter` (so the sets are the installed systemd's own),
loads the filter with libseccomp (Debian: python3-seccomp) and execs COMMAND in place, so the pid,
the inherited fds and LISTEN_PID/LISTEN_FDS stay valid for socket activation.

--kill ignores SystemCallErrorNumber= and kills the process on any call outside the filter
(systemd's default action): a run that survives proves that nothing it did was denied, which the
unit's EPERM would hide.
"""
import os
import subprocess
import sys

import seccomp

_groups: dict[str, set[str]] = {}


def expand(name: str) -> set[str]:
    if not name.startswith('@'):
        return {name}
    if name not in _groups:
        out = subprocess.run(['systemd-analyze', 'syscall-filter', name], capture_output=True, text=True, check=True).stdout
        calls: set[str] = set()
        for line in out.splitlines()[1:]:
            item = line.strip()
            if item and not item.startswith('#'):
                calls |= expand(item)
        _groups[name] = calls
    return _groups[name]


def unit_settings(path: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    section = ''
    with open(path, encoding='utf-8') as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in '#;':
                continue
            if line.startswith('['):
                section = line
                continue
            if section == '[Service]' and '=' in line:
                key, value = line.split('=', 1)
                settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def main() -> None:
    args = sys.argv[1:]
    kill = args[:1] == ['--kill']
    if kill:
        args = args[1:]
    if len(args) < 3 or args[1] != '--':
        sys.exit(__doc__)
    unit, command = args[0], args[2:]
    settings = unit_settings(unit)
    filters = settings.get('SystemCallFilter', [])
    if not filters or filters[0].startswith('~'):
        sys.exit(f'{unit}: expected an allow-list SystemCallFilter= first, got {filters!r}')
    allowed: set[str] = set()
    for value in filters:
        deny = value.startswith('~')
        for item in value.lstrip('~').split():
            allowed = allowed - expand(item) if deny else allowed | expand(item)
    errno_name = (settings.get('SystemCallErrorNumber') or [''])[-1]
    if kill or not errno_name:
        default = seccomp.KILL_PROCESS
    else:
        import errno
        default = seccomp.ERRNO(getattr(errno, errno_name))
    if (settings.get('SystemCallArchitectures') or ['native'])[-1] != 'native':
        sys.exit('only SystemCallArchitectures=native is supported')
    f = seccomp.SyscallFilter(defaction=default)
    for name in sorted(allowed):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # not a system call of this architecture (e.g. the *32 and *_time64 variants)
    f.load()
    os.execvp(command[0], command)


if __name__ == '__main__':
    main()
