"""Put on PYTHONPATH by the tests (tests/offline/guard.py): in every Python process started with
it (a Jupyter or Voila server, its kernels), a DNS lookup of, or a connection or datagram to,
any host but this machine's loopback is refused and written to $VRAMPLAN_OFFLINE_LOG, one line
each. Browser requests are watched by Playwright; this watches the servers and kernels."""
import ipaddress
import os
import socket
import sys

_LOG = os.environ.get("VRAMPLAN_OFFLINE_LOG")
_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
try:
    _NAMES.add(socket.gethostname().lower())
except OSError:
    pass


def _local(host) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").lower()
    if host in _NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _refuse(what: str, host) -> None:
    line = f"{what} {host!r} pid={os.getpid()} argv={' '.join(sys.argv)[:200]}\n"
    try:
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass
    raise OSError(f"offline test: {what} {host!r} refused")


def _hook(event: str, args) -> None:
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        if not _local(args[0]):
            _refuse(event, args[0])
    elif event in ("socket.connect", "socket.sendto"):
        address = args[1]
        if isinstance(address, tuple) and address and not _local(address[0]):
            _refuse(event, address[0])


if _LOG:
    sys.addaudithook(_hook)
