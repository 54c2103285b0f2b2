"""Inside a sandbox without a network of its own: the loopback's way out.

Run by bwrap in the sandbox's own network namespace, where there is nothing but ``lo``:
``python -I -S bridge.py PORT=SOCKET ... -- COMMAND...`` listens on ``127.0.0.1:PORT``
for each pair, relays every connection to the unix socket ``SOCKET`` (bound in from
outside: the run's meter, the egress gate), runs ``COMMAND`` and exits with its status.
The standard library only: it starts in a few milliseconds, before the command.
"""

import os
import signal
import socket
import subprocess
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(conn: socket.socket, path: str) -> None:
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        out.connect(path)
    except OSError:
        conn.close()
        out.close()
        return
    back = threading.Thread(target=_pump, args=(out, conn), daemon=True)
    back.start()
    _pump(conn, out)
    back.join()
    conn.close()
    out.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(conn, path), daemon=True).start()


def main(argv: list[str]) -> int:
    cut = argv.index("--")
    for pair in argv[:cut]:
        port, path = pair.split("=", 1)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)
        threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(argv[cut + 1 :])
    except OSError as e:
        sys.stderr.write(f"loopkit bridge: {argv[cut + 1]}: {e.strerror or e}\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: child.send_signal(n))
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
