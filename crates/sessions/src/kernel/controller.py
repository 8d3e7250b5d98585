"""The Python kernel of a session's sandbox: one IPython kernel, kept between calls.

Written into the sandbox by the control plane (crates/sessions/src/kernel) and run as the
sandbox user with the sandbox's python3, which must have ipykernel and jupyter_client.

    python3 controller.py serve ROOT      the controller: starts the kernel (cwd /workspace),
                                          answers on the unix socket ROOT/kernel.sock
    python3 controller.py call ROOT       one request (JSON on stdin) through the socket; the
                                          answer's lines (JSON) go to stdout as they come

Requests are one JSON line; answers are JSON lines, the last one of type "done".

    {"op": "ping"}                        -> {"type": "done", "epoch": E}
    {"op": "execute", "code": C, "timeout": S, "outputs_dir": D, "cell": ID,
     "save_images": true, "env": {NAME: VALUE}}
        -> {"type": "output", "output": <an nbformat 4 output>}     as the kernel sends them
        -> {"type": "file", "path": P}                             an image saved under D
        -> {"type": "done", "status": "ok"|"error"|"timeout"|"died",
            "execution_count": N, "epoch": E, "detail": ...}
       `save_images: false` keeps images inline only (none is written under D); `env` is set
       in the kernel's os.environ for this cell and put back as it was after it.
    {"op": "restart"}                     -> {"type": "done", "epoch": E}   a new kernel
    {"op": "shutdown"}                    -> {"type": "done"}, then the controller exits

Invariants:
* One cell runs at a time; a second request waits for the first.
* The epoch names the kernel's state: it changes whenever a kernel starts (the first, or the
  one that replaces a kernel that died or could not be interrupted), so a caller that sees a
  new epoch knows earlier variables are gone.
* A caller that goes away mid-cell (its run interrupted, its command killed) interrupts the
  cell; the kernel and its state stay.
* A cell over its time limit is interrupted (KeyboardInterrupt in the cell), and its state
  kept; a kernel that does not come back from the interrupt within INTERRUPT_GRACE is
  replaced (a new epoch), and the answer says so.
"""

import asyncio
import base64
import fcntl
import json
import os
import socket
import sys
import uuid

INTERRUPT_GRACE = 10.0
#: Most characters of one stream output kept in the journal's copy of a cell (the model's
#: copy is cut shorter by the control plane).
MAX_STREAM_CHARS = 256 * 1024
#: Most bytes of one image kept in the answer (it is saved whole under outputs_dir).
MAX_IMAGE_BYTES = 4 * 1024 * 1024
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def socket_path(root):
    return os.path.join(root, "kernel.sock")


class Controller:
    def __init__(self, root):
        self.root = root
        self.manager = None
        self.client = None
        self.epoch = None
        self.lock = asyncio.Lock()

    async def start_kernel(self):
        from jupyter_client.manager import AsyncKernelManager

        if self.manager is not None:
            await self.stop_kernel()
        # jupyter_client runs the python3 kernelspec's "python" as sys.executable: the python3
        # running this file, whose packages the sandbox was given.
        self.manager = AsyncKernelManager(kernel_name="python3")
        env = dict(os.environ)
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        await self.manager.start_kernel(cwd=os.environ.get("SANDBOX_AGENTS_KERNEL_CWD", "/workspace"), env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=120)
        self.epoch = uuid.uuid4().hex
        # Figures are shown inline, so they come back as image outputs; a kernel without
        # matplotlib just has no figures.
        await self.client.execute_interactive(
            "try:\n    get_ipython().run_line_magic('matplotlib', 'inline')\nexcept Exception:\n    pass\n",
            store_history=False,
            output_hook=lambda msg: None,
            timeout=60,
        )

    async def stop_kernel(self):
        try:
            if self.client is not None:
                self.client.stop_channels()
            if self.manager is not None:
                await self.manager.shutdown_kernel(now=True)
        except Exception:
            pass
        self.manager = None
        self.client = None

    async def alive(self):
        return self.manager is not None and await self.manager.is_alive()

    async def serve(self):
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        # One controller per sandbox: a second one (two starts at once) leaves it to the first.
        self.lockfile = open(os.path.join(self.root, "serve.lock"), "w")
        try:
            fcntl.flock(self.lockfile, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        await self.start_kernel()
        path = socket_path(self.root)
        if os.path.exists(path):
            os.unlink(path)
        server = await asyncio.start_unix_server(self.connection, path=path, limit=64 * 1024 * 1024)
        async with server:
            await server.serve_forever()

    async def connection(self, reader, writer):
        try:
            line = await reader.readline()
            request = json.loads(line or b"{}")
            op = request.get("op")
            if op == "ping":
                await send(writer, {"type": "done", "epoch": self.epoch})
            elif op == "execute":
                async with self.lock:
                    await self.execute(request, reader, writer)
            elif op == "restart":
                async with self.lock:
                    await self.start_kernel()
                    await send(writer, {"type": "done", "epoch": self.epoch})
            elif op == "shutdown":
                async with self.lock:
                    await self.stop_kernel()
                    await send(writer, {"type": "done"})
                    try:
                        os.unlink(socket_path(self.root))
                    except OSError:
                        pass
                    os._exit(0)
            else:
                await send(writer, {"type": "done", "status": "invalid", "detail": f"unknown op {op!r}"})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def execute(self, request, reader, writer):
        if not await self.alive():
            await self.start_kernel()
        epoch = self.epoch
        outputs_dir = request.get("outputs_dir") or "/workspace/outputs"
        cell = request.get("cell") or uuid.uuid4().hex[:8]
        timeout = float(request.get("timeout") or 600)
        save_images = request.get("save_images", True)
        env = request.get("env") or {}
        images = 0
        pending = []

        def hook(msg):
            nonlocal images
            kind = msg["header"]["msg_type"]
            content = msg["content"]
            if kind == "stream":
                text = content.get("text", "")[:MAX_STREAM_CHARS]
                pending.append({"type": "output", "output": {"output_type": "stream", "name": content.get("name", "stdout"), "text": text}})
            elif kind in ("execute_result", "display_data"):
                data = dict(content.get("data", {}))
                for mime, ext in IMAGE_TYPES.items():
                    if mime in data and save_images:
                        images += 1
                        name = f"{cell}-{images}.{ext}"
                        raw = data[mime]
                        try:
                            os.makedirs(outputs_dir, exist_ok=True)
                            with open(os.path.join(outputs_dir, name), "wb") as f:
                                f.write(base64.b64decode(raw))
                            pending.append({"type": "file", "path": os.path.join(outputs_dir, name)})
                        except Exception as e:  # a full disk: the output is still answered
                            pending.append({"type": "output", "output": {"output_type": "stream", "name": "stderr", "text": f"[the image could not be saved: {e}]\n"}})
                        if len(raw) > MAX_IMAGE_BYTES:
                            del data[mime]
                            data.setdefault("text/plain", f"[image saved as {name}; too large to keep inline]")
                out = {"output_type": kind, "data": data, "metadata": content.get("metadata", {})}
                if kind == "execute_result":
                    out["execution_count"] = content.get("execution_count")
                pending.append({"type": "output", "output": out})
            elif kind == "error":
                pending.append({"type": "output", "output": {"output_type": "error", "ename": content.get("ename", ""), "evalue": content.get("evalue", ""), "traceback": content.get("traceback", [])}})

        async def flush():
            while pending:
                await send(writer, pending.pop(0))

        if env:
            await self.set_env(env)
        run = asyncio.ensure_future(
            self.client.execute_interactive(request.get("code", ""), output_hook=hook, timeout=None, allow_stdin=False)
        )
        gone = asyncio.ensure_future(reader.read())  # EOF: the caller went away
        deadline = asyncio.get_running_loop().time() + timeout
        status, detail, count = "ok", None, None
        try:
            while True:
                now = asyncio.get_running_loop().time()
                done, _ = await asyncio.wait({run, gone}, timeout=min(0.05, max(deadline - now, 0)))
                try:
                    await flush()
                except (ConnectionError, OSError):
                    pass
                if run in done:
                    reply = run.result()
                    count = reply["content"].get("execution_count")
                    if reply["content"].get("status") == "error":
                        status = "error"
                    break
                if gone in done:
                    status, detail = "interrupted", "the caller went away"
                    await self.interrupt(run)
                    return
                if asyncio.get_running_loop().time() >= deadline:
                    status, detail = "timeout", f"the cell ran longer than {timeout:g} s and was interrupted"
                    if await self.interrupt(run):
                        count = run.result()["content"].get("execution_count")
                    else:
                        detail += "; the kernel did not stop, so it was restarted and its state is gone"
                        status = "died"
                    break
                if not await self.alive():
                    run.cancel()
                    status, detail = "died", "the Python kernel died (out of memory, or the process exited); a new one starts with the next cell"
                    await self.start_kernel()
                    break
        finally:
            gone.cancel()
            if env and epoch == self.epoch:
                await self.restore_env()
        try:
            await flush()
            # The epoch the cell ran in: after a death it is the dead kernel's, so the next
            # cell, in the new kernel, is the one told that state was lost.
            await send(writer, {"type": "done", "status": status, "execution_count": count, "epoch": epoch, "detail": detail})
        except (ConnectionError, OSError):
            pass

    async def set_env(self, env):
        """Sets `env` in the kernel, keeping what it replaces for restore_env."""
        code = (
            "import os as _sa_os\n"
            f"_sa_env = {{k: _sa_os.environ.get(k) for k in {list(env)!r}}}\n"
            f"_sa_os.environ.update({dict(env)!r})\n"
        )
        await self.silent(code)

    async def restore_env(self):
        code = (
            "for _sa_k, _sa_v in _sa_env.items():\n"
            "    if _sa_v is None:\n"
            "        _sa_os.environ.pop(_sa_k, None)\n"
            "    else:\n"
            "        _sa_os.environ[_sa_k] = _sa_v\n"
            "del _sa_env, _sa_k, _sa_v\n"
        )
        try:
            await self.silent(code)
        except Exception:
            pass

    async def silent(self, code):
        await self.client.execute_interactive(code, silent=True, store_history=False, output_hook=lambda msg: None, timeout=60)

    async def interrupt(self, run):
        """Interrupts the running cell; True when the kernel came back, else it is replaced."""
        try:
            await self.manager.interrupt_kernel()
            await asyncio.wait_for(asyncio.shield(run), INTERRUPT_GRACE)
            return True
        except Exception:
            pass
        run.cancel()
        await self.start_kernel()
        return False


async def send(writer, message):
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()


def call(root):
    request = sys.stdin.buffer.read()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(socket_path(root))
    except OSError:
        print("no kernel controller is running", file=sys.stderr)
        sys.exit(3)
    s.sendall(request.rstrip(b"\n") + b"\n")
    out = sys.stdout.buffer
    with s.makefile("rb") as answers:
        for line in answers:
            out.write(line)
            out.flush()


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("serve", "call"):
        print("usage: controller.py serve|call ROOT", file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "call":
        call(sys.argv[2])
        return
    try:
        import ipykernel  # noqa: F401
        import jupyter_client  # noqa: F401
    except ImportError as e:
        print(f"missing: {e.name}", file=sys.stderr)
        sys.exit(4)
    asyncio.run(Controller(sys.argv[2]).serve())


if __name__ == "__main__":
    main()
