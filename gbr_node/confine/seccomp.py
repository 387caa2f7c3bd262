"""The seccomp filter of a confined command [pure]: a classic-BPF program.

It refuses (EACCES), on this machine's native syscall ABI:

- `io_uring_setup`, always: io_uring can open sockets and files through its
  own queue (IORING_OP_SOCKET, ...), beside the syscalls filtered here;
- `keyctl`, `add_key`, `request_key`, always: the kernel keyrings hold
  credentials (Kerberos tickets, keys agents stored) that no path rule covers;
- `socket()` of any family other than AF_UNIX when the network is off, where
  no network namespace does it (Landlock ABI 4 covers only TCP, not UDP, raw
  or netlink sockets);
- `socket(AF_UNIX, ...)` where no mount namespace hides the sockets of other
  programs: Landlock does not restrict connecting to a named socket (ABI < 9),
  and `systemd-run --user`, tmux or docker.sock would run code outside.
  `socketpair()` stays allowed (it names nothing).

Any other syscall ABI (i386 `int 0x80`, x32) is refused whole: its
`socketcall` multiplexer would pass around the checks. Layout of
`struct seccomp_data`: nr (u32) at 0, arch (u32) at 4, args[0] at 16 (low
half on little-endian machines, which both supported machines are).
"""

from __future__ import annotations

import struct

_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_REFUSE = 0x00050000 | 13  # SECCOMP_RET_ERRNO | EACCES
AF_UNIX = 1
_X32_BIT = 0x40000000

# machine -> (AUDIT_ARCH_*, __NR_socket, syscalls refused outright)
ARCHES = {
    "x86_64": (
        0xC000003E,
        41,
        (425, 248, 249, 250),
    ),  # io_uring_setup, add_key, request_key, keyctl
    "aarch64": (0xC00000B7, 198, (425, 217, 218, 219)),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str, *, allow_inet: bool, allow_unix: bool) -> bytes:
    """The BPF program (8 bytes per instruction) for `machine` (`os.uname().machine`).

    `allow_inet`: other socket families than AF_UNIX may be created;
    `allow_unix`: AF_UNIX sockets may be created. Raises KeyError for a
    machine this filter does not know.
    """
    arch, nr_socket, refused = ARCHES[machine]
    if allow_inet and allow_unix:
        socket_rule = [_op(_RET_K, _ALLOW)]
    elif allow_inet:  # refuse AF_UNIX only
        socket_rule = [_op(_LD_ABS_W, 16), _op(_JEQ_K, AF_UNIX, 0, 1), _op(_RET_K, _REFUSE)]
        socket_rule.append(_op(_RET_K, _ALLOW))
    elif allow_unix:  # allow AF_UNIX only
        socket_rule = [_op(_LD_ABS_W, 16), _op(_JEQ_K, AF_UNIX, 0, 1), _op(_RET_K, _ALLOW)]
        socket_rule.append(_op(_RET_K, _REFUSE))
    else:
        socket_rule = [_op(_RET_K, _REFUSE)]
    head = [
        _op(_LD_ABS_W, 4),
        _op(_JEQ_K, arch, 1, 0),
        _op(_RET_K, _REFUSE),  # a foreign syscall ABI
        _op(_LD_ABS_W, 0),
    ]
    if machine == "x86_64":
        head += [_op(_JGE_K, _X32_BIT, 0, 1), _op(_RET_K, _REFUSE)]
    for nr in refused:
        head += [_op(_JEQ_K, nr, 0, 1), _op(_RET_K, _REFUSE)]
    head += [_op(_JEQ_K, nr_socket, 1, 0), _op(_RET_K, _ALLOW)]
    return b"".join(head + socket_rule)
