"""A local server speaking the Hugging Face hub's HTTP API, enough for a model download: the
revision endpoint, the paged recursive tree, /resolve/ (LFS files redirect to a separate file
store that honours Range), and the hub's refusals (X-Error-Code). Its faithfulness is checked by
huggingface_hub itself: test_hub.py downloads from it with `snapshot_download` first.

Faults for tests: `cuts[path] = [n1, n2, ...]`: the next requests for that file's content close
the connection after n1, n2... bytes (one entry per request); `corrupt.add(path)` serves one
flipped byte; `gated`/`private` repos. `ranges` records the Range header of each content request."""
import hashlib
import http.server
import json
import re
import threading
import urllib.parse


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files, lfs_suffixes=(".safetensors", ".gguf", ".bin"), branches=None):
        self.files = dict(files)  # path -> bytes
        self.lfs = {p for p in self.files if p.endswith(lfs_suffixes)}
        self.commit = hashlib.sha1(repr(sorted((p, hashlib.sha256(d).hexdigest()) for p, d in self.files.items())).encode()).hexdigest()
        self.branches = {"main": self.commit, **(branches or {})}

    def etag(self, path):
        d = self.files[path]
        return hashlib.sha256(d).hexdigest() if path in self.lfs else git_blob_sha1(d)


class FakeHub:
    PAGE = 3  # tree entries per page: small, so pagination is exercised

    def __init__(self):
        self.repos = {}
        self.gated, self.private = set(), set()
        self.token = "hf_test_token"
        self.cuts, self.ranges = {}, []
        self.corrupt = set()
        self.requests = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # The file store answers on another host name, as the hub's CDN does (clients must not
        # expect hub headers there, nor send it their token).
        self.store_url = f"http://localhost:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def add(self, repo_id, files, **kw):
        self.repos[repo_id] = Repo(files, **kw)
        return self.repos[repo_id]

    def _handler(hub):
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send(self, status, body=b"", headers=(), head=False):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if not any(k.lower() == "content-length" for k, _ in headers):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def refuse(self, status, code, msg, head=False):
                body = json.dumps({"error": msg}).encode()
                self.send(status, body, [("Content-Type", "application/json"), ("X-Error-Code", code),
                                         ("X-Error-Message", msg)], head)

            def authorized(self, repo_id, head=False):
                auth = self.headers.get("Authorization", "")
                ok = auth == f"Bearer {hub.token}"
                if repo_id in hub.private and not ok:
                    self.refuse(401, "RepoNotFound", "Repository Not Found for url", head)
                    return False
                if repo_id in hub.gated and not ok:
                    self.refuse(401 if not auth else 403, "GatedRepo",
                                f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.", head)
                    return False
                return True

            def do_HEAD(self):
                self.route(head=True)

            def do_GET(self):
                self.route(head=False)

            def route(self, head):
                hub.requests.append((self.command, self.path))
                u = urllib.parse.urlsplit(self.path)
                path = urllib.parse.unquote(u.path)
                query = urllib.parse.parse_qs(u.query)
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", path)
                if m:
                    return self.revision(m[1], m[2], head)
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
                if m:
                    return self.tree(m[1], m[2], query, head)
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if m:
                    return self.resolve(m[1], m[2], m[3], head)
                m = re.fullmatch(r"/lfs-store/([0-9a-f]{64})", path)
                if m:
                    return self.store(m[1], head)
                self.refuse(404, "EntryNotFound", "not found", head)

            def repo(self, repo_id, head):
                r = hub.repos.get(repo_id)
                if r is None:
                    self.refuse(401, "RepoNotFound", "Repository Not Found", head)  # as the hub: 401, not 404
                    return None
                return r

            def commit_of(self, r, rev):
                return r.branches.get(rev) or (rev if rev in r.branches.values() else None)

            def revision(self, repo_id, rev, head):
                r = self.repo(repo_id, head)
                if r is None or (repo_id in hub.private and not self.authorized(repo_id, head)):
                    return
                commit = self.commit_of(r, rev)
                if commit is None:
                    return self.refuse(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                body = json.dumps({"_id": "x", "id": repo_id, "modelId": repo_id, "sha": commit, "private": repo_id in hub.private,
                                   "gated": "auto" if repo_id in hub.gated else False, "disabled": False,
                                   "siblings": [{"rfilename": p} for p in sorted(r.files)], "tags": [], "downloads": 0,
                                   "likes": 0, "lastModified": "2026-01-01T00:00:00.000Z"}).encode()
                self.send(200, body, [("Content-Type", "application/json")], head)

            def tree(self, repo_id, rev, query, head):
                r = self.repo(repo_id, head)
                if r is None or (repo_id in hub.private and not self.authorized(repo_id, head)):
                    return
                if self.commit_of(r, rev) is None:
                    return self.refuse(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                entries = []
                for p in sorted(r.files):
                    d = r.files[p]
                    e = {"type": "file", "oid": git_blob_sha1(d), "size": len(d), "path": p}
                    if p in r.lfs:
                        e["lfs"] = {"oid": hashlib.sha256(d).hexdigest(), "size": len(d), "pointerSize": 134}
                        e["size"] = len(d)
                    entries.append(e)
                start = int(query.get("cursor", ["0"])[0])
                page = entries[start:start + hub.PAGE]
                headers = [("Content-Type", "application/json")]
                if start + hub.PAGE < len(entries):
                    nxt = f"{hub.url}/api/models/{repo_id}/tree/{rev}?recursive=true&expand=false&cursor={start + hub.PAGE}"
                    headers.append(("Link", f'<{nxt}>; rel="next"'))
                self.send(200, json.dumps(page).encode(), headers, head)

            def resolve(self, repo_id, rev, file, head):
                r = self.repo(repo_id, head)
                if r is None or not self.authorized(repo_id, head):
                    return
                commit = self.commit_of(r, rev)
                if commit is None:
                    return self.refuse(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                if file not in r.files:
                    return self.refuse(404, "EntryNotFound", f"{file} does not exist", head)
                d = r.files[file]
                common = [("X-Repo-Commit", commit), ("ETag", f'"{git_blob_sha1(d)}"')]
                if file in r.lfs:
                    sha = hashlib.sha256(d).hexdigest()
                    hub.store_files[sha] = (file, d)
                    return self.send(302, b"", common + [("X-Linked-Etag", f'"{sha}"'), ("X-Linked-Size", str(len(d))),
                                                        ("Location", f"{hub.store_url}/lfs-store/{sha}")], head)
                self.send(200, d, common + [("Content-Type", "application/octet-stream")], head)

            def store(self, sha, head):
                if sha not in hub.store_files:
                    return self.send(404, b"no such object", [], head)
                file, d = hub.store_files[sha]
                if file in hub.corrupt:
                    d = bytes([d[0] ^ 0xFF]) + d[1:]
                start, status = 0, 200
                rng = self.headers.get("Range")
                hub.ranges.append((file, rng))
                headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"),
                           ("ETag", f'"{sha}"')]
                if rng:
                    m = re.fullmatch(r"bytes=(\d+)-", rng)
                    start = int(m[1])
                    if start >= len(d):
                        return self.send(416, b"", [("Content-Range", f"bytes */{len(d)}")], head)
                    status = 206
                    headers.append(("Content-Range", f"bytes {start}-{len(d) - 1}/{len(d)}"))
                body = d[start:]
                headers.append(("Content-Length", str(len(body))))
                if hub.cuts.get(file) and not head:
                    cut = hub.cuts[file].pop(0)
                    self.send_response(status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send(status, body, headers, head)

        hub.store_files = {}
        return H
