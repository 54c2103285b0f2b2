"""Inside a sandbox without a network of its own: the loopback's way out.

Run by bwrap in the sandbox's own network namespace, where there is nothing but ``lo``:
``python -I -S bridge.py PORT=SOCKET ... -- COMMAND...`` listens on ``127.0.0.1:PORT``
for each pair, relays every connection to the unix socket ``SOCKET`` (bound in from
outside: the run's meter, the egress gate), runs ``COMMAND`` and exits with its status.
Built on the interpreter's own C modules (``_socket``, ``_thread``, ``_signal``, ``os``),
not ``socket`` or ``subprocess``: it starts in the time of a bare interpreter, in front of
every attempt.
"""

import _signal  # type: ignore[import-not-found]
import _socket
import _thread
import os
import sys

STREAM = _socket.SOCK_STREAM


def pump(src: _socket.socket, dst: _socket.socket, done: "_thread.LockType | None" = None) -> None:
    """Copies ``src`` to ``dst`` until ``src`` ends, then half-closes ``dst`` (and
    releases ``done``); a broken connection ends it quietly. Egress relays with it too."""
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
            dst.shutdown(_socket.SHUT_WR)
        except OSError:
            pass
        if done is not None:
            done.release()


def _relay(fd: int, path: str) -> None:
    conn = _socket.socket(_socket.AF_INET, STREAM, 0, fd)
    out = _socket.socket(_socket.AF_UNIX, STREAM)
    try:
        out.connect(path)
    except OSError:
        conn.close()
        out.close()
        return
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(pump, (out, conn, done))
    pump(conn, out)
    done.acquire()
    conn.close()
    out.close()


def _serve(listener: _socket.socket, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]
        except OSError:
            return
        _thread.start_new_thread(_relay, (fd, path))


def main(argv: list[str]) -> int:
    cut = argv.index("--")
    for pair in argv[:cut]:
        port, path = pair.split("=", 1)
        listener = _socket.socket(_socket.AF_INET, STREAM)
        listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)
        _thread.start_new_thread(_serve, (listener, path))
    command = argv[cut + 1 :]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as e:
            os.write(2, f"loopkit bridge: {command[0]}: {e.strerror or e}\n".encode())
        os._exit(127)
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, lambda n, _f: os.kill(pid, n))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 1
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
