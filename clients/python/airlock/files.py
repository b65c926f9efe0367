"""sbx.files: the sandbox's files through the daemon's file API (only
inside its scratch: /work, /tmp; no link followed; as the sandbox's user)."""

from dataclasses import dataclass

from .errors import BusyError, InvalidRequestError, NotFoundError
from ._http import quote_path


@dataclass
class EntryInfo:
    """One directory entry: name, type (file, dir, symlink, other), path
    (the sandbox path), size in bytes, mode (permission bits)."""

    name: str
    type: str
    path: str
    size: int = 0
    mode: int = 0


class Files:
    """Reads, writes and lists the sandbox's files."""

    def __init__(self, sandbox):
        self._sbx = sandbox

    def _url(self, path, query=""):
        return "%s/files/%s%s" % (self._sbx._path, quote_path(path), query)

    def write(self, path, data):
        """Writes data (str, as UTF-8, or bytes) to the file at path (an
        absolute sandbox path; created 0644 or truncated, at most 32 MiB),
        making its missing parent directories first, as E2B's does.
        Returns the file's EntryInfo."""
        if isinstance(data, str):
            data = data.encode()
        data = bytes(data)
        try:
            doc = self._sbx._json("PUT", self._url(path), data)
        except NotFoundError:
            parent = path.rstrip("/").rsplit("/", 1)[0]
            if not parent:
                raise
            self.make_dir(parent)
            doc = self._sbx._json("PUT", self._url(path), data)
        return EntryInfo(name=path.rstrip("/").rsplit("/", 1)[-1], type="file", path=path,
                         size=doc.get("size", len(data)))

    def read(self, path, format="text"):
        """The file at path: a str (format "text", UTF-8) or bytes (format
        "bytes"). NotFoundError when it does not exist; InvalidRequestError
        for a link or a directory."""
        if format not in ("text", "bytes"):
            raise ValueError("format %r: expected \"text\" or \"bytes\"" % (format,))
        st, ctype, data = self._sbx._request("GET", self._url(path))
        if not ctype.startswith("application/octet-stream"):
            raise InvalidRequestError("GET %s: not a regular file (a directory?)" % path, st)
        return data if format == "bytes" else data.decode()

    def list(self, path):
        """The entries of the directory at path, as EntryInfo (links
        listed, not followed)."""
        doc = self._sbx._json("GET", self._url(path))
        if "entries" not in doc:
            raise InvalidRequestError("GET %s: not a directory" % path)
        base = path.rstrip("/")
        return [EntryInfo(name=e["name"], type=e["type"], path="%s/%s" % (base, e["name"]),
                          size=e.get("size", 0), mode=e.get("mode", 0))
                for e in doc["entries"]]

    def exists(self, path):
        """True when path names a file, directory or link in the scratch."""
        parent, _, name = path.rstrip("/").rpartition("/")
        try:
            if not parent:  # a scratch face (/work, /tmp): listed if it is one
                self.list(path)
                return True
            return any(e.name == name for e in self.list(parent))
        except NotFoundError:
            return False

    def remove(self, path):
        """Removes the file, link or directory at path, a directory with
        everything in it (as E2B's does; links inside are removed, never
        followed). NotFoundError when there is nothing at path."""
        try:
            self._sbx._json("DELETE", self._url(path))
            return
        except BusyError as e:  # 409: a directory that is not empty
            if e.status != 409:
                raise
        for e in self.list(path):
            self.remove(e.path)
        self._sbx._json("DELETE", self._url(path))

    def make_dir(self, path):
        """Makes the directory at path and its missing parents; False when
        it existed already, True when it was made."""
        parts = [p for p in path.split("/") if p]
        made = False
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            try:
                self._sbx._json("PUT", self._url(sub, "?mkdir=1"), b"")
                made = True
            except BusyError:  # 409: it exists
                made = False
        return made
