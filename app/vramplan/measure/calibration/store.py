"""The calibration database: one SQLite row per measured sample (stdlib sqlite3).

WAL journal and a busy timeout: several processes (a sweep of `measure --calibrate` runs, or
several users' jobs) add samples to one file at the same time and none is lost; each sample is
one INSERT in its own transaction. A sample's `uid` is unique, so importing an export twice, or
merging two machines' exports, adds each sample once.

Where the file cannot be written (a read-only or missing home directory), the store is a copy in
memory for this process: readable, samples recorded there last until the process ends, and
`Store.notice` says so in one line.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from pathlib import Path

from ...errors import VramplanError
from . import files

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0
SQLITE_MAGIC = b"SQLite format 3\x00"
PEAKS = files.PEAKS

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,               -- random per sample (content hash for old files)
    gpu_id TEXT NOT NULL,                   -- hardware-database id
    driver_version TEXT,                    -- NVIDIA driver, when known
    torch_version TEXT,
    cuda_version TEXT,                      -- torch.version.cuda, when known
    host TEXT,                              -- machine that measured it
    recorded_at TEXT,                       -- ISO 8601 UTC, NULL for samples of old files
    scenario_json TEXT,                     -- the normalised scenario
    estimate_peak_allocated_bytes INTEGER, estimate_peak_reserved_bytes INTEGER,
    estimate_device_used_bytes INTEGER,
    measured_peak_allocated_bytes INTEGER, measured_peak_reserved_bytes INTEGER,
    measured_device_used_bytes INTEGER,
    ratios_json TEXT NOT NULL               -- {"device_used_bytes": 1.04, "activations": 1.1, ...}
)""",
    """CREATE INDEX IF NOT EXISTS samples_by_gpu ON samples (gpu_id, torch_version, cuda_version,
                                                         driver_version)""")
COLUMNS = ("uid", "gpu_id", "driver_version", "torch_version", "cuda_version", "host",
           "recorded_at", "scenario_json", *(f"estimate_{p}" for p in PEAKS),
           *(f"measured_{p}" for p in PEAKS), "ratios_json")

_MEMORY: dict[str, "Store"] = {}   # in-memory stand-ins for unwritable files, by path


class Store:
    """An open calibration database. mode: "read-write" (the file), "read-only" (a copy of an
    unwritable file, or a JSON file, in memory) or "memory" (no file could be made)."""

    def __init__(self, conn: sqlite3.Connection, path: Path | None, mode: str,
                 notice: str | None = None, writable: bool = True):
        self.conn, self.path, self.mode, self.notice = conn, path, mode, notice
        self.writable = writable

    def add(self, samples: list[dict]) -> int:
        """Insert samples (export shape) in one transaction; returns how many were new."""
        if not self.writable:
            raise VramplanError(self.notice or "calibration store is read only")
        rows = [_row(s) for s in samples]
        sql = (f"INSERT OR IGNORE INTO samples ({', '.join(COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(COLUMNS))})")
        try:
            with _Transaction(self.conn, self.path):
                before = self.conn.total_changes
                self.conn.executemany(sql, rows)
                return self.conn.total_changes - before
        except sqlite3.DatabaseError as exc:
            raise VramplanError(f"calibration database {self.path}: {exc}") from None

    def samples(self, gpu_id: str | None = None) -> list[dict]:
        """Samples in the order they were recorded (export shape)."""
        where, args = ("WHERE gpu_id = ?", (gpu_id,)) if gpu_id else ("", ())
        try:
            cur = self.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM samples {where} ORDER BY id",
                                    args)
            return [_sample(dict(zip(COLUMNS, r))) for r in cur.fetchall()]
        except sqlite3.DatabaseError as exc:
            raise VramplanError(f"calibration database {self.path}: {exc}") from None

    def count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM samples").fetchone()[0]

    def close(self) -> None:
        if not any(self is st for st in _MEMORY.values()):   # the stand-ins live on
            self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, waiting out other writers up to BUSY_TIMEOUT_S."""

    def __init__(self, conn, path):
        self.conn, self.path = conn, path

    def __enter__(self):
        _retry(lambda: self.conn.execute("BEGIN IMMEDIATE"), self.path)

    def __exit__(self, kind, exc, tb):
        if kind is None:
            try:
                _retry(lambda: self.conn.execute("COMMIT"), self.path)
                return False
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        return False


def _retry(fn, path):
    """Run fn, retrying while SQLite says the database is locked (the busy handler does not
    cover every case, e.g. switching to WAL while another process creates the file)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise VramplanError(f"calibration database {path} stayed locked by another "
                                    f"process for {BUSY_TIMEOUT_S:.0f} s") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _row(s: dict) -> tuple:
    soft = s.get("software") or {}
    est, meas = s.get("estimate") or {}, s.get("measured") or {}
    scn = s.get("scenario")
    return (s["uid"], s["gpu"], soft.get("driver"), soft.get("torch"), soft.get("cuda"),
            s.get("host"), s.get("recorded_at"),
            None if scn is None else json.dumps(scn, sort_keys=True),
            *(est.get(p) for p in PEAKS), *(meas.get(p) for p in PEAKS),
            json.dumps(s["ratios"], sort_keys=True))


def _sample(r: dict) -> dict:
    return {"uid": r["uid"], "gpu": r["gpu_id"],
            "software": {"torch": r["torch_version"], "cuda": r["cuda_version"],
                         "driver": r["driver_version"]},
            "host": r["host"], "recorded_at": r["recorded_at"],
            "scenario": None if r["scenario_json"] is None else json.loads(r["scenario_json"]),
            "estimate": {p: r[f"estimate_{p}"] for p in PEAKS},
            "measured": {p: r[f"measured_{p}"] for p in PEAKS},
            "ratios": json.loads(r["ratios_json"])}


def _prepare(conn: sqlite3.Connection, path, wal: bool, probe_write: bool = False) -> None:
    """Busy timeout, WAL, the tables; probe_write: fail now (sqlite3.OperationalError) when the
    file turns out read only (SQLite opens an unwritable file read only without a word)."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if wal and _retry(lambda: conn.execute("PRAGMA journal_mode").fetchone()[0], path) != "wal":
        mode = _retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0], path)
        if mode != "wal":
            raise VramplanError(f"calibration database {path}: cannot switch to WAL ({mode})")
    with _Transaction(conn, path):
        for stmt in SCHEMA:
            conn.execute(stmt)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise VramplanError(f"calibration database {path} has schema version {row[0]}, "
                                f"newer than this vramplan ({SCHEMA_VERSION}): upgrade vramplan")
        if probe_write:
            conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")


def _connect(path: Path, mode: str) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(str(path)) + "?mode=" + mode
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _memory(path, mode: str, notice: str | None, samples=(), writable: bool = True) -> Store:
    conn = sqlite3.connect(":memory:", isolation_level=None,
                           check_same_thread=False)   # a stand-in lives on, the app has threads
    _prepare(conn, ":memory:", wal=False)
    st = Store(conn, path, mode, notice, writable)
    if samples:
        st.writable = True
        st.add(list(samples))
        st.writable = writable
    return st


def is_sqlite(path: Path) -> bool | None:
    """True: an SQLite file (or an empty one); False: something else; None: no file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise VramplanError(f"calibration database {path} is a directory") from None
    except OSError as exc:
        raise VramplanError(f"calibration database {path}: cannot read it: "
                            f"{exc.strerror or exc}") from None
    return head == SQLITE_MAGIC or head == b""


def open_store(path: Path, write: bool = False, legacy: Path | None = None,
               unavailable: str | None = None) -> Store:
    """The store at `path`. write: create the file when missing. legacy: an old-format JSON file
    imported once when the database is created (read in memory while it does not exist).
    unavailable: why no file can be used at all (no home directory): an in-memory store."""
    key = str(path)
    if unavailable:
        return _MEMORY.setdefault(key, _memory(None, "memory", unavailable))
    if key in _MEMORY:
        return _MEMORY[key]
    kind = is_sqlite(path)
    if kind is False:
        samples = files.read(path)
        notice = (f"calibration file {path} is JSON (an export or the old format): read only; "
                  f"`vramplan calibration import {path}` puts it into a database")
        if write:
            raise VramplanError(f"{notice} to record into")
        return _memory(path, "read-only", notice, samples, writable=False)
    if kind is None and not write:
        old = files.read(legacy) if legacy and legacy.exists() else ()
        return _memory(path, "read-only", None, old, writable=False)
    try:
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path, "rwc" if write else "rw")
        try:
            _prepare(conn, path, wal=True, probe_write=write)
            if write and legacy is not None:
                _import_legacy(Store(conn, path, "read-write"), legacy)
        except BaseException:
            conn.close()
            raise
        if write or os.access(path, os.W_OK):
            return Store(conn, path, "read-write")
        return Store(conn, path, "read-only", f"calibration database {path} is not writable: "
                     f"read only, new measurements are kept in memory for this run only")
    except (OSError, sqlite3.OperationalError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
    except sqlite3.DatabaseError as exc:
        raise VramplanError(f"calibration database {path}: {exc}") from None
    if kind is None:
        notice = (f"cannot create the calibration database {path} ({reason}): measurements "
                  f"are kept in memory for this run only (set VRAMPLAN_CALIBRATION to a "
                  f"writable file)")
        return _MEMORY.setdefault(key, _memory(path, "memory", notice))
    notice = (f"calibration database {path} is not writable ({reason}): read only, new "
              f"measurements are kept in memory for this run only")
    st = _memory(path, "read-only", notice)
    try:
        src = _connect_readonly(path)
        src.backup(st.conn)
        src.close()
    except sqlite3.DatabaseError as exc:
        raise VramplanError(f"calibration database {path}: {exc}") from None
    return _MEMORY.setdefault(key, st)


def _connect_readonly(path: Path) -> sqlite3.Connection:
    try:
        conn = _connect(path, "ro")
        conn.execute("SELECT count(*) FROM samples").fetchone()
        return conn
    except sqlite3.OperationalError:  # WAL in a read-only folder: no -shm can be made
        uri = "file:" + urllib.parse.quote(str(path)) + "?mode=ro&immutable=1"
        return sqlite3.connect(uri, uri=True, isolation_level=None)


def _import_legacy(st: Store, legacy: Path) -> None:
    done = st.conn.execute("SELECT value FROM meta WHERE key = 'legacy_json'").fetchone()
    if done is not None or not legacy.exists():
        return
    samples = files.read(legacy)
    with _Transaction(st.conn, st.path):
        if st.conn.execute("SELECT 1 FROM meta WHERE key = 'legacy_json'").fetchone():
            return
        st.conn.executemany(
            f"INSERT OR IGNORE INTO samples ({', '.join(COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(COLUMNS))})", [_row(s) for s in samples])
        st.conn.execute("INSERT INTO meta VALUES ('legacy_json', ?)", (str(legacy),))


def forget_memory() -> None:
    """Drop the in-memory stand-ins (tests; a long-running app after fixing the home folder)."""
    _MEMORY.clear()
