"""A git server over https for tests: `git http-backend` (smart HTTP) behind a small https
server, CGI by hand (the `cgi` module is gone from newer Pythons). Runs in a container of the
sandbox image: repositories under /srv/git, the certificate and key in /srv/tls, and it writes
/srv/run/ready once it listens. `GET /` answers 200 so a test can probe it.

Used by `crates/testkit/src/git_server.rs` (embedded) and `tests/contract/gitserver.py`.
Usage: python3 git_https_server.py PORT
"""
import http.server, os, socketserver, ssl, subprocess, sys

ROOT = "/srv/git"

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path))

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.backend()

    def do_POST(self):
        self.backend()

    def backend(self):
        path, _, query = self.path.partition("?")
        if path == "/":
            self.send_response(200)
            self.send_header("Content-Length", "16")
            self.end_headers()
            self.wfile.write(b"git test server\n")
            return
        data = self.body()
        # A repository holding `sa-protocol-v0` is served like an old server: protocol v0
        # only, and no commit that is not a ref's tip (what makes a client fall back).
        repo = path.split(".git/")[0] + ".git"
        old = os.path.exists(ROOT + repo + "/sa-protocol-v0")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_COUNT": "1" if old else "2",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
            "GIT_CONFIG_KEY_1": "uploadpack.allowAnySHA1InWant",
            "GIT_CONFIG_VALUE_1": "true",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(data)),
            "REMOTE_ADDR": self.client_address[0],
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol") and not old:
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        if not _:
            head, _, rest = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "content-length":
                self.send_header(name, value)
        # A length, so that the client never depends on how the TLS connection closes.
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/srv/tls/server.crt", "/srv/tls/server.key")
srv = Server(("0.0.0.0", int(sys.argv[1])), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open("/srv/run/ready", "w").close()
srv.serve_forever()
