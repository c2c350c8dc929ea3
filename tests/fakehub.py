"""A stand-in Hugging Face Hub for tests: a small HTTP server on 127.0.0.1, driven by the real client.

The tests talk to it with the real `huggingface_hub` client (`HfApi.create_repo`, `upload_folder`,
`hf_hub_download`), pointed here through `HF_ENDPOINT`. It implements only the routes that client calls for a
model repo, with the payloads it sends and the headers it reads (read from huggingface_hub 2.4's source):

    POST /api/repos/create                          create a repo; 409 + {"url"} when it already exists
    GET  /api/models/{repo}[/revision/{rev}]        repo info (sha, siblings)
    POST /api/validate-yaml                         check the README.md front matter
    POST /api/models/{repo}/preupload/{rev}         per file: "lfs" or "regular" upload, remote oid
    POST /{repo}.git/info/lfs/objects/batch         LFS batch: where to PUT each new object
    PUT  /lfs/{oid}                                 the LFS upload itself (sha256 checked)
    POST /lfs/{oid}/verify                          the LFS verify step
    POST /api/models/{repo}/commit/{rev}            ndjson commit: header, "file" and "lfsFile" lines
    HEAD|GET /{repo}/resolve/{rev}/{path}           download, with ETag, X-Repo-Commit, Content-Length
    GET  /api/datasets/{repo}[/revision/{rev}]      a dataset repo's info (`add_dataset` makes one)
    GET  /api/datasets/{repo}/tree/{rev}[/{path}]   its files, listed (snapshot_download reads this)
    HEAD|GET /datasets/{repo}/resolve/{rev}/{path}  a dataset file's download

It refuses connections that do not come from loopback, and `forbid_internet` makes sure the test process
itself cannot reach anything but loopback. Faults for error tests: an unknown token gets 401 like the real
Hub, and `drop_uploads = True` closes the connection in the middle of every LFS upload.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import yaml

LOOPBACK = "127.0.0.1"
REGULAR_FILE_LIMIT = 10 * 1024 * 1024  # the Hub stores text files up to 10 MB in git, the rest in LFS


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a regular file: sha1("blob <size>\\0" + content)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    private: bool
    head: str = "0" * 40
    files: dict[str, bytes] = field(default_factory=dict)
    lfs_paths: set[str] = field(default_factory=set)
    snapshots: dict[str, dict[str, bytes]] = field(default_factory=dict)


class FakeHub:
    """The server and its state. Use as a context manager; `url` is the endpoint to give the client."""

    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self.tokens = dict(tokens or {})  # token -> user name
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.drop_uploads = False
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _Handler)
        self._server.daemon_threads = True
        self._server.hub = self  # type: ignore[attr-defined]
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        # A short poll interval: shutdown() waits for the serving loop to notice, up to one interval.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def add_dataset(self, repo_id: str, files: dict[str, bytes], private: bool = False) -> str:
        """A dataset repo `user/name` holding `files` ({path: bytes}), as one commit; returns its sha."""
        repo = self.repos.setdefault(f"{DATASETS}{repo_id}", Repo(private=private))
        lines = [{"key": "header", "value": {"summary": "add files"}}]
        lines += [{"key": "file", "value": {"path": path, "content": base64.b64encode(data).decode()}}
                  for path, data in files.items()]
        with self.lock:
            return self.commit(repo, lines)

    def paths_requested(self, method: str) -> list[str]:
        return [path for m, path in self.requests if m == method]

    # --- state changes, called by the handler under the lock ------------------------------------------------

    def commit(self, repo: Repo, lines: list[dict]) -> str:
        header = lines[0]
        if header.get("key") != "header":
            raise ValueError("the first ndjson line must be the header")
        files = dict(repo.files)
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
                repo.lfs_paths.discard(value["path"])
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    raise ValueError(f"LFS object {value['oid']} was never uploaded")
                files[value["path"]] = self.lfs_objects[value["oid"]]
                repo.lfs_paths.add(value["path"])
            elif line["key"] == "deletedFile":
                files.pop(value["path"], None)
            else:
                raise ValueError(f"unsupported commit operation {line['key']!r}")
        digest = hashlib.sha1(repo.head.encode() + json.dumps(header, sort_keys=True).encode())
        for path in sorted(files):
            digest.update(path.encode() + hashlib.sha256(files[path]).digest())
        repo.head = digest.hexdigest()
        repo.files = files
        repo.snapshots[repo.head] = files
        return repo.head

    def oid(self, repo: Repo, path: str) -> str:
        data = repo.files[path]
        return hashlib.sha256(data).hexdigest() if path in repo.lfs_paths else git_blob_sha1(data)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real Hub: every response carries Content-Length

    def log_message(self, format: str, *args: object) -> None:  # keep the test output quiet
        pass

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined]

    # --- plumbing ---------------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers)

    def _user(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return self.hub.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None

    def _require_user(self) -> bool:
        """Write routes need a known token; an unknown one gets the real Hub's 401."""
        if self._user() is None:
            self._error(401, "Invalid credentials in Authorization header")
            return False
        return True

    def _repo(self, repo_id: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None or (repo.private and self._user() is None):
            self._error(404, "Repository not found", "RepoNotFound")
            return None
        return repo

    def _write_target(self, repo_id: str) -> Repo | None:
        """The repo a write route acts on: a known token (else 401), then a repo it can see (else 404).
        None when the error response has been sent."""
        return self._repo(repo_id) if self._require_user() else None

    def _dispatch(self) -> None:
        if self.client_address[0] != LOOPBACK:
            self._error(403, "the stand-in Hub only serves loopback clients")
            return
        path = unquote(self.path.split("?")[0])
        with self.hub.lock:
            self.hub.requests.append((self.command, path))
        body = self._read_body() if self.command in ("POST", "PUT") else b""
        for methods, pattern, route in _ROUTES:
            match = re.fullmatch(pattern, path)
            if self.command in methods and match:
                route(self, body, **match.groupdict())
                return
        self._error(404, f"no route for {self.command} {path}")

    do_GET = do_HEAD = do_POST = do_PUT = _dispatch

    # --- routes -----------------------------------------------------------------------------------------------

    def create_repo(self, body: bytes) -> None:
        if not self._require_user():
            return
        payload = json.loads(body)
        repo_id = f"{payload.get('organization') or self._user()}/{payload['name']}"
        url = f"{self.hub.url}/{repo_id}"
        with self.hub.lock:
            if repo_id in self.hub.repos:
                self._json(409, {"error": "You already created this model repo", "url": url})
                return
            self.hub.repos[repo_id] = Repo(private=payload.get("visibility") == "private")
        self._json(200, {"url": url, "name": repo_id})

    def repo_info(self, body: bytes, repo_id: str, revision: str | None) -> None:
        if self.headers.get("Authorization") and not self._require_user():
            return
        repo = self._repo(repo_id)
        if repo is None:
            return
        self._json(200, {"id": repo_id, "sha": repo.head, "private": repo.private,
                         "siblings": [{"rfilename": p} for p in sorted(repo.files)]})

    def validate_yaml(self, body: bytes) -> None:
        content = json.loads(body)["content"]
        errors = _front_matter_errors(content)
        self._json(400 if errors else 200, {"errors": [{"message": e} for e in errors], "warnings": []})

    def preupload(self, body: bytes, repo_id: str, revision: str) -> None:
        repo = self._write_target(repo_id)
        if repo is None:
            return
        answers = []
        for f in json.loads(body)["files"]:
            sample = base64.b64decode(f["sample"])
            is_text = b"\0" not in sample
            lfs = f["path"].endswith(".safetensors") or not is_text or f["size"] >= REGULAR_FILE_LIMIT
            oid = self.hub.oid(repo, f["path"]) if f["path"] in repo.files else None
            answers.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular",
                            "shouldIgnore": False, "oid": oid})
        self._json(200, {"files": answers, "commitOid": repo.head})

    def lfs_batch(self, body: bytes, repo_id: str) -> None:
        if self._write_target(repo_id) is None:
            return
        objects = []
        for obj in json.loads(body)["objects"]:
            answer = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.hub.lfs_objects:  # already stored: no "actions", the client skips it
                href = f"{self.hub.url}/lfs/{obj['oid']}"
                answer["actions"] = {"upload": {"href": href}, "verify": {"href": f"{href}/verify"}}
            objects.append(answer)
        self._json(200, {"transfer": "basic", "objects": objects})

    def lfs_upload(self, body: bytes, oid: str) -> None:
        if self.hub.drop_uploads:
            # Half the bytes have arrived when the line goes dead: no status line, the socket just closes.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if hashlib.sha256(body).hexdigest() != oid:
            self._error(400, f"uploaded bytes do not hash to {oid}")
            return
        with self.hub.lock:
            self.hub.lfs_objects[oid] = body
        self._send(200)

    def lfs_verify(self, body: bytes, oid: str) -> None:
        stored = self.hub.lfs_objects.get(oid)
        if stored is None or len(stored) != json.loads(body)["size"]:
            self._error(404, f"LFS object {oid} is missing or has the wrong size")
            return
        self._json(200, {"success": True})

    def commit(self, body: bytes, repo_id: str, revision: str) -> None:
        repo = self._write_target(repo_id)
        if repo is None:
            return
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        with self.hub.lock:
            try:
                sha = self.hub.commit(repo, lines)
            except (ValueError, KeyError) as err:
                self._error(422, str(err))
                return
        self._json(200, {"commitUrl": f"{self.hub.url}/{repo_id}/commit/{sha}", "commitOid": sha,
                         "success": True})

    def resolve(self, body: bytes, repo_id: str, revision: str, path: str) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        files = repo.files if revision == "main" else repo.snapshots.get(revision)
        if files is None:
            self._error(404, f"Revision {revision} not found", "RevisionNotFound")
            return
        if path not in files:
            self._error(404, f"Entry {path} not found", "EntryNotFound")
            return
        data = files[path]
        oid = self.hub.oid(repo, path) if revision == "main" else git_blob_sha1(data)
        headers = {"ETag": f'"{oid}"', "X-Repo-Commit": repo.head if revision == "main" else revision,
                   "Content-Type": "application/octet-stream"}
        if path in repo.lfs_paths:
            headers.update({"X-Linked-Etag": f'"{oid}"', "X-Linked-Size": str(len(data))})
        self._send(200, data, headers)


    # Dataset repos live in the same table under "datasets/user/name"; the client reads them by these routes.
    def dataset_info(self, body: bytes, repo_id: str, revision: str | None) -> None:
        self.repo_info(body, f"{DATASETS}{repo_id}", revision)

    def dataset_resolve(self, body: bytes, repo_id: str, revision: str, path: str) -> None:
        self.resolve(body, f"{DATASETS}{repo_id}", revision, path)

    def dataset_tree(self, body: bytes, repo_id: str, revision: str, path: str | None) -> None:
        """The listing snapshot_download asks for (recursive): every file, and every folder above one."""
        repo = self._repo(f"{DATASETS}{repo_id}")
        if repo is None:
            return
        files = repo.files if revision in ("main", repo.head) else repo.snapshots.get(revision, {})
        prefix = f"{path}/" if path else ""
        folders = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        entries = [{"type": "directory", "path": d, "oid": "0" * 40} for d in folders if d.startswith(prefix)]
        entries += [{"type": "file", "path": p, "size": len(data), "oid": git_blob_sha1(data)}
                    for p, data in sorted(files.items()) if p.startswith(prefix)]
        self._json(200, entries)


DATASETS = "datasets/"
_REPO = r"(?P<repo_id>[^/]+/[^/]+?)"
_ROUTES = [
    (("GET",), rf"/api/datasets/{_REPO}(?:/revision/(?P<revision>[^/]+))?", _Handler.dataset_info),
    (("GET",), rf"/api/datasets/{_REPO}/tree/(?P<revision>[^/]+)(?:/(?P<path>.+))?", _Handler.dataset_tree),
    (("GET", "HEAD"), rf"/datasets/{_REPO}/resolve/(?P<revision>[^/]+)/(?P<path>.+)", _Handler.dataset_resolve),
    (("POST",), r"/api/repos/create", _Handler.create_repo),
    (("GET",), rf"/api/models/{_REPO}(?:/revision/(?P<revision>[^/]+))?", _Handler.repo_info),
    (("POST",), r"/api/validate-yaml", _Handler.validate_yaml),
    (("POST",), rf"/api/models/{_REPO}/preupload/(?P<revision>[^/]+)", _Handler.preupload),
    (("POST",), rf"/api/models/{_REPO}/commit/(?P<revision>[^/]+)", _Handler.commit),
    (("POST",), rf"/{_REPO}\.git/info/lfs/objects/batch", _Handler.lfs_batch),
    (("PUT",), r"/lfs/(?P<oid>[0-9a-f]{64})", _Handler.lfs_upload),
    (("POST",), r"/lfs/(?P<oid>[0-9a-f]{64})/verify", _Handler.lfs_verify),
    (("GET", "HEAD"), rf"/{_REPO}/resolve/(?P<revision>[^/]+)/(?P<path>.+)", _Handler.resolve),
]


def _front_matter_errors(content: str) -> list[str]:
    """What the Hub's validate-yaml would reject: unparsable front matter or a malformed model-index."""
    if not content.startswith("---\n"):
        return []
    try:
        meta = yaml.safe_load(content[4:].split("\n---\n", 1)[0])
    except yaml.YAMLError as err:
        return [f"front matter is not valid YAML: {err}"]
    if not isinstance(meta, dict):
        return ["front matter must be a mapping"]
    errors = []
    for entry in meta.get("model-index", []):
        for result in entry.get("results", []):
            if "type" not in result.get("task", {}):
                errors.append('"model-index[0].results[].task.type" is required')
            if not {"type", "name"} <= set(result.get("dataset", {})):
                errors.append('"model-index[0].results[].dataset" needs "type" and "name"')
            for metric in result.get("metrics", []):
                if not {"type", "value"} <= set(metric):
                    errors.append('"model-index[0].results[].metrics[]" needs "type" and "value"')
    return errors


def forbid_internet(monkeypatch) -> None:
    """Make any connection from this process to a non-loopback address fail loudly."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]  # type: ignore[index]
            if host not in (LOOPBACK, "::1", "localhost"):
                raise ConnectionRefusedError(f"test tried to reach {host}: tests must not touch the internet")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


TOKEN = "hf_minitrainTestToken7Qx2ZpLw9"  # alice's token on the stand-in Hub (the `hub` fixture's HF_TOKEN)


@contextmanager
def serving(monkeypatch, hf_home: Path, token: str | None, tokens: dict[str, str]) -> Iterator[FakeHub]:
    """A running stand-in Hub with the client pointed at it and the internet out of reach."""
    forbid_internet(monkeypatch)
    with FakeHub(tokens) as hub:
        point_client_at(monkeypatch, hub.url, hf_home, token)
        yield hub


def point_client_at(monkeypatch, endpoint: str, hf_home: Path, token: str | None) -> None:
    """Point the huggingface_hub client at `endpoint`, with its cache and token file under `hf_home`.

    The environment variables are what a subprocess (the CLI) reads; the client reads them once at import, so
    the same values are also patched into `huggingface_hub.constants` for in-process calls.
    """
    from huggingface_hub import constants

    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "0"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HF_TOKEN_PATH", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    if token is not None:
        monkeypatch.setenv("HF_TOKEN", token)
    patched = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": str(hf_home / "hub"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_STORED_TOKENS_PATH": str(hf_home / "stored_tokens"),
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_OFFLINE": False,
    }
    for name, value in patched.items():
        monkeypatch.setattr(constants, name, value)


# --- a finished run to export and publish -------------------------------------------------------------------------

TINY_MODEL = {"n_layer": 2, "n_head": 2, "d_model": 8, "d_ff": 16, "vocab_size": 24, "max_seq_len": 16,
              "dropout": 0.0}
RECORDS = ["comer|R1|comí", "comer|P1|como", "vivir|R1|viví", "vivir|P1|vivo", "mover|P1|muevo"]


def make_run(root: Path, seed: int = 0, model: dict | None = None) -> Path:
    """A run folder as training leaves it (manifest, resolved config, results, model file), with random weights;
    `model`: its model config (default TINY_MODEL, a MiniGPT).

    Export, card and publish only read files, so the weights need no training; the data files are real.
    """
    import numpy as np

    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.models.registry import parameter_shapes
    from minitrain.runs.model_files import save_model_file

    data = root / "data"
    data.mkdir(parents=True)
    CharTokenizer.from_texts(RECORDS).save(data / "vocab.json")
    for split, lines in (("train", RECORDS[:3]), ("val", RECORDS[3:])):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), "utf-8")

    run = root / "run"
    rng = np.random.default_rng(seed)
    model = model or TINY_MODEL
    state = {name: (0.1 * rng.standard_normal(shape)).astype(np.float32)
             for name, shape in parameter_shapes(model)}
    model_path = root / "models" / f"{model.get('type', 'minigpt')}-test.safetensors"
    save_model_file(model_path, state, model)
    config = {
        "model": dict(model),
        "data": {"train_path": str(data / "train.jsonl"), "val_path": str(data / "val.jsonl"),
                 "vocab_path": str(data / "vocab.json"), "heldout_policy": "verbs_4", "loss_on": "answer"},
        "optimizer": {"type": "adamw", "lr_max": 0.001, "lr_min": 0.0001, "beta1": 0.9, "beta2": 0.95,
                      "weight_decay": 0.1, "clip": 1.0},
        "scheduler": {"type": "warmup_cosine", "warmup_steps": 5, "total_steps": 40},
        "training": {"batch_size": 4, "rng_seed": 42, "data_seed": 7},
    }
    run.mkdir()
    (run / "config.resolved.yaml").write_text(yaml.safe_dump(config), "utf-8")
    manifest = {"seed": 42, "data_seed": 7, "status": "completed", "git_sha": "abc123", "config": config,
                "versions": {"minitrain": "0.1.0"}, "steps_done": 38, "train_wall_seconds": 12.5,
                "hardware": {"cpu_model": "Test CPU", "cpu_cores": 2, "ram_gb": 8.0}}
    (run / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    results = {"train_ppl": 1.31, "val_ppl": 1.87, "best_val_step": 40, "best_val_ppl": 1.87,
               "ngram_baseline_val_ppl": 7.5, "beats_baseline": True, "ppl_improvement_pct": 75.07,
               "val_exact_match": 0.625, "wall_seconds": 12.5, "peak_rss_mb": 100.0,
               "model_path": str(model_path)}
    (run / "results.json").write_text(json.dumps(results), "utf-8")
    return run
