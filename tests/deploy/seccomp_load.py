"""Run a command under a seccomp profile in the OCI/Docker JSON format, as a container runtime would load it:
`seccomp_load.py PROFILE [--drop NAME,NAME] -- COMMAND...`. Runs under the system Python, which has libseccomp's
bindings (Debian: python3-seccomp); the filter stays on through the exec, for the command and its children."""

import json
import os
import sys

import seccomp  # type: ignore[import-not-found]


def main() -> None:
    cut = sys.argv.index("--")
    with open(sys.argv[1]) as file:
        profile = json.load(file)
    drop = set(sys.argv[3].split(",")) if cut > 2 and sys.argv[2] == "--drop" else set()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    found = seccomp.SyscallFilter(defaction=seccomp.ERRNO(profile.get("defaultErrnoRet", 1)))
    for group in profile["syscalls"]:
        assert not group.get("args"), "conditions on arguments are not read by this loader"
        action = seccomp.ALLOW if group["action"] == "SCMP_ACT_ALLOW" else seccomp.ERRNO(group["errnoRet"])
        for name in group["names"]:
            if name not in drop:
                try:
                    found.add_rule(action, name)
                except (RuntimeError, ValueError):  # a name this architecture does not have
                    pass
    found.load()
    os.execvp(sys.argv[cut + 1], sys.argv[cut + 1:])


main()
